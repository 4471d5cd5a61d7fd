// tests/e2e_hook/e2e_hook_test.cc — end-to-end tests of libxpu_hook.so on the
// GPU-less test runtime. Real programs run with the hook preloaded and their
// ring files (XPU_RING_DIR) are compared record by record with ground truth
// that never comes from the hook:
//  - xpu-hook-probe (hook_probe.cc) reports every call it made, with shapes,
//    communicator, issue order and host-clock marks around each phase;
//  - xpu-fake-train prints its plan (--print-plan) and the fake runtime
//    counts every API call (XPU_FAKE_CALL_COUNTS).
// Expected field values (dtype codes, transposes, FLOPs, nccl-tests bytes,
// modelled durations, sampler decisions) are computed here, independently of
// hook/ and of include/xpu/formulas.h, which is then checked against them.
//
// Durations: the fake runtime stamps events on its stream worker, so a timed
// op lasts at least its modelled time; the upper bound is generous because
// the machine may be loaded.
#include <cublas_api.h>
#include <library_types.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "e2e_util.h"
#include "ring_file.h"
#include "xpu/formulas.h"

namespace xpu::e2e {
namespace {

constexpr uint64_t kMs = 1000 * 1000;
// GPU-to-host mapping uncertainty allowed around the host marks.
constexpr uint64_t kMapSlackNs = 5 * kMs;
// Generous upper slack over the modelled duration (loaded 2-core machine).
constexpr uint64_t kDurSlackNs = 400 * kMs;

// ---- independent mappings (from the CUDA/NCCL headers' enums) ----------------

uint32_t XpuDtypeOfCuda(int t) {
  switch (t) {
    case CUDA_R_32F: return XPU_DT_F32;
    case CUDA_R_16F: return XPU_DT_F16;
    case CUDA_R_16BF: return XPU_DT_BF16;
    case CUDA_R_64F: return XPU_DT_F64;
    default: ADD_FAILURE() << "unexpected cudaDataType " << t; return 0;
  }
}
uint32_t XpuComputeOf(int c) {
  switch (c) {
    case CUBLAS_COMPUTE_32F: case CUBLAS_COMPUTE_32F_FAST_TF32: return XPU_DT_F32;
    case CUBLAS_COMPUTE_16F: return XPU_DT_F16;
    case CUBLAS_COMPUTE_64F: return XPU_DT_F64;
    default: ADD_FAILURE() << "unexpected compute type " << c; return 0;
  }
}
uint32_t XpuDtypeOfNccl(int t) {
  switch (t) {
    case ncclFloat32: return XPU_DT_F32;
    case ncclBfloat16: return XPU_DT_BF16;
    case ncclFloat16: return XPU_DT_F16;
    case ncclFloat64: return XPU_DT_F64;
    case ncclInt32: return XPU_DT_I32;
    case ncclInt64: return XPU_DT_I64;
    case ncclUint8: return XPU_DT_U8;
    default: ADD_FAILURE() << "unexpected ncclDataType " << t; return 0;
  }
}
uint64_t ElementBytes(uint32_t xpu_dt) {
  switch (xpu_dt) {
    case XPU_DT_F32: case XPU_DT_I32: return 4;
    case XPU_DT_F16: case XPU_DT_BF16: return 2;
    case XPU_DT_F64: case XPU_DT_I64: return 8;
    case XPU_DT_U8: return 1;
    default: return 0;
  }
}
uint32_t KindOfApi(const std::string& api) {
  static const std::map<std::string, uint32_t> k = {
      {"ncclAllReduce", XPU_OP_ALLREDUCE}, {"ncclAllGather", XPU_OP_ALLGATHER},
      {"ncclReduceScatter", XPU_OP_REDUCESCATTER}, {"ncclBroadcast", XPU_OP_BROADCAST},
      {"ncclBcast", XPU_OP_BROADCAST}, {"ncclReduce", XPU_OP_REDUCE},
      {"ncclAlltoAll", XPU_OP_ALLTOALL}, {"ncclGather", XPU_OP_GATHER},
      {"ncclScatter", XPU_OP_SCATTER}, {"ncclSend", XPU_OP_SEND}, {"ncclRecv", XPU_OP_RECV},
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
    case XPU_OP_ALLGATHER: case XPU_OP_REDUCESCATTER: case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER: case XPU_OP_SCATTER:
      return count * el * nranks;
    default:
      return count * el;
  }
}
double BusFactor(uint32_t kind, double n) {
  switch (kind) {
    case XPU_OP_ALLREDUCE: return 2 * (n - 1) / n;
    case XPU_OP_ALLGATHER: case XPU_OP_REDUCESCATTER: case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER: case XPU_OP_SCATTER:
      return (n - 1) / n;
    default: return 1;
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

std::map<std::string, std::string> HookEnv(const std::string& ring_dir, const std::string& timing) {
  return {{"LD_LIBRARY_PATH", XPU_FAKE_LIB_DIR}, {"XPU_RING_DIR", ring_dir},
          {"XPU_DAEMON", "off"}, {"XPU_TIMING", timing}, {"XPU_ENABLE", "1"}};
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

// ---- xpu-hook-probe -------------------------------------------------------------

struct ProbeMode {
  std::string timing = "all";
  uint32_t first = 32, every = 16;  // XPU_SAMPLE_FIRST / _EVERY
  uint32_t kernel_every = 0;        // XPU_KERNEL_SAMPLE_EVERY
  int block = 24;                   // --kernel-block
  uint64_t kernel_ns = 200 * 1000;  // XPU_FAKE_KERNEL_NS
  double tflops = 0.001;            // XPU_FAKE_TFLOPS
  double gbps = 0.01;               // XPU_FAKE_NET_GBPS
};

struct ProbeReport {
  int pid = 0, rank = -1, world = 0;
  std::vector<Fields> ops, colls, p2ps;
  std::map<std::string, std::pair<uint64_t, uint64_t>> marks;
  Fields values;
  bool done = false;
};

ProbeReport ReadProbeReport(const std::string& path) {
  ProbeReport r;
  for (const auto& line : ReadLines(path)) {
    std::string tag;
    Fields f = ParseFields(line, &tag);
    if (tag == "op") {
      r.ops.push_back(f);
    } else if (tag == "coll") {
      r.colls.push_back(f);
    } else if (tag == "p2p") {
      r.p2ps.push_back(f);
    } else if (tag == "mark") {
      r.marks[f["phase"]] = {ToU64(f["begin"]), ToU64(f["end"])};
    } else if (tag == "value") {
      for (auto& [k, v] : f) r.values[k] = v;
    } else if (tag == "done") {
      r.done = true;
    } else if (f.count("pid")) {
      r.pid = std::stoi(f["pid"]);
      r.rank = std::stoi(f["rank"]);
      r.world = std::stoi(f["world"]);
    }
  }
  return r;
}

// Runs the probe with `nproc` ranks (1: directly, else through the launcher).
std::vector<ProbeReport> RunProbe(const TempDir& dir, const ProbeMode& m, int nproc) {
  auto env = HookEnv(dir.path(), m.timing);
  env["XPU_SAMPLE_FIRST"] = std::to_string(m.first);
  env["XPU_SAMPLE_EVERY"] = std::to_string(m.every);
  env["XPU_KERNEL_SAMPLE_EVERY"] = std::to_string(m.kernel_every);
  env["XPU_FAKE_KERNEL_NS"] = std::to_string(m.kernel_ns);
  env["XPU_FAKE_TFLOPS"] = std::to_string(m.tflops);
  env["XPU_FAKE_NET_GBPS"] = std::to_string(m.gbps);
  const std::string report = dir.path() + "/report";
  std::vector<std::string> probe = {XPU_HOOK_PROBE_PATH, "--report", report, "--kernel-block",
                                    std::to_string(m.block)};
  RunResult rr;
  if (nproc == 1) {
    env["LD_PRELOAD"] = XPU_HOOK_SO;
    env["RANK"] = "0";
    env["WORLD_SIZE"] = "1";
    rr = Run(probe, env, 80);
  } else {
    std::vector<std::string> argv = {XPU_FAKE_LAUNCH_PATH, "--nproc", std::to_string(nproc),
                                     "--timeout", "75", "--env",
                                     std::string("LD_PRELOAD=") + XPU_HOOK_SO, "--"};
    argv.insert(argv.end(), probe.begin(), probe.end());
    rr = Run(argv, env, 85);
  }
  EXPECT_TRUE(rr.exited && rr.status == 0)
      << "status " << rr.status << " signal " << rr.signal << "\n" << rr.out << rr.err;
  std::vector<ProbeReport> reports;
  for (int r = 0; r < nproc; ++r) {
    reports.push_back(ReadProbeReport(report + ".rank" + std::to_string(r)));
    EXPECT_TRUE(reports.back().done) << "rank " << r << " report incomplete";
  }
  return reports;
}

// What the ring of one probe rank must hold; the checks that need only one
// rank. Returns comm letter -> comm_id for the cross-rank checks.
void CheckProbeRing(const ProbeReport& rep, const RingFile& ring, const ProbeMode& m,
                    std::map<std::string, uint64_t>* comm_ids_out) {
  std::map<std::string, uint64_t>& comm_ids = *comm_ids_out;
  const auto& h = ring.header;
  EXPECT_EQ(h.timing_policy, m.timing == "all" ? 1u : m.timing == "off" ? 2u : 0u);
  EXPECT_EQ(h.rank, rep.rank);
  EXPECT_EQ(h.world_size, rep.world);
  const bool off = m.timing == "off";
  EXPECT_EQ(rep.values.at("ring_mapped"), "1");  // the hook was loaded
  const uint64_t plain = ToU64(rep.values.at("plain_launches"));
  EXPECT_EQ(plain, uint64_t(16) * m.block);  // kernel phase 14 blocks, graph, sync

  if (off) {
    for (const auto& r : ring.records) {
      const Signature* s = ring.sig(r.sig_id);
      ASSERT_NE(s, nullptr);
      EXPECT_FALSE(IsGpuKind(s->sig.kind)) << "GPU record under XPU_TIMING=off: " << s->name;
    }
    EXPECT_EQ(ring.counter(XPU_CNT_SAMPLED), 0u);
    EXPECT_EQ(ring.counter(XPU_CNT_CAPTURE_SKIPPED), 0u);
    EXPECT_EQ(ring.counter(XPU_CNT_EVENT_POOL_EMPTY), 0u);
    return;
  }
  EXPECT_EQ(rep.values.at("warmup_ready"), "1");

  // Communicator ids: A from its init, C from its ops, D = the other split.
  for (const auto& [id, s] : ring.sigs) {
    if (s.sig.kind == XPU_OP_COMM_INIT && s.name == "ncclCommInitRank") comm_ids["A"] = s.sig.comm_id;
    if (s.sig.kind == XPU_OP_ALLREDUCE && s.sig.count == 500) comm_ids["C"] = s.sig.comm_id;
  }
  for (const auto& [id, s] : ring.sigs) {
    if (s.sig.kind == XPU_OP_COMM_INIT && s.name == "ncclCommSplit" &&
        s.sig.comm_id != comm_ids["C"]) {
      comm_ids["D"] = s.sig.comm_id;
    }
  }
  comm_ids["none"] = 0;
  EXPECT_EQ(comm_ids.size(), 4u);
  EXPECT_NE(comm_ids["A"], 0u);
  EXPECT_NE(comm_ids["C"], 0u);
  EXPECT_NE(comm_ids["D"], 0u);
  EXPECT_NE(comm_ids["A"], comm_ids["C"]);
  EXPECT_NE(comm_ids["C"], comm_ids["D"]);
  EXPECT_NE(comm_ids["A"], comm_ids["D"]);

  uint64_t all_begin = UINT64_MAX, all_end = 0;
  for (const auto& [p, w] : rep.marks) {
    all_begin = std::min(all_begin, w.first);
    all_end = std::max(all_end, w.second);
  }

  // Every op line -> the one signature it must have produced.
  struct Expect {
    uint64_t calls = 0;
    Fields op;          // the (last) op line
    bool aggregated = false;
  };
  std::map<uint32_t, Expect> expect;  // by sig_id
  uint32_t warmup_sig = 0;
  for (const Fields& op : rep.ops) {
    const std::string kind = op.at("kind"), api = op.count("api") ? op.at("api") : "";
    auto match = [&](const Signature& s) -> bool {
      const auto& g = s.sig;
      if (kind == "kernel") return g.kind == XPU_OP_KERNEL && s.name == op.at("name");
      if (kind == "gemm") {
        return g.kind == XPU_OP_GEMM && s.name == api && g.m == ToU64(op.at("m")) &&
               g.n == ToU64(op.at("n")) && g.k == ToU64(op.at("k")) &&
               g.batch == ToU64(op.at("batch"));
      }
      if (kind == "graph") return g.kind == XPU_OP_GRAPH_LAUNCH && s.name == "cudaGraphLaunch";
      if (kind == "sync") return g.kind == KindOfApi(api) && s.name == api;
      if (kind == "memcpy") {
        std::string name = op.at("name");
        std::replace(name.begin(), name.end(), '_', ' ');
        return g.kind == XPU_OP_MEMCPY && s.name == name && g.count == ToU64(op.at("bytes"));
      }
      if (kind == "coll") {
        return g.kind == KindOfApi(api) && s.name == api && g.count == ToU64(op.at("count")) &&
               g.comm_id == comm_ids[op.at("comm")];
      }
      if (kind == "comm_init" || kind == "comm_destroy") {
        return g.kind == (kind == "comm_init" ? XPU_OP_COMM_INIT : XPU_OP_COMM_DESTROY) &&
               s.name == api && g.comm_id == comm_ids[op.at("comm")];
      }
      ADD_FAILURE() << "unknown op kind " << kind;
      return false;
    };
    std::vector<uint32_t> ids;
    for (const auto& [id, s] : ring.sigs) {
      if (match(s)) ids.push_back(id);
    }
    // Traced plain kernels only exist when the kernel sampler picks them.
    const bool traced = kind != "kernel" || m.kernel_every != 0;
    ASSERT_EQ(ids.size(), traced ? 1u : 0u)
        << "signatures for op: kind=" << kind << " api=" << api << " phase=" << op.at("phase");
    if (!traced) continue;
    Expect& e = expect[ids[0]];
    uint64_t calls = ToU64(op.at("calls"));
    if (kind == "kernel") {
      EXPECT_EQ(calls % m.kernel_every, 0u);
      calls /= m.kernel_every;
    }
    if (e.calls != 0) e.aggregated = true;
    e.calls += calls;
    e.op = op;
    if (op.at("phase") == "warmup") {
      warmup_sig = ids[0];
    }
  }
  ASSERT_NE(warmup_sig, 0u);

  // Signature fields, FLOPs and bytes against independent values.
  for (const auto& [id, e] : expect) {
    const Signature& s = ring.sigs.at(id);
    const auto& g = s.sig;
    const Fields& op = e.op;
    const std::string kind = op.at("kind");
    SCOPED_TRACE("signature " + s.name + " phase " + op.at("phase"));
    if (kind == "gemm") {
      const uint64_t m_ = g.m, n_ = g.n, k_ = g.k, b_ = g.batch;
      EXPECT_EQ(g.dtype, XpuDtypeOfCuda(std::stoi(op.at("atype"))));
      EXPECT_EQ(g.out_dtype, XpuDtypeOfCuda(std::stoi(op.at("ctype"))));
      EXPECT_EQ(g.compute_type, XpuComputeOf(std::stoi(op.at("compute"))));
      const uint32_t flags = (op.at("ta") == std::to_string(CUBLAS_OP_T) ? XPU_GEMM_TRANSA : 0) |
                             (op.at("tb") == std::to_string(CUBLAS_OP_T) ? XPU_GEMM_TRANSB : 0);
      EXPECT_EQ(g.gemm_flags, flags);
      EXPECT_EQ(xpu_sig_flops(&g), 2.0 * double(m_ * n_ * k_ * b_));
      EXPECT_EQ(xpu_sig_bytes(&g), 0u);
    } else if (kind == "coll") {
      const uint32_t dt = XpuDtypeOfNccl(std::stoi(op.at("dtype")));
      EXPECT_EQ(g.dtype, dt);
      EXPECT_EQ(g.peer, std::stoi(op.at("root")));
      if (op.at("comm") == "none") {
        EXPECT_EQ(g.comm_rank, -1);
        EXPECT_EQ(g.comm_nranks, 0);
      } else {
        EXPECT_EQ(g.comm_rank, rep.rank);
        EXPECT_EQ(g.comm_nranks, rep.world);
        EXPECT_EQ(xpu_sig_bytes(&g), NcclSize(g.kind, g.count, ElementBytes(dt), rep.world));
        EXPECT_DOUBLE_EQ(xpu_busbw_factor(g.kind, g.comm_nranks), BusFactor(g.kind, rep.world));
      }
      EXPECT_EQ(xpu_sig_flops(&g), 0.0);
    } else if (kind == "comm_init" || kind == "comm_destroy") {
      EXPECT_EQ(g.comm_rank, rep.rank);
      EXPECT_EQ(g.comm_nranks, rep.world);
    }
  }

  // Records: counts per signature, flags, durations, host-clock windows.
  std::map<uint32_t, std::vector<xpu_record_v1>> by_sig;
  for (const auto& r : ring.records) by_sig[r.sig_id].push_back(r);
  // sampler_picks: occurrences the sampler picked that got a start event
  // (timed records, and failed calls, which are picked before they fail).
  uint64_t timed_records = 0, sampler_picks = 0, untracked = 0, expected_records = 0;
  for (const auto& [id, recs] : by_sig) {
    ASSERT_TRUE(expect.count(id)) << "unexpected records of signature " << ring.sigs.at(id).name
                                  << " (a forked child's call?)";
  }
  for (auto& [id, e] : expect) {
    const Signature& s = ring.sigs.at(id);
    const auto& g = s.sig;
    const Fields& op = e.op;
    const std::string kind = op.at("kind");
    SCOPED_TRACE("records of " + s.name + " phase " + op.at("phase") + " calls " +
                 std::to_string(e.calls) + " recorded " + std::to_string(by_sig[id].size()));
    std::vector<xpu_record_v1> recs = by_sig[id];
    // Every call has its record, tracked or not.
    EXPECT_EQ(recs.size(), e.calls);
    expected_records += e.calls;
    std::stable_sort(recs.begin(), recs.end(),
                     [](const xpu_record_v1& a, const xpu_record_v1& b) { return a.seq < b.seq; });
    const bool host = kind == "sync" || kind == "memcpy" || kind == "comm_init" ||
                      kind == "comm_destroy";
    const bool capture = op.count("capture") != 0, failed = op.count("failed") != 0;
    const uint64_t begin = e.aggregated ? all_begin : rep.marks.at(op.at("phase")).first;
    const uint64_t end = e.aggregated ? all_end : rep.marks.at(op.at("phase")).second;
    // Modelled GPU time of one occurrence.
    uint64_t modelled = 0;
    if (kind == "kernel") {
      modelled = op.at("name") == "xpu_fake_kernel" ? 1 * kMs : m.kernel_ns;
    } else if (kind == "gemm") {
      modelled = uint64_t(xpu_sig_flops(&g) / (m.tflops * 1e12) * 1e9);
    } else if (kind == "graph") {
      modelled = uint64_t(std::stoi(op.at("kernels"))) * m.kernel_ns +
                 uint64_t(std::stod(op.at("gemm_flops")) / (m.tflops * 1e12) * 1e9);
    } else if (kind == "coll" && !failed) {
      modelled = uint64_t(double(NcclSize(g.kind, g.count, ElementBytes(g.dtype), rep.world)) *
                          BusFactor(g.kind, rep.world) / m.gbps);
    }
    bool tracked_seen = false;
    for (size_t i = 0; i < recs.size(); ++i) {
      const xpu_record_v1& r = recs[i];
      const bool timed = (r.flags & XPU_REC_TIMED) != 0;
      const uint64_t dur = xpu_record_duration_ns(&r);
      EXPECT_EQ((r.flags & XPU_REC_INCOMPLETE), 0) << "flags " << r.flags;
      EXPECT_EQ((r.flags & XPU_REC_CALL_FAILED) != 0, failed) << "flags " << r.flags;
      EXPECT_EQ((r.flags & XPU_REC_GRAPH_CAPTURE) != 0, capture) << "flags " << r.flags;
      if (host) {
        EXPECT_TRUE(r.flags & XPU_REC_HOST) << "flags " << r.flags;
        EXPECT_FALSE(timed);
        EXPECT_GE(r.start_ns, begin);
        EXPECT_LE(EndNs(r), end);
        if (kind == "memcpy") {
          EXPECT_EQ(r.seq, ToU64(op.at("bytes")));
        }
        continue;
      }
      EXPECT_FALSE(r.flags & XPU_REC_HOST);
      EXPECT_NE(timed, (r.flags & XPU_REC_NOT_TIMED) != 0) << "flags " << r.flags;
      // Ops issued before the hook's event pool exists are recorded from CPU
      // times (UNTRACKED); only the warm-up may have them, and only first.
      const bool is_untracked = (r.flags & XPU_REC_UNTRACKED) != 0;
      if (is_untracked) {
        ++untracked;
        EXPECT_EQ(id, warmup_sig) << "untracked op after the warm-up";
        EXPECT_FALSE(tracked_seen) << "untracked op after a tracked one";
      } else {
        tracked_seen = true;
      }
      const bool policy_timed =
          kind == "kernel" || m.timing == "all" || Sampled(i + 1, m.first, m.every);
      const bool want_timed = policy_timed && !capture && !failed && !is_untracked;
      if (failed && policy_timed && !is_untracked) ++sampler_picks;
      EXPECT_EQ(timed, want_timed) << "occurrence " << i + 1;
      if (timed) {
        ++timed_records;
        ++sampler_picks;
        EXPECT_EQ((r.flags & XPU_REC_SAMPLED) != 0, kind == "kernel" || m.timing == "sampled");
        EXPECT_TRUE(r.flags & XPU_REC_ISSUE_LAT_VALID);
        EXPECT_GE(int64_t(r.issue_latency_ns), -int64_t(kMapSlackNs));
        EXPECT_GE(dur + 1000, modelled) << "timed duration below the modelled time";
        if (!(kind == "coll" && g.count == 1)) {  // the barrier waits for the other rank
          EXPECT_LT(dur, modelled + kDurSlackNs);
        }
        EXPECT_GE(r.start_ns + kMapSlackNs, begin);
        EXPECT_LE(EndNs(r), end + kMapSlackNs);
      } else {
        EXPECT_GE(r.start_ns, begin);  // CPU launch time
        EXPECT_LE(r.start_ns, end);
      }
    }
  }
  EXPECT_EQ(ring.counter(XPU_CNT_SAMPLED), sampler_picks);
  EXPECT_EQ(ring.counter(XPU_CNT_EVENT_POOL_EMPTY), untracked);
  EXPECT_EQ(ring.records.size(), expected_records);
  EXPECT_GT(timed_records, 0u);

  // Plain launches: counted in batches of 256 per thread, traced 1 in N.
  const uint64_t traced = m.kernel_every ? plain / m.kernel_every : 0;
  const uint64_t untraced = plain - traced;
  EXPECT_EQ(ring.counter(XPU_CNT_LAUNCHES_UNTRACED), untraced - untraced % 256);
  // Graph capture: the captured GEMM and the sampled captured kernels.
  EXPECT_EQ(ring.counter(XPU_CNT_CAPTURE_SKIPPED),
            1 + (m.kernel_every ? uint64_t(m.block) / m.kernel_every : 0));

  // The blocking synchronize returned after the busy kernels finished.
  uint64_t latest_sync_end = 0;
  for (const auto& r : ring.records) {
    const Signature* s = ring.sig(r.sig_id);
    if (s->sig.kind == XPU_OP_SYNC_STREAM && r.start_ns >= rep.marks.at("sync").first &&
        EndNs(r) <= rep.marks.at("sync").second) {
      latest_sync_end = std::max(latest_sync_end, EndNs(r));
    }
  }
  EXPECT_GE(latest_sync_end, ToU64(rep.values.at("busy_sync_min_end")));

  // Fork: the child's calls (tag 77777) left no trace, not even a signature.
  for (const auto& [id, s] : ring.sigs) {
    EXPECT_NE(s.sig.m, 77777u) << s.name;
    EXPECT_NE(s.sig.count, 77777u) << s.name;
  }

  // Sequence numbers: collectives 1..N per communicator in issue order,
  // point-to-point 1..n per (direction, peer).
  std::map<std::string, std::vector<std::pair<std::string, uint64_t>>> coll_order;
  for (const Fields& c : rep.colls) coll_order[c.at("comm")].push_back({c.at("api"), ToU64(c.at("count"))});
  std::map<std::string, uint64_t> p2p_n;
  for (const Fields& p : rep.p2ps) p2p_n[p.at("comm") + p.at("dir") + p.at("peer")]++;
  std::map<uint64_t, std::set<uint32_t>> seqs_by_comm;
  for (const auto& r : ring.records) {
    const Signature* s = ring.sig(r.sig_id);
    const auto& g = s->sig;
    if (!xpu_op_is_collective(g.kind) || g.comm_id == 0) continue;
    std::string letter;
    for (const auto& [l, cid] : comm_ids) if (cid == g.comm_id) letter = l;
    ASSERT_FALSE(letter.empty());
    if (g.kind == XPU_OP_SEND || g.kind == XPU_OP_RECV) {
      const std::string key = letter + (g.kind == XPU_OP_SEND ? "send" : "recv") +
                              std::to_string(g.peer);
      EXPECT_GE(r.seq, 1u);
      EXPECT_LE(r.seq, p2p_n[key]) << key;
      continue;
    }
    const auto& order = coll_order[letter];
    ASSERT_GE(r.seq, 1u);
    ASSERT_LE(r.seq, order.size()) << s->name;
    EXPECT_EQ(order[r.seq - 1].first, s->name) << "seq " << r.seq;
    EXPECT_EQ(order[r.seq - 1].second, g.count) << "seq " << r.seq;
    EXPECT_TRUE(seqs_by_comm[g.comm_id].insert(r.seq).second) << "duplicate seq " << r.seq;
  }
  for (const auto& [letter, order] : coll_order) {
    if (letter == "none") continue;
    EXPECT_EQ(seqs_by_comm[comm_ids[letter]].size(), order.size()) << "comm " << letter;
  }
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

TEST(E2eHookProbe, TwoRanksTimingAllEveryFamilyExact) {
  TempDir dir;
  ProbeMode m;
  m.timing = "all";
  m.kernel_every = 4;
  auto reps = RunProbe(dir, m, 2);
  ASSERT_EQ(reps.size(), 2u);
  std::vector<RingFile> rings;
  std::vector<std::map<std::string, uint64_t>> ids;
  for (const auto& rep : reps) {
    ASSERT_TRUE(rep.done);
    bool ok = false;
    rings.push_back(LoadRing(dir.path(), rep.pid, &ok));
    ASSERT_TRUE(ok);
    SCOPED_TRACE("rank " + std::to_string(rep.rank));
    ids.emplace_back();
    CheckProbeRing(rep, rings.back(), m, &ids.back());
  }
  // comm_id is equal on every member of a communicator.
  EXPECT_EQ(ids[0], ids[1]);
  CheckP2pAcrossRanks(rings);
  // Both ranks give seq s to the same collective (name and count).
  std::map<std::pair<uint64_t, uint32_t>, std::pair<std::string, uint64_t>> at;
  for (const auto& ring : rings) {
    for (const auto& r : ring.records) {
      const Signature* s = ring.sig(r.sig_id);
      if (!xpu_op_is_collective(s->sig.kind) || s->sig.kind >= XPU_OP_SEND || s->sig.comm_id == 0)
        continue;
      auto key = std::make_pair(s->sig.comm_id, r.seq);
      auto val = std::make_pair(s->name, s->sig.count);
      auto [it, fresh] = at.emplace(key, val);
      if (!fresh) {
        EXPECT_EQ(it->second, val) << "seq " << r.seq;
      }
    }
  }
}

TEST(E2eHookProbe, SingleProcessSampledTimesFirstThenOneInK) {
  TempDir dir;
  ProbeMode m;
  m.timing = "sampled";
  m.first = 2;
  m.every = 3;
  m.kernel_every = 0;  // plain kernels only counted
  auto reps = RunProbe(dir, m, 1);
  ASSERT_EQ(reps.size(), 1u);
  ASSERT_TRUE(reps[0].done);
  bool ok = false;
  RingFile ring = LoadRing(dir.path(), reps[0].pid, &ok);
  ASSERT_TRUE(ok);
  std::map<std::string, uint64_t> ids;
  CheckProbeRing(reps[0], ring, m, &ids);
}

TEST(E2eHookProbe, TimingOffWritesNoGpuRecords) {
  TempDir dir;
  ProbeMode m;
  m.timing = "off";
  m.kernel_every = 4;
  auto reps = RunProbe(dir, m, 1);
  ASSERT_EQ(reps.size(), 1u);
  ASSERT_TRUE(reps[0].done);
  // The probe saw its ring while it ran: the hook was loaded.
  EXPECT_EQ(reps[0].values["ring_mapped"], "1");
  // A ring that never held anything is removed at exit; one that did must
  // hold no GPU record.
  const std::string path = dir.path() + "/xpu-ring-" + std::to_string(reps[0].pid) + ".bin";
  if (!ListFiles(dir.path(), "xpu-ring-" + std::to_string(reps[0].pid)).empty()) {
    bool ok = false;
    RingFile ring = LoadRing(dir.path(), reps[0].pid, &ok);
    ASSERT_TRUE(ok);
    std::map<std::string, uint64_t> ids;
    CheckProbeRing(reps[0], ring, m, &ids);
  }
}

// ---- xpu-fake-train ----------------------------------------------------------------

struct Plan {
  int steps = 0;
  std::map<std::string, uint64_t> per_step;
  std::map<std::string, Fields> gemm;  // qkv, mlp_up, dgrad, wgrad, attn
  std::map<std::string, uint64_t> coll_count;
};

Plan ReadPlan(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {XPU_FAKE_TRAIN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--print-plan");
  RunResult rr = Run(argv, {{"LD_LIBRARY_PATH", XPU_FAKE_LIB_DIR}}, 30);
  EXPECT_TRUE(rr.exited && rr.status == 0) << rr.err;
  Plan p;
  std::istringstream in(rr.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string tag, what, name;
    w >> tag >> what;
    if (what == "steps") {
      w >> p.steps;
    } else if (what == "per_step") {
      uint64_t n = 0;
      w >> name >> n;
      p.per_step[name] = n;
    } else if (what == "gemm") {
      w >> name;
      std::string rest;
      std::getline(w, rest);
      p.gemm[name] = ParseFields(rest, nullptr);
    } else if (what == "coll") {
      w >> name;
      std::string rest;
      std::getline(w, rest);
      p.coll_count[name] = ToU64(ParseFields(rest, nullptr)["count"]);
    }
  }
  EXPECT_GT(p.steps, 0);
  EXPECT_EQ(p.gemm.size(), 5u);
  EXPECT_EQ(p.coll_count.size(), 4u);
  return p;
}

std::map<std::string, uint64_t> ReadCallCounts(const std::string& path) {
  std::map<std::string, uint64_t> c;
  for (const auto& line : ReadLines(path)) {
    std::istringstream w(line);
    std::string api;
    uint64_t n = 0;
    if (w >> api >> n) c[api] = n;
  }
  EXPECT_FALSE(c.empty()) << path;
  return c;
}

int PidOfRank(const std::string& out, int rank) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    int r = -1, w = 0, pid = 0;
    if (sscanf(line.c_str(), "rank %d world %d pid %d ready", &r, &w, &pid) == 3 && r == rank) return pid;
  }
  ADD_FAILURE() << "no ready line for rank " << rank;
  return 0;
}

struct TrainMode {
  std::string timing = "all";
  uint32_t first = 32, every = 16, kernel_every = 0;
  double tflops = 0.1, gbps = 1;
  uint64_t kernel_ns = 30000;
  int kernel_us = 100;
  int hidden = 256, tokens = 128, layers = 2;
};

// Checks one rank's ring of xpu-fake-train against plan and call counts.
void CheckTrainRing(const RingFile& ring, const Plan& plan, std::map<std::string, uint64_t> calls,
                    const TrainMode& m, int rank, int world, bool use_lt, uint64_t t_begin,
                    uint64_t t_end) {
  const int L = m.layers, steps = plan.steps;
  // Call counts agree with the plan (the program does what it says).
  for (const char* api : {"cudaLaunchKernel", "cuLaunchKernel", "__cudaLaunchKernel",
                          "cublasGemmEx", "cublasGemmStridedBatchedEx", "ncclAllReduce",
                          "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv"}) {
    EXPECT_EQ(calls[api], plan.per_step.at(api) * steps) << api;
  }
  EXPECT_EQ(calls["cublasLtMatmul"], use_lt ? uint64_t(L) * steps : 0u);

  struct Want {
    uint64_t calls, per_step;
    uint32_t kind;
    std::string name;
    const Fields* gemm = nullptr;
    uint64_t count = 0;
  };
  std::vector<Want> wants;
  for (const auto& [gname, f] : plan.gemm) {
    std::string api = gname == "attn" ? "cublasGemmStridedBatchedEx"
                      : f.count("api")  ? f.at("api")
                                        : "cublasGemmEx";
    wants.push_back({uint64_t(L) * steps, uint64_t(L), XPU_OP_GEMM, api, &f});
  }
  const uint64_t coll_per_step = L + 2;
  wants.push_back({uint64_t(L) * steps, uint64_t(L), XPU_OP_ALLREDUCE, "ncclAllReduce", nullptr,
                   plan.coll_count.at("allreduce")});
  wants.push_back({uint64_t(steps), 1, XPU_OP_ALLGATHER, "ncclAllGather", nullptr,
                   plan.coll_count.at("allgather")});
  wants.push_back({uint64_t(steps), 1, XPU_OP_REDUCESCATTER, "ncclReduceScatter", nullptr,
                   plan.coll_count.at("reducescatter")});
  wants.push_back({uint64_t(steps), 1, XPU_OP_SEND, "ncclSend", nullptr,
                   plan.coll_count.at("sendrecv")});
  wants.push_back({uint64_t(steps), 1, XPU_OP_RECV, "ncclRecv", nullptr,
                   plan.coll_count.at("sendrecv")});

  std::map<uint32_t, std::vector<xpu_record_v1>> by_sig;
  for (const auto& r : ring.records) by_sig[r.sig_id].push_back(r);
  uint64_t expected_gpu = 0, recorded_gpu = 0, timed = 0, untracked = 0;
  uint64_t comm_id = 0;
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name + " count " + std::to_string(w.count));
    std::vector<uint32_t> ids;
    for (const auto& [id, s] : ring.sigs) {
      const auto& g = s.sig;
      if (g.kind != w.kind || s.name != w.name) continue;
      if (w.gemm != nullptr && (g.m != ToU64(w.gemm->at("m")) || g.n != ToU64(w.gemm->at("n")) ||
                                g.k != ToU64(w.gemm->at("k")) || g.batch != ToU64(w.gemm->at("batch"))))
        continue;
      if (w.gemm == nullptr && g.count != w.count) continue;
      ids.push_back(id);
    }
    ASSERT_EQ(ids.size(), 1u);
    const auto& g = ring.sigs.at(ids[0]).sig;
    std::vector<xpu_record_v1> recs = by_sig[ids[0]];
    std::stable_sort(recs.begin(), recs.end(),
                     [](const xpu_record_v1& a, const xpu_record_v1& b) { return a.seq < b.seq; });
    // One record per call, tracked or not.
    EXPECT_EQ(recs.size(), w.calls);
    expected_gpu += w.calls;
    recorded_gpu += recs.size();
    uint64_t modelled = 0;
    if (w.gemm != nullptr) {
      const uint64_t mnkb = ToU64(w.gemm->at("m")) * ToU64(w.gemm->at("n")) *
                            ToU64(w.gemm->at("k")) * ToU64(w.gemm->at("batch"));
      EXPECT_EQ(xpu_sig_flops(&g), 2.0 * double(mnkb));
      EXPECT_EQ(g.dtype, uint32_t{XPU_DT_BF16});
      EXPECT_EQ(g.out_dtype, uint32_t{XPU_DT_BF16});
      EXPECT_EQ(g.compute_type, uint32_t{XPU_DT_F32});
      EXPECT_EQ(g.gemm_flags,
                w.name == "cublasGemmStridedBatchedEx" ? uint32_t{XPU_GEMM_TRANSA} : 0u);
      modelled = uint64_t(2.0 * double(mnkb) / (m.tflops * 1e12) * 1e9);
    } else {
      EXPECT_EQ(g.dtype, uint32_t{XPU_DT_BF16});
      EXPECT_EQ(g.comm_rank, rank);
      EXPECT_EQ(g.comm_nranks, world);
      const int peer = w.kind == XPU_OP_SEND ? (rank + 1) % world
                       : w.kind == XPU_OP_RECV ? (rank - 1 + world) % world : -1;
      EXPECT_EQ(g.peer, peer);
      const uint64_t size = NcclSize(w.kind, w.count, 2, world);
      EXPECT_EQ(xpu_sig_bytes(&g), size);
      modelled = uint64_t(double(size) * BusFactor(w.kind, world) / m.gbps);
      if (comm_id == 0) comm_id = g.comm_id;
      EXPECT_EQ(g.comm_id, comm_id);
      // The per-communicator / per-peer numbering, complete.
      const uint64_t total = w.kind >= XPU_OP_SEND ? steps : coll_per_step * steps;
      if (w.kind >= XPU_OP_SEND) {
        for (size_t i = 0; i < recs.size(); ++i) {
          EXPECT_EQ(recs[i].seq, i + 1);
        }
      } else {
        for (const auto& r : recs) {
          EXPECT_GE(r.seq, 1u);
          EXPECT_LE(r.seq, total);
          // The step's order: L all-reduces, all-gather, reduce-scatter.
          const uint64_t pos = (r.seq - 1) % coll_per_step;
          const uint32_t kind_at = pos < uint64_t(L) ? XPU_OP_ALLREDUCE
                                   : pos == uint64_t(L) ? XPU_OP_ALLGATHER
                                                        : XPU_OP_REDUCESCATTER;
          EXPECT_EQ(g.kind, kind_at) << "seq " << r.seq;
        }
      }
    }
    for (size_t i = 0; i < recs.size(); ++i) {
      const auto& r = recs[i];
      const bool is_timed = r.flags & XPU_REC_TIMED;
      // Ops issued before the hook's event pool existed: CPU-side records,
      // all before the first tracked one, none in the last step.
      const bool is_untracked = r.flags & XPU_REC_UNTRACKED;
      if (is_untracked) {
        ++untracked;
        EXPECT_LT(i + w.per_step, recs.size()) << "untracked op in the last step";
        if (i > 0) {
          EXPECT_TRUE(recs[i - 1].flags & XPU_REC_UNTRACKED) << "occurrence " << i + 1;
        }
      }
      const bool want =
          !is_untracked && (m.timing == "all" || Sampled(i + 1, m.first, m.every));
      EXPECT_EQ(is_timed, want) << "occurrence " << i + 1;
      EXPECT_EQ(bool(r.flags & XPU_REC_NOT_TIMED), !want);
      if (!is_timed) continue;
      ++timed;
      const uint64_t dur = xpu_record_duration_ns(&r);
      EXPECT_GE(dur + 1000, modelled);
      EXPECT_LT(dur, modelled + kDurSlackNs);
      EXPECT_GE(r.start_ns + kMapSlackNs, t_begin);
      EXPECT_LE(EndNs(r), t_end + kMapSlackNs);
    }
  }
  // Collective seqs of the communicator: exactly 1..N.
  std::set<uint32_t> coll_seqs;
  for (const auto& r : ring.records) {
    const Signature* s = ring.sig(r.sig_id);
    if (xpu_op_is_collective(s->sig.kind) && s->sig.kind < XPU_OP_SEND) {
      EXPECT_TRUE(coll_seqs.insert(r.seq).second);
    }
  }
  ASSERT_FALSE(coll_seqs.empty());
  EXPECT_EQ(*coll_seqs.rbegin(), coll_per_step * steps);
  EXPECT_EQ(*coll_seqs.begin(), 1u);
  EXPECT_EQ(coll_seqs.size(), coll_per_step * steps);

  // Plain kernels: counted, traced 1 in N on the program's single thread.
  const uint64_t plain = calls["cudaLaunchKernel"] + calls["cuLaunchKernel"] +
                         calls["__cudaLaunchKernel"];
  const uint64_t traced = m.kernel_every ? plain / m.kernel_every : 0;
  EXPECT_EQ(ring.counter(XPU_CNT_LAUNCHES_UNTRACED), (plain - traced) - (plain - traced) % 256);
  uint64_t kernel_records = 0;
  for (const auto& r : ring.records) {
    const Signature* s = ring.sig(r.sig_id);
    if (s->sig.kind != XPU_OP_KERNEL) continue;
    ++kernel_records;
    EXPECT_TRUE(s->name == "xpu_fake_kernel" || s->name == "fake_softmax_kernel" ||
                s->name == "fake_gelu_kernel" || s->name == "fake_dropout_kernel")
        << s->name;
    if (r.flags & XPU_REC_UNTRACKED) {  // before the event pool existed
      ++untracked;
      EXPECT_FALSE(r.flags & XPU_REC_TIMED);
      continue;
    }
    // A traced plain kernel is always timed.
    EXPECT_TRUE(r.flags & XPU_REC_TIMED);
    ++timed;
    const uint64_t modelled =
        s->name == "xpu_fake_kernel" ? uint64_t(m.kernel_us) * 1000 : m.kernel_ns;
    EXPECT_GE(xpu_record_duration_ns(&r) + 1000, modelled) << s->name;
  }
  EXPECT_EQ(kernel_records, traced);
  expected_gpu += traced;
  recorded_gpu += kernel_records;
  EXPECT_EQ(recorded_gpu, expected_gpu);
  // Untracked records are exactly the ops counted as such.
  EXPECT_EQ(untracked, ring.counter(XPU_CNT_EVENT_POOL_EMPTY) + ring.counter(XPU_CNT_PENDING_FULL));
  EXPECT_EQ(ring.counter(XPU_CNT_SAMPLED), timed);

  // Host records: synchronize calls and communicator lifecycle, all of them.
  auto count_kind = [&](uint32_t kind, const char* name) {
    return ring.Select([&](const Signature& s) { return s.sig.kind == kind && s.name == name; }).size();
  };
  EXPECT_EQ(count_kind(XPU_OP_SYNC_STREAM, "cudaStreamSynchronize"),
            plan.per_step.at("cudaStreamSynchronize") * steps);
  EXPECT_EQ(count_kind(XPU_OP_SYNC_DEVICE, "cudaDeviceSynchronize"), 1u);
  EXPECT_EQ(count_kind(XPU_OP_COMM_INIT, "ncclCommInitRank"), 1u);
  EXPECT_EQ(count_kind(XPU_OP_COMM_DESTROY, "ncclCommDestroy"), 1u);
  // Nothing else.
  EXPECT_EQ(ring.records.size(),
            recorded_gpu + plan.per_step.at("cudaStreamSynchronize") * steps + 3);
}

std::vector<std::string> TrainArgs(const TrainMode& m, int steps, bool use_lt) {
  std::vector<std::string> a = {"--steps", std::to_string(steps), "--layers",
                                std::to_string(m.layers), "--hidden", std::to_string(m.hidden),
                                "--tokens", std::to_string(m.tokens), "--kernel-us",
                                std::to_string(m.kernel_us), "--step-sleep-ms", "40",
                                "--sync-every-layer"};
  if (use_lt) a.push_back("--use-lt");
  return a;
}

std::map<std::string, std::string> TrainEnv(const TempDir& dir, const TrainMode& m) {
  auto env = HookEnv(dir.path(), m.timing);
  env["XPU_SAMPLE_FIRST"] = std::to_string(m.first);
  env["XPU_SAMPLE_EVERY"] = std::to_string(m.every);
  env["XPU_KERNEL_SAMPLE_EVERY"] = std::to_string(m.kernel_every);
  env["XPU_FAKE_KERNEL_NS"] = std::to_string(m.kernel_ns);
  env["XPU_FAKE_TFLOPS"] = std::to_string(m.tflops);
  env["XPU_FAKE_NET_GBPS"] = std::to_string(m.gbps);
  env["XPU_FAKE_CALL_COUNTS"] = dir.path() + "/calls";
  return env;
}

uint64_t WallNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

TEST(E2eHookFakeTrain, SingleProcessTimingAllWithLt) {
  TempDir dir;
  TrainMode m;
  m.timing = "all";
  m.kernel_every = 5;
  const auto args = TrainArgs(m, 8, /*use_lt=*/true);
  Plan plan = ReadPlan(args);
  auto env = TrainEnv(dir, m);
  env["LD_PRELOAD"] = XPU_HOOK_SO;
  env["RANK"] = "0";
  env["WORLD_SIZE"] = "1";
  env["LOCAL_RANK"] = "0";
  std::vector<std::string> argv = {XPU_FAKE_TRAIN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const uint64_t t0 = WallNs();
  RunResult rr = xpu::e2e::Run(argv, env, 80);
  const uint64_t t1 = WallNs();
  ASSERT_TRUE(rr.exited && rr.status == 0) << rr.out << rr.err;
  bool ok = false;
  RingFile ring = LoadRing(dir.path(), PidOfRank(rr.out, 0), &ok);
  ASSERT_TRUE(ok);
  CheckTrainRing(ring, plan, ReadCallCounts(dir.path() + "/calls.rank0"), m, 0, 1, true, t0, t1);
}

TEST(E2eHookFakeTrain, FourRanksSampledSeqsAgreeAcrossRanks) {
  TempDir dir;
  TrainMode m;
  m.timing = "sampled";
  m.first = 2;
  m.every = 3;
  m.hidden = 128;
  m.tokens = 64;
  m.gbps = 0.1;
  const int world = 4;
  const auto args = TrainArgs(m, 6, /*use_lt=*/false);
  Plan plan = ReadPlan(args);
  auto env = TrainEnv(dir, m);
  std::vector<std::string> argv = {XPU_FAKE_LAUNCH_PATH, "--nproc", std::to_string(world),
                                   "--timeout", "75", "--env",
                                   std::string("LD_PRELOAD=") + XPU_HOOK_SO, "--",
                                   XPU_FAKE_TRAIN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const uint64_t t0 = WallNs();
  RunResult rr = xpu::e2e::Run(argv, env, 85);
  const uint64_t t1 = WallNs();
  ASSERT_TRUE(rr.exited && rr.status == 0) << rr.out << rr.err;
  std::vector<RingFile> rings;
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    bool ok = false;
    rings.push_back(LoadRing(dir.path(), PidOfRank(rr.out, r), &ok));
    ASSERT_TRUE(ok);
    EXPECT_EQ(rings.back().header.rank, r);
    EXPECT_EQ(rings.back().header.world_size, world);
    CheckTrainRing(rings.back(), plan,
                   ReadCallCounts(dir.path() + "/calls.rank" + std::to_string(r)), m, r, world,
                   false, t0, t1);
  }
  // One communicator, one id; seq s is the same collective on every rank.
  std::set<uint64_t> comm_ids;
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> at;  // seq -> (kind, count)
  for (const auto& ring : rings) {
    for (const auto& r : ring.records) {
      const Signature* s = ring.sig(r.sig_id);
      if (!xpu_op_is_collective(s->sig.kind)) continue;
      comm_ids.insert(s->sig.comm_id);
      if (s->sig.kind >= XPU_OP_SEND) continue;
      auto [it, fresh] = at.emplace(r.seq, std::make_pair(uint32_t(s->sig.kind), s->sig.count));
      if (!fresh) {
        EXPECT_EQ(it->second, std::make_pair(uint32_t(s->sig.kind), s->sig.count));
      }
    }
  }
  EXPECT_EQ(comm_ids.size(), 1u);
  // The at-map covers every collective of the run, seen by all ranks.
  EXPECT_EQ(at.size(), uint64_t(plan.steps) * (m.layers + 2));
  // rank r's n-th send to p is p's n-th receive from r.
  CheckP2pAcrossRanks(rings);
}

}  // namespace
}  // namespace xpu::e2e
