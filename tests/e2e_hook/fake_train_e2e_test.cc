// tests/e2e_hook/fake_train_e2e_test.cc — xpu-fake-train under
// libxpu_hook.so, one process and four ranks: counts per signature against
// --print-plan and the fake runtime's call counts (XPU_FAKE_CALL_COUNTS),
// shapes, FLOPs, bytes, modelled durations, sampler decisions, and sequence
// numbers that agree across ranks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "e2e_expect.h"
#include "e2e_util.h"
#include "ring_file.h"
#include "xpu/formulas.h"

namespace xpu::e2e {
namespace {

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
    if (sscanf(line.c_str(), "rank %d world %d pid %d ready", &r, &w, &pid) == 3 && r == rank)
      return pid;
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
    std::string api = gname == "attn"  ? "cublasGemmStridedBatchedEx"
                      : f.count("api") ? f.at("api")
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
  wants.push_back(
      {uint64_t(steps), 1, XPU_OP_SEND, "ncclSend", nullptr, plan.coll_count.at("sendrecv")});
  wants.push_back(
      {uint64_t(steps), 1, XPU_OP_RECV, "ncclRecv", nullptr, plan.coll_count.at("sendrecv")});

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
      if (w.gemm != nullptr &&
          (g.m != ToU64(w.gemm->at("m")) || g.n != ToU64(w.gemm->at("n")) ||
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
      const int peer = w.kind == XPU_OP_SEND   ? (rank + 1) % world
                       : w.kind == XPU_OP_RECV ? (rank - 1 + world) % world
                                               : -1;
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
          const uint32_t kind_at = pos < uint64_t(L)    ? XPU_OP_ALLREDUCE
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
      const bool want = !is_untracked && (m.timing == "all" || Sampled(i + 1, m.first, m.every));
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
  const uint64_t plain =
      calls["cudaLaunchKernel"] + calls["cuLaunchKernel"] + calls["__cudaLaunchKernel"];
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
    return ring.Select([&](const Signature& s) { return s.sig.kind == kind && s.name == name; })
        .size();
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
  std::vector<std::string> a = {
      "--steps",           std::to_string(steps),       "--layers",        std::to_string(m.layers),
      "--hidden",          std::to_string(m.hidden),    "--tokens",        std::to_string(m.tokens),
      "--kernel-us",       std::to_string(m.kernel_us), "--step-sleep-ms", "40",
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
  std::vector<std::string> argv = {XPU_FAKE_LAUNCH_PATH,
                                   "--nproc",
                                   std::to_string(world),
                                   "--timeout",
                                   "75",
                                   "--env",
                                   std::string("LD_PRELOAD=") + XPU_HOOK_SO,
                                   "--",
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
