// hook/tracing/noalloc_unittest.cc — the launch-path functions must not
// allocate. malloc/calloc/realloc/memalign and operator new are interposed in
// this test binary and counted on the calling thread while a scope is armed.
// Single-threaded test (the background thread is never started).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "gtest/gtest.h"
#include "hook/core_api.h"
#include "hook/process/fake_python_for_test.h"
#include "hook/process/runtime.h"
#include "hook/tracing/fake_cuda_for_test.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
thread_local bool t_armed = false;
std::atomic<uint64_t> g_allocations{0};
inline void Note() {
  if (t_armed) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  Note();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  Note();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  Note();
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  Note();
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) {
  Note();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  Note();
  *out = __libc_memalign(align, n);
  return *out != nullptr ? 0 : ENOMEM;
}
void free(void* p) { __libc_free(p); }
}

// operator new goes through the counted malloc above (counted once there).
void* operator new(size_t n) {
  void* p = malloc(n != 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }

namespace xpu::hook {
namespace {

using namespace xpu::hook::testing;  // NOLINT

constexpr int kCalls = 10000;

class Armed {
 public:
  Armed() : start_(g_allocations.load()) { t_armed = true; }
  ~Armed() { t_armed = false; }
  uint64_t count() const { return g_allocations.load() - start_; }

 private:
  uint64_t start_;
};

class NoAllocTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Config c =
        LoadConfig([](const char*) -> const char* { return nullptr; }, getpid(), getuid(), "h");
    c.daemon = false;
    c.daemon_socket = "/nonexistent-xpu-dir/daemon.sock";
    c.ring_capacity = 1u << 14;
    c.event_pool = 256;
    c.pending_max = 256;
    std::string err;
    ASSERT_TRUE(InitRuntime(c, getpid(), &err)) << err;
    MarkStartedForTest();
  }
  static void DrainRing() {
    xpu_ring_header_v1* h = GetRuntime()->ring.header();
    __atomic_store_n(&h->read_index, __atomic_load_n(&h->write_index, __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
  }
  static uint32_t GemmSig(uint32_t m) {
    xpu_signature_v1 s;
    memset(&s, 0, sizeof(s));
    s.kind = XPU_OP_GEMM;
    s.m = m;
    return InternSignature(s, "cublasGemmEx", 12);
  }
};

TEST_F(NoAllocTest, InterposerCountsAllocations) {
  Armed a;
  std::string* s = new std::string(100, 'x');
  EXPECT_GE(a.count(), 1u);  // proves the counter can fail the tests below
  delete s;
}

TEST_F(NoAllocTest, RingWrite) {
  Runtime* rt = GetRuntime();
  xpu_record_v1 r{};
  r.sig_id = 1;
  Armed a;
  for (int i = 0; i < kCalls; ++i) {
    r.seq = static_cast<uint32_t>(i);
    EXPECT_TRUE(rt->ring.Write(r));
    if (i % 1000 == 999) DrainRing();
  }
  EXPECT_EQ(a.count(), 0u);
}

TEST_F(NoAllocTest, InternSignatureHit) {
  uint32_t id = GemmSig(64);
  ASSERT_NE(id, 0u);
  xpu_signature_v1 s;
  memset(&s, 0, sizeof(s));
  s.kind = XPU_OP_GEMM;
  s.m = 64;
  Armed a;
  uint32_t same = 0;
  for (int i = 0; i < kCalls; ++i) same += InternSignature(s, "cublasGemmEx", 12) == id;
  EXPECT_EQ(same, static_cast<uint32_t>(kCalls));
  EXPECT_EQ(a.count(), 0u);
}

TEST_F(NoAllocTest, EmitHostInterval) {
  uint32_t id = GemmSig(65);
  Armed a;
  for (int i = 0; i < kCalls; ++i) {
    EmitHostInterval(id, 100, 200, static_cast<uint32_t>(i), 0);
    if (i % 1000 == 999) DrainRing();
  }
  EXPECT_EQ(a.count(), 0u);
  DrainRing();
}

TEST_F(NoAllocTest, GpuOpWhenInactive) {
  uint32_t id = GemmSig(66);
  SetEnabled(false);
  {
    Armed a;
    for (int i = 0; i < kCalls; ++i) {
      OpHandle h = BeginGpuOp(id, nullptr, 0, 0);
      EXPECT_EQ(h.slot, 0u);
      EndGpuOp(h, nullptr, 0);
    }
    EXPECT_EQ(a.count(), 0u);
  }
  SetEnabled(true);
}

TEST_F(NoAllocTest, GpuOpWithoutRuntimeOrPool) {
  Runtime* rt = GetRuntime();
  uint32_t id = GemmSig(67);
  uint64_t empty = rt->ring.Counter(XPU_CNT_EVENT_POOL_EMPTY);
  {
    Armed a;  // no CUDA runtime resolved: not tracked
    for (int i = 0; i < kCalls; ++i) EndGpuOp(BeginGpuOp(id, nullptr, 0, 0), nullptr, 0);
    EXPECT_EQ(a.count(), 0u);
  }
  EXPECT_EQ(rt->ring.Counter(XPU_CNT_EVENT_POOL_EMPTY), empty + kCalls);
  InstallFakeCuda(&rt->cuda);
  rt->cuda_ready.store(true);
  {
    Armed a;  // runtime present, pool requested but not created yet
    for (int i = 0; i < kCalls; ++i) EndGpuOp(BeginGpuOp(id, nullptr, 0, 0), nullptr, 0);
    EXPECT_EQ(a.count(), 0u);
  }
  EXPECT_EQ(rt->pool.state(0), EventPool::kRequested);
  // Only the occurrences the sampler picks need events (timed): without
  // them they are recorded untracked and counted; the others need none.
  uint64_t picks = 0;
  for (uint32_t n = kCalls + 1; n <= 2 * kCalls; ++n) {
    picks += SampleDecision(n, rt->config.sample_first, rt->config.sample_every);
  }
  EXPECT_EQ(rt->ring.Counter(XPU_CNT_EVENT_POOL_EMPTY), empty + kCalls + picks);
}

TEST_F(NoAllocTest, TrackedGpuOpAndCompletion) {
  Runtime* rt = GetRuntime();
  InstallFakeCuda(&rt->cuda);
  rt->cuda_ready.store(true);
  rt->pool.ServiceRequests(&rt->clock);  // allocates: outside the armed scope
  if (rt->pool.state(0) != EventPool::kReady) {
    EndGpuOp(BeginGpuOp(GemmSig(1), nullptr, 0, 0), nullptr, 0);
    rt->pool.ServiceRequests(&rt->clock);
  }
  ASSERT_EQ(rt->pool.state(0), EventPool::kReady);
  g_auto_complete = true;
  uint32_t id = GemmSig(68);
  const void* stream = reinterpret_cast<const void*>(0x1234);
  // Earlier tests left ops without evidence on another stream (and a full
  // lane): out of the way.
  rt->worker.PollOnce(NowNs());
  NoteHostSync(nullptr, true);
  rt->worker.PollOnce(NowNs());
  ASSERT_EQ(rt->worker.pending_count(), 0u);
  DrainRing();
  uint64_t written = rt->ring.Counter(XPU_CNT_RECORDS_WRITTEN);
  Armed a;
  for (int i = 0; i < kCalls; ++i) {
    OpHandle h = BeginGpuOp(id, stream, 0, 0);
    EXPECT_NE(h.slot, 0u);
    EndGpuOp(h, stream, 0);
    if (i % 64 == 63) {
      rt->worker.PollOnce(NowNs());
      DrainRing();
    }
  }
  NoteHostSync(stream, false);  // completes the ops after the last marker
  rt->worker.PollOnce(NowNs());
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(rt->ring.Counter(XPU_CNT_RECORDS_WRITTEN), written + kCalls);
}

// Python call sites of sampled launches: the hook's side of the walk, the
// naming of a new stack and the link record allocate nothing (the CPython
// double allocates nothing either, so every allocation would be ours).
TEST_F(NoAllocTest, PythonCallsiteMissHitAndLink) {
  FakePyCode code;
  InitCode(&code, "Block.forward", "forward", "/src/model.py");
  FakePyFrame frames[2];
  frames[0].code = frames[1].code = &code;
  frames[0].line = 10;
  frames[1].line = 20;
  LinkFrames(frames, 2);
  Py().current = &frames[0];
  Py().AcquireGil();
  PyApi api = FakePyApi();
  SetPyApiForTest(&api, 8);
  const uint32_t gemm = GemmSig(69);
  OpHandle h = BeginGpuOp(gemm, nullptr, 0, 0);
  EndGpuOp(h, nullptr, 0);
  ASSERT_EQ(h.picked, 1);  // the first occurrence
  uint32_t sig = 0;
  {
    Armed a;
    sig = CapturePyCallsite();
    EXPECT_EQ(a.count(), 0u);
  }
  ASSERT_NE(sig, 0u);
  {
    Armed a;
    for (int i = 0; i < kCalls; ++i) {
      EXPECT_EQ(CapturePyCallsite(), sig);
      EmitCallsiteLink(h, sig);
      if (i % 1000 == 999) DrainRing();
    }
    EXPECT_EQ(a.count(), 0u);
  }
  SetPyApiForTest(nullptr, 0);
  Py().current = nullptr;
  Py().ReleaseGil();
  DrainRing();
}

}  // namespace
}  // namespace xpu::hook
