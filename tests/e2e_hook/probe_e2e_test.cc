// tests/e2e_hook/probe_e2e_test.cc — xpu-hook-probe (hook_probe.cc) under
// libxpu_hook.so: every intercepted API family, record by record against the
// probe's report (op shapes and call counts, issue order, host-clock marks).
// Expected values are computed in e2e_expect.cc, never taken from the hook.
//
// Durations: the fake runtime stamps events on its stream worker, so a timed
// op lasts at least its modelled time; the upper bound is generous because
// the machine may be loaded.
#include <cublas_api.h>

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
    std::vector<std::string> argv = {XPU_FAKE_LAUNCH_PATH,
                                     "--nproc",
                                     std::to_string(nproc),
                                     "--timeout",
                                     "75",
                                     "--env",
                                     std::string("LD_PRELOAD=") + XPU_HOOK_SO,
                                     "--"};
    argv.insert(argv.end(), probe.begin(), probe.end());
    rr = Run(argv, env, 85);
  }
  EXPECT_TRUE(rr.exited && rr.status == 0)
      << "status " << rr.status << " signal " << rr.signal << "\n"
      << rr.out << rr.err;
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
    if (s.sig.kind == XPU_OP_COMM_INIT && s.name == "ncclCommInitRank")
      comm_ids["A"] = s.sig.comm_id;
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
    Fields op;  // the (last) op line
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
    if (op.at("phase") == "warmup" && kind == "gemm") {
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
    const bool host =
        kind == "sync" || kind == "memcpy" || kind == "comm_init" || kind == "comm_destroy";
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
      // times (UNTRACKED); only the warm-up may have them. Mostly first, but
      // not only: the completion thread creates the pool in chunks and an op
      // may find the first chunk taken before the next is made or events
      // come back (seen on a loaded 2-CPU machine); it is counted the same
      // way (XPU_CNT_EVENT_POOL_EMPTY, checked below).
      const bool is_untracked = (r.flags & XPU_REC_UNTRACKED) != 0;
      if (is_untracked) {
        ++untracked;
        EXPECT_EQ(id, warmup_sig) << "untracked op after the warm-up";
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
  for (const Fields& c : rep.colls)
    coll_order[c.at("comm")].push_back({c.at("api"), ToU64(c.at("count"))});
  std::map<std::string, uint64_t> p2p_n;
  for (const Fields& p : rep.p2ps) p2p_n[p.at("comm") + p.at("dir") + p.at("peer")]++;
  std::map<uint64_t, std::set<uint32_t>> seqs_by_comm;
  for (const auto& r : ring.records) {
    const Signature* s = ring.sig(r.sig_id);
    const auto& g = s->sig;
    if (!xpu_op_is_collective(g.kind) || g.comm_id == 0) continue;
    std::string letter;
    for (const auto& [l, cid] : comm_ids)
      if (cid == g.comm_id) letter = l;
    ASSERT_FALSE(letter.empty());
    if (g.kind == XPU_OP_SEND || g.kind == XPU_OP_RECV) {
      const std::string key =
          letter + (g.kind == XPU_OP_SEND ? "send" : "recv") + std::to_string(g.peer);
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

}  // namespace
}  // namespace xpu::e2e
