// tests/e2e_hook/e2e_expect.cc — see e2e_expect.h.
#include "e2e_expect.h"

#include <cublas_api.h>
#include <library_types.h>
#include <nccl.h>
#include <time.h>

#include <tuple>

#include <gtest/gtest.h>

#include "xpu/formulas.h"

namespace xpu::e2e {

// ---- independent mappings (from the CUDA/NCCL headers' enums) ----------------

uint32_t XpuDtypeOfCuda(int t) {
  switch (t) {
    case CUDA_R_32F:
      return XPU_DT_F32;
    case CUDA_R_16F:
      return XPU_DT_F16;
    case CUDA_R_16BF:
      return XPU_DT_BF16;
    case CUDA_R_64F:
      return XPU_DT_F64;
    default:
      ADD_FAILURE() << "unexpected cudaDataType " << t;
      return 0;
  }
}
uint32_t XpuComputeOf(int c) {
  switch (c) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return XPU_DT_F32;
    case CUBLAS_COMPUTE_16F:
      return XPU_DT_F16;
    case CUBLAS_COMPUTE_64F:
      return XPU_DT_F64;
    default:
      ADD_FAILURE() << "unexpected compute type " << c;
      return 0;
  }
}
uint32_t XpuDtypeOfNccl(int t) {
  switch (t) {
    case ncclFloat32:
      return XPU_DT_F32;
    case ncclBfloat16:
      return XPU_DT_BF16;
    case ncclFloat16:
      return XPU_DT_F16;
    case ncclFloat64:
      return XPU_DT_F64;
    case ncclInt32:
      return XPU_DT_I32;
    case ncclInt64:
      return XPU_DT_I64;
    case ncclUint8:
      return XPU_DT_U8;
    default:
      ADD_FAILURE() << "unexpected ncclDataType " << t;
      return 0;
  }
}
uint64_t ElementBytes(uint32_t xpu_dt) {
  switch (xpu_dt) {
    case XPU_DT_F32:
    case XPU_DT_I32:
      return 4;
    case XPU_DT_F16:
    case XPU_DT_BF16:
      return 2;
    case XPU_DT_F64:
    case XPU_DT_I64:
      return 8;
    case XPU_DT_U8:
      return 1;
    default:
      return 0;
  }
}
uint32_t KindOfApi(const std::string& api) {
  static const std::map<std::string, uint32_t> k = {{"ncclAllReduce", XPU_OP_ALLREDUCE},
                                                    {"ncclAllGather", XPU_OP_ALLGATHER},
                                                    {"ncclReduceScatter", XPU_OP_REDUCESCATTER},
                                                    {"ncclBroadcast", XPU_OP_BROADCAST},
                                                    {"ncclBcast", XPU_OP_BROADCAST},
                                                    {"ncclReduce", XPU_OP_REDUCE},
                                                    {"ncclAlltoAll", XPU_OP_ALLTOALL},
                                                    {"ncclGather", XPU_OP_GATHER},
                                                    {"ncclScatter", XPU_OP_SCATTER},
                                                    {"ncclSend", XPU_OP_SEND},
                                                    {"ncclRecv", XPU_OP_RECV},
                                                    {"cudaStreamSynchronize", XPU_OP_SYNC_STREAM},
                                                    {"cudaDeviceSynchronize", XPU_OP_SYNC_DEVICE},
                                                    {"cudaEventSynchronize", XPU_OP_SYNC_EVENT}};
  auto it = k.find(api);
  EXPECT_NE(it, k.end()) << api;
  return it == k.end() ? 0 : it->second;
}
// nccl-tests "size" and bus factor, written out again here.
uint64_t NcclSize(uint32_t kind, uint64_t count, uint64_t el, uint64_t nranks) {
  switch (kind) {
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
    case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER:
    case XPU_OP_SCATTER:
      return count * el * nranks;
    default:
      return count * el;
  }
}
double BusFactor(uint32_t kind, double n) {
  switch (kind) {
    case XPU_OP_ALLREDUCE:
      return 2 * (n - 1) / n;
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
    case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER:
    case XPU_OP_SCATTER:
      return (n - 1) / n;
    default:
      return 1;
  }
}
bool Sampled(uint64_t n, uint64_t first, uint64_t every) {
  return n <= first || (every != 0 && (n - first) % every == 0);
}
bool IsGpuKind(uint32_t k) {
  return k == XPU_OP_KERNEL || k == XPU_OP_GEMM || k == XPU_OP_GRAPH_LAUNCH ||
         (k >= XPU_OP_ALLREDUCE && k <= XPU_OP_RECV);
}
uint64_t EndNs(const xpu_record_v1& r) { return r.start_ns + xpu_record_duration_ns(&r); }

// These tests check the interposers and the event-timing sampler, so the
// NCCL profiler plugin is kept out (with it, collectives get a second, plugin
// record: hook/nccl_profiler's own end-to-end test covers that path).
std::map<std::string, std::string> HookEnv(const std::string& ring_dir, const std::string& timing) {
  return {{"LD_LIBRARY_PATH", XPU_FAKE_LIB_DIR},
          {"XPU_RING_DIR", ring_dir},
          {"XPU_DAEMON", "off"},
          // a socket no daemon serves: a daemon running on the default one
          // must not drain the rings these tests read
          {"XPU_DAEMON_SOCKET", ring_dir + "/no-daemon.sock"},
          {"XPU_TIMING", timing},
          {"XPU_ENABLE", "1"},
          {"NCCL_PROFILER_PLUGIN", "none"}};
}

// Loads the ring of `pid` from `dir` (asserting in the caller through *ok).
RingFile LoadRing(const std::string& dir, int pid, bool* ok) {
  RingFile rf;
  std::string err;
  *ok = rf.Load(dir + "/xpu-ring-" + std::to_string(pid) + ".bin", &err);
  EXPECT_TRUE(*ok) << err;
  if (*ok) {
    EXPECT_EQ(rf.uncommitted, 0u);
    EXPECT_EQ(rf.bad_sig_id, 0u);
    EXPECT_EQ(rf.header.pid, pid);
    EXPECT_EQ(rf.header.producer_state, uint32_t{XPU_PRODUCER_EXITED});
    EXPECT_EQ(rf.counter(XPU_CNT_DROPPED_FULL), 0u);
    EXPECT_EQ(rf.counter(XPU_CNT_PENDING_FULL), 0u);
    EXPECT_EQ(rf.counter(XPU_CNT_CUDA_ERROR), 0u);
    EXPECT_EQ(rf.counter(XPU_CNT_INTERNAL), 0u);
    EXPECT_EQ(rf.counter(XPU_CNT_RECORDS_WRITTEN), rf.records.size());
  }
  return rf;
}

uint64_t WallNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Send/recv seqs of two ranks agree: r's n-th send to p is p's n-th recv from r.
void CheckP2pAcrossRanks(const std::vector<RingFile>& rings) {
  std::map<std::tuple<int, int, uint32_t>, int> sends, recvs;  // (from, to, seq)
  for (size_t rank = 0; rank < rings.size(); ++rank) {
    for (const auto& r : rings[rank].records) {
      const Signature* s = rings[rank].sig(r.sig_id);
      if (s->sig.kind == XPU_OP_SEND) sends[{int(rank), s->sig.peer, r.seq}]++;
      if (s->sig.kind == XPU_OP_RECV) recvs[{s->sig.peer, int(rank), r.seq}]++;
    }
  }
  EXPECT_FALSE(sends.empty());
  EXPECT_EQ(sends, recvs);
}

}  // namespace xpu::e2e
