// hook/process/py_callsite_unittest.cc — Python call sites on sampled launches
// (py_callsite.h) against the CPython double of fake_python_for_test.h and a
// real runtime: stack names and shared signatures, the GIL rules, depth,
// reference balance, the cache, exceptions, long names, the link record and
// which launches the sampler picks. The end-to-end test with a real
// interpreter is python/tests/test_launch_callsites.py.
// One runtime per process: the tests share it (distinct signatures each).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hook/core_api.h"
#include "hook/process/fake_python_for_test.h"
#include "hook/process/py_callsite.h"
#include "hook/process/runtime.h"
#include "hook/ring/ring_reader_for_test.h"
#include "xpu/hook_api.h"

namespace xpu::hook {
namespace {

using namespace xpu::hook::testing;  // NOLINT

constexpr char kStack[] =
    "Model.forward@/src/model.py:120;train_step@/src/train.py:42;<module>@/src/train.py:300";

class PyCallsiteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (GetRuntime() != nullptr) return;
    Config c = LoadConfig([](const char*) -> const char* { return nullptr; }, getpid(), getuid(),
                          "testhost");
    c.daemon = false;
    c.daemon_socket = "/nonexistent-xpu-dir/daemon.sock";
    c.sample_first = 2;
    c.sample_every = 3;
    c.ring_capacity = 1024;
    std::string err;
    ASSERT_TRUE(InitRuntime(c, getpid(), &err)) << err;
    MarkStartedForTest();
  }

  void SetUp() override {
    FakePython& py = Py();
    py.initialized = true;
    py.has_qualname = true;
    py.error_set = false;
    py.back_fails = false;
    py.frame_walks = py.get_attrs = py.err_clears = py.incs = 0;
    py.AcquireGil();
    InitCode(&forward_, "Model.forward", "forward", "/src/model.py");
    InitCode(&step_, "train_step", "train_step", "/src/train.py");
    InitCode(&module_, "<module>", "<module>", "/src/train.py");
    frames_[0].code = &forward_;
    frames_[0].line = 120;
    frames_[1].code = &step_;
    frames_[1].line = 42;
    frames_[2].code = &module_;
    frames_[2].line = 300;
    LinkFrames(frames_, 3);
    py.current = &frames_[0];
    api_ = FakePyApi();
    SetPyApiForTest(&api_, 8);
  }
  void TearDown() override {
    SetPyApiForTest(nullptr, 0);
    Py().current = nullptr;
    Py().ReleaseGil();
  }

  static std::string SigName(uint32_t id) {
    const xpu_signature_v1& s = GetRuntime()->ring.signatures()[id];
    if (s.name_len <= XPU_SIG_NAME_INLINE) return std::string(s.name, strnlen(s.name, s.name_len));
    return std::string(GetRuntime()->ring.arena() + s.name_off, s.name_len);
  }
  static uint16_t SigKind(uint32_t id) { return GetRuntime()->ring.signatures()[id].kind; }
  static uint32_t GemmSig(uint32_t m) {
    xpu_signature_v1 s;
    std::memset(&s, 0, sizeof(s));
    s.kind = XPU_OP_GEMM;
    s.m = m;
    s.comm_rank = -1;
    s.peer = -1;
    s.device = -1;
    return InternSignature(s, "cublasGemmEx", 12);
  }
  // Frames and their code objects hold only the "interpreter's" reference.
  void ExpectOnlyInterpreterRefs(int pinned_forward, int pinned_step, int pinned_module) {
    for (const FakePyFrame& f : frames_) EXPECT_EQ(f.refs, 1);
    EXPECT_EQ(forward_.refs, 1 + pinned_forward);
    EXPECT_EQ(step_.refs, 1 + pinned_step);
    EXPECT_EQ(module_.refs, 1 + pinned_module);
    for (const FakePyCode* c : {&forward_, &step_, &module_}) {
      EXPECT_EQ(c->qualname.refs, 1);
      EXPECT_EQ(c->name.refs, 1);
      EXPECT_EQ(c->filename.refs, 1);
    }
  }

  PyApi api_;
  FakePyCode forward_, step_, module_;
  FakePyFrame frames_[3];
};

TEST_F(PyCallsiteTest, NamesTheStackInnermostFirstAndSharesThePythonSidesSignature) {
  const uint32_t sig = CapturePyCallsite();
  ASSERT_NE(sig, 0u);
  EXPECT_EQ(SigName(sig), kStack);
  EXPECT_EQ(SigKind(sig), XPU_OP_PY_CALLSITE);
  // What xputimer.callsite_sig() interns for the same frames.
  EXPECT_EQ(xpu_intern_host_signature(XPU_OP_PY_CALLSITE, kStack, sizeof(kStack) - 1, 0), sig);
  EXPECT_FALSE(Py().error_set);
}

TEST_F(PyCallsiteTest, CacheHitWalksFramesButNeverNamesAgainAndPinsCode) {
  const uint32_t sig = CapturePyCallsite();
  ASSERT_NE(sig, 0u);
  const int attrs = Py().get_attrs;
  EXPECT_EQ(attrs, 6);  // co_qualname + co_filename per frame
  EXPECT_EQ(CapturePyCallsite(), sig);
  EXPECT_EQ(Py().get_attrs, attrs);
  EXPECT_EQ(Py().frame_walks, 2);
  EXPECT_EQ(PyCallsiteCacheSize(), 1u);
  ExpectOnlyInterpreterRefs(1, 1, 1);
  // Another line of the innermost frame is another stack.
  frames_[0].line = 121;
  const uint32_t other = CapturePyCallsite();
  EXPECT_NE(other, sig);
  EXPECT_EQ(SigName(other).substr(0, 31), "Model.forward@/src/model.py:121");
  EXPECT_EQ(PyCallsiteCacheSize(), 2u);
  ExpectOnlyInterpreterRefs(2, 2, 2);
}

TEST_F(PyCallsiteTest, ReferencesBalanceWhenTheCurrentFrameIsANewReference) {
  api_ = FakePyApi(/*borrowed_frame=*/false);
  SetPyApiForTest(&api_, 8);
  const uint32_t sig = CapturePyCallsite();
  ASSERT_NE(sig, 0u);
  EXPECT_EQ(SigName(sig), kStack);
  EXPECT_EQ(CapturePyCallsite(), sig);
  ExpectOnlyInterpreterRefs(1, 1, 1);
}

TEST_F(PyCallsiteTest, WithoutTheGilNothingIsWalked) {
  Py().ReleaseGil();
  EXPECT_EQ(CapturePyCallsite(), 0u);
  Py().AcquireGil();
  // Another thread while this one holds the GIL (a C++ launcher thread).
  uint32_t from_other = 1;
  std::thread t([&] { from_other = CapturePyCallsite(); });
  t.join();
  EXPECT_EQ(from_other, 0u);
  Py().initialized = false;  // before Py_Initialize / after Py_Finalize
  EXPECT_EQ(CapturePyCallsite(), 0u);
  EXPECT_EQ(Py().frame_walks, 0);
  Py().initialized = true;
  Py().current = nullptr;  // GIL held, no Python frame (a C thread with the GIL)
  EXPECT_EQ(CapturePyCallsite(), 0u);
  EXPECT_EQ(PyCallsiteCacheSize(), 0u);
}

TEST_F(PyCallsiteTest, DepthBoundsTheWalkAndZeroTurnsItOff) {
  std::vector<FakePyFrame> deep(70);
  for (size_t i = 0; i < deep.size(); ++i) {
    deep[i].code = &step_;
    deep[i].line = static_cast<int>(i + 1);
  }
  LinkFrames(deep.data(), static_cast<int>(deep.size()));
  Py().current = deep.data();
  auto frames_in = [](uint32_t sig) {
    const std::string n = SigName(sig);
    return 1 + std::count(n.begin(), n.end(), ';');
  };
  const uint32_t eight = CapturePyCallsite();
  ASSERT_NE(eight, 0u);
  EXPECT_EQ(frames_in(eight), 8);
  SetPyApiForTest(&api_, 1000);  // clamped to kMaxPyStackDepth
  const uint32_t all = CapturePyCallsite();
  ASSERT_NE(all, 0u);
  EXPECT_EQ(frames_in(all), static_cast<long>(kMaxPyStackDepth));
  SetPyApiForTest(&api_, 0);
  const int walks = Py().frame_walks;
  EXPECT_EQ(CapturePyCallsite(), 0u);
  EXPECT_EQ(Py().frame_walks, walks);
  for (const FakePyFrame& f : deep) EXPECT_EQ(f.refs, 1);
}

TEST_F(PyCallsiteTest, BeforePython311TheCodeNameStandsInForTheQualname) {
  Py().has_qualname = false;
  const uint32_t sig = CapturePyCallsite();
  ASSERT_NE(sig, 0u);
  EXPECT_EQ(SigName(sig),
            "forward@/src/model.py:120;train_step@/src/train.py:42;"
            "<module>@/src/train.py:300");
  EXPECT_FALSE(Py().error_set);   // the AttributeError was cleared
  EXPECT_EQ(Py().err_clears, 1);  // and co_qualname is not tried again
  frames_[1].line = 43;
  ASSERT_NE(CapturePyCallsite(), 0u);
  EXPECT_EQ(Py().err_clears, 1);
}

TEST_F(PyCallsiteTest, PendingExceptionLeavesTheLaunchWithoutAStackAndUntouched) {
  Py().error_set = true;
  EXPECT_EQ(CapturePyCallsite(), 0u);
  EXPECT_TRUE(Py().error_set);  // not ours to clear
  EXPECT_EQ(Py().get_attrs, 0);
  EXPECT_EQ(PyCallsiteCacheSize(), 0u);
  Py().error_set = false;
  const uint32_t sig = CapturePyCallsite();
  ASSERT_NE(sig, 0u);
  // Once cached, a launch inside an exception handler still gets its stack.
  Py().error_set = true;
  EXPECT_EQ(CapturePyCallsite(), sig);
  Py().error_set = false;
}

TEST_F(PyCallsiteTest, AnExceptionRaisedByTheWalkIsClearedNeverLeaked) {
  Py().back_fails = true;  // e.g. MemoryError creating a frame object
  EXPECT_EQ(CapturePyCallsite(), 0u);
  EXPECT_FALSE(Py().error_set);
  EXPECT_EQ(PyCallsiteCacheSize(), 0u);
  ExpectOnlyInterpreterRefs(0, 0, 0);
  Py().back_fails = false;
  EXPECT_NE(CapturePyCallsite(), 0u);
}

TEST_F(PyCallsiteTest, LongNamesDropOuterFramesAndNonTextBecomesAQuestionMark) {
  module_.filename.text = "/" + std::string(kMaxPyStackName, 'x') + ".py";
  const uint32_t two = CapturePyCallsite();
  ASSERT_NE(two, 0u);
  EXPECT_EQ(SigName(two), "Model.forward@/src/model.py:120;train_step@/src/train.py:42");
  // Not even the innermost frame fits: no stack, remembered as such.
  forward_.filename.text = module_.filename.text;
  frames_[0].line = 7;
  EXPECT_EQ(CapturePyCallsite(), 0u);
  const int attrs = Py().get_attrs;
  EXPECT_EQ(CapturePyCallsite(), 0u);
  EXPECT_EQ(Py().get_attrs, attrs);
  // A filename that cannot be encoded.
  forward_.filename.text = "/src/model.py";
  forward_.filename.valid_utf8 = false;
  frames_[0].line = 8;
  const uint32_t q = CapturePyCallsite();
  ASSERT_NE(q, 0u);
  EXPECT_EQ(SigName(q).substr(0, 19), "Model.forward@?:8;t");
  EXPECT_FALSE(Py().error_set);
}

TEST_F(PyCallsiteTest, LinkRecordCarriesTheLaunchKeyAndOnlyForPickedLaunches) {
  Runtime* rt = GetRuntime();
  TestRingReader reader(rt->ring.header(), rt->ring.slots());
  reader.set_position(__atomic_load_n(&rt->ring.header()->write_index, __ATOMIC_ACQUIRE));
  const uint32_t gemm = GemmSig(4001);
  const void* stream = reinterpret_cast<const void*>(0xC000);
  std::vector<OpHandle> ops;
  for (int i = 0; i < 3; ++i) {
    OpHandle h = BeginGpuOp(gemm, stream, 0, 0);
    EndGpuOp(h, stream, 0);  // no CUDA runtime here: an untracked record, written now
    EmitCallsiteLink(h, CapturePyCallsite());
    ops.push_back(h);
  }
  // sample_first = 2, sample_every = 3: occurrences 1 and 2 are picked, 3 is not.
  EXPECT_EQ(ops[0].picked, 1);
  EXPECT_EQ(ops[1].picked, 1);
  EXPECT_EQ(ops[2].picked, 0);
  std::vector<xpu_record_v1> launches, links;
  xpu_record_v1 r;
  while (reader.Next(&r) == TestRingReader::Result::kRecord) {
    (SigKind(r.sig_id) == XPU_OP_PY_CALLSITE ? links : launches).push_back(r);
  }
  ASSERT_EQ(launches.size(), 3u);
  ASSERT_EQ(links.size(), 2u);
  for (size_t i = 0; i < links.size(); ++i) {
    const xpu_record_v1& l = links[i];
    EXPECT_EQ(SigName(l.sig_id), kStack);
    EXPECT_EQ(xpu_callsite_launch_sig_id(&l), gemm);
    EXPECT_EQ(l.seq, launches[i].seq);
    EXPECT_EQ(l.stream, launches[i].stream);
    EXPECT_EQ(l.start_ns, ops[i].launch_ns);
    EXPECT_EQ(l.duration, 0u);
    EXPECT_EQ(l.flags, XPU_REC_HOST);  // never XPU_REC_ISSUE_LAT_VALID
  }
  EXPECT_NE(links[0].seq, links[1].seq);
}

TEST_F(PyCallsiteTest, SamplerPicksWhicheverTimerTimesTheOp) {
  const uint32_t plain = GemmSig(4002);
  const uint32_t plugin_timed = GemmSig(4003);
  for (uint32_t n = 1; n <= 9; ++n) {
    OpHandle a = BeginGpuOp(plain, nullptr, 0, 0);
    EndGpuOp(a, nullptr, 0);
    // A collective timed by the NCCL profiler plugin (XPU_REC_NOT_TIMED):
    // not timed here, still picked for its call site.
    OpHandle b = BeginGpuOp(plugin_timed, nullptr, 0, XPU_REC_NOT_TIMED);
    EndGpuOp(b, nullptr, 0);
    EXPECT_EQ(a.picked != 0, SampleDecision(n, 2, 3)) << n;
    EXPECT_EQ(b.picked != 0, SampleDecision(n, 2, 3)) << n;
  }
  SetEnabled(false);
  EXPECT_EQ(BeginGpuOp(plain, nullptr, 0, 0).picked, 0);  // inactive: nothing picked
  SetEnabled(true);
}

}  // namespace
}  // namespace xpu::hook
