// hook/nccl_profiler/nccl_profiler_e2e_test.cc — end to end, without a GPU:
// xpu-fake-train ranks (tests/fake_train) started by xpu-fake-launch under
// LD_PRELOAD=libxpu_hook.so, on the fake NCCL that loads and drives
// libnccl-profiler-xpu.so like NCCL 2.28 does (tests/fake_runtime/
// fake_nccl_profiler.h). The rings (XPU_RING_DIR) are read back with a small
// reader following include/xpu/ring.h and checked against the fake runtime's
// call counts (XPU_FAKE_CALL_COUNTS) and its collective model.
// Thread-safety: single-threaded test (the ranks are child processes).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace {

// ---- ring reading (include/xpu/ring.h rules, whole file copied first) ----------

struct Ring {
  int32_t rank = -1;
  uint32_t timing_policy = 0;
  std::vector<xpu_record_v1> records;
  std::map<uint32_t, xpu_signature_v1> sigs;
  uint64_t plugin_events = 0;
};

bool ReadRing(const std::string& path, Ring* out, std::string* err) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < XPU_RING_HEADER_SIZE) {
    *err = "short file " + path;
    return false;
  }
  xpu_ring_header_v1 h;
  memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != XPU_RING_MAGIC || h.record_size != sizeof(xpu_record_v1) ||
      h.signature_size != sizeof(xpu_signature_v1) || h.ring_capacity == 0 ||
      h.ring_offset + uint64_t{h.ring_capacity} * sizeof(xpu_record_v1) > bytes.size() ||
      h.sig_offset + uint64_t{h.sig_capacity} * sizeof(xpu_signature_v1) > bytes.size()) {
    *err = "bad header " + path;
    return false;
  }
  out->rank = h.rank;
  out->timing_policy = h.timing_policy;
  out->plugin_events = h.counters[XPU_CNT_PLUGIN_EVENTS];
  if (h.write_index > h.ring_capacity) {
    *err = "ring wrapped (records lost): " + path;
    return false;
  }
  for (uint64_t p = 0; p < h.write_index; ++p) {
    xpu_record_v1 r;
    memcpy(&r, bytes.data() + h.ring_offset + p * sizeof(r), sizeof(r));
    if (r.commit != static_cast<uint32_t>(p + 1)) continue;  // abandoned slot
    out->records.push_back(r);
  }
  for (uint32_t i = 1; i < h.sig_capacity; ++i) {
    xpu_signature_v1 s;
    memcpy(&s, bytes.data() + h.sig_offset + uint64_t{i} * sizeof(s), sizeof(s));
    if (s.commit == i) out->sigs[i] = s;
  }
  return true;
}

// ---- helpers -----------------------------------------------------------------------

std::string MakeTempDir() {
  char tmpl[] = "/tmp/xpu-plugin-e2e.XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

void RemoveTree(const std::string& dir) {
  if (dir.empty()) return;
  std::string cmd = "rm -rf '" + dir + "'";
  if (system(cmd.c_str()) != 0) fprintf(stderr, "cleanup of %s failed\n", dir.c_str());
}

std::vector<std::string> RingFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("xpu-ring-", 0) == 0) out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, uint64_t> ReadCounts(const std::string& path) {
  std::map<std::string, uint64_t> m;
  std::ifstream in(path);
  std::string api;
  uint64_t n;
  while (in >> api >> n) m[api] = n;
  return m;
}

struct TrainRun {
  int status = -1;
  std::string dir;
  std::map<int32_t, Ring> rings;                              // by RANK
  std::map<int32_t, std::map<std::string, uint64_t>> counts;  // by RANK
};

constexpr int kHidden = 512;
constexpr int kTokens = 256;
constexpr int kLayers = 2;
constexpr int kSteps = 6;
constexpr double kNetGbps = 2.0;

// Starts `nproc` ranks under the hook with `env` (K=V) and per-rank env, then
// reads back every ring and call-count file.
TrainRun Launch(int nproc, const std::vector<std::string>& env,
                const std::vector<std::pair<int, std::string>>& rank_env = {}) {
  TrainRun run;
  run.dir = MakeTempDir();
  const std::string rings = run.dir + "/rings";
  mkdir(rings.c_str(), 0700);
  // The hook sets NCCL_PROFILER_PLUGIN itself unless the user did.
  unsetenv("NCCL_PROFILER_PLUGIN");
  std::ostringstream cmd;
  cmd << XPU_FAKE_LAUNCH_PATH << " --nproc " << nproc << " --timeout 45"
      << " --env LD_PRELOAD=" << XPU_HOOK_SO << " --env XPU_RING_DIR=" << rings
      << " --env XPU_DAEMON=0 --env XPU_FAKE_CALL_COUNTS=" << run.dir << "/counts"
      << " --env XPU_FAKE_NET_GBPS=" << kNetGbps;
  for (const std::string& e : env) cmd << " --env " << e;
  for (const auto& [r, e] : rank_env) cmd << " --rank-env " << r << " " << e;
  cmd << " -- " << XPU_FAKE_TRAIN_PATH << " --steps " << kSteps << " --layers " << kLayers
      << " --hidden " << kHidden << " --tokens " << kTokens << " --kernel-us 20"
      << " --step-sleep-ms 5"
      << " > " << run.dir << "/launch.log 2>&1";
  run.status = system(cmd.str().c_str());
  for (const std::string& f : RingFiles(rings)) {
    Ring ring;
    std::string err;
    if (!ReadRing(f, &ring, &err)) {
      ADD_FAILURE() << err;
      continue;
    }
    if (ring.records.empty() && ring.sigs.empty()) continue;  // an exec'ed image's leftover
    EXPECT_EQ(run.rings.count(ring.rank), 0u) << "two rings for rank " << ring.rank;
    run.rings[ring.rank] = std::move(ring);
  }
  for (int r = 0; r < nproc; ++r) {
    run.counts[r] = ReadCounts(run.dir + "/counts.rank" + std::to_string(r));
  }
  return run;
}

std::string LaunchLog(const TrainRun& run) {
  std::ifstream in(run.dir + "/launch.log");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const char* ApiOf(uint32_t kind) {
  switch (kind) {
    case XPU_OP_ALLREDUCE:
      return "ncclAllReduce";
    case XPU_OP_ALLGATHER:
      return "ncclAllGather";
    case XPU_OP_REDUCESCATTER:
      return "ncclReduceScatter";
    case XPU_OP_SEND:
      return "ncclSend";
    case XPU_OP_RECV:
      return "ncclRecv";
    default:
      return "";
  }
}

// The fake NCCL's modelled duration (tests/fake_runtime/fake_nccl_comm.cc).
double ModelNs(uint32_t kind, int n) {
  const double elem = 2;  // bf16
  switch (kind) {
    case XPU_OP_ALLREDUCE:
      return 7.0 * kHidden * kHidden * elem * 2.0 * (n - 1) / n / kNetGbps;
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
      return 1.0 * kHidden * kHidden * elem * n * (n - 1) / n / kNetGbps;
    case XPU_OP_SEND:
    case XPU_OP_RECV:
      return 1.0 * kTokens * kHidden * elem / kNetGbps;
    default:
      return 0;
  }
}

uint64_t DurationNs(const xpu_record_v1& r) {
  return (r.flags & XPU_REC_DUR_US) ? uint64_t{r.duration} * 1000 : r.duration;
}

bool IsGpuCollective(const Ring& ring, const xpu_record_v1& r) {
  auto it = ring.sigs.find(r.sig_id);
  return it != ring.sigs.end() && xpu_op_is_collective(it->second.kind) &&
         (r.flags & XPU_REC_HOST) == 0;
}

constexpr uint32_t kTimedKinds[] = {XPU_OP_ALLREDUCE, XPU_OP_ALLGATHER, XPU_OP_REDUCESCATTER,
                                    XPU_OP_SEND, XPU_OP_RECV};

// ---- tests -------------------------------------------------------------------------

// Default policy (sampled) with the plugin found next to the hook: every
// collective and p2p op gets exactly one plugin-timed record that joins the
// interposer's completion record (same sig_id and seq), counts equal the
// runtime's call counts, and durations follow the collective model.
TEST(NcclProfilerE2eTest, PluginTimesEveryCollectiveAndJoinsTheInterposer) {
  constexpr int kRanks = 3;
  TrainRun run = Launch(kRanks, {});
  ASSERT_EQ(run.status, 0) << LaunchLog(run);
  ASSERT_EQ(run.rings.size(), static_cast<size_t>(kRanks)) << LaunchLog(run);

  // (kind, seq) -> duration per rank, for the cross-rank model check.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> durations;
  for (const auto& [rank, ring] : run.rings) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(ring.timing_policy, 0u);  // sampled
    std::map<std::pair<uint32_t, uint32_t>, int> plugin_keys, interposer_keys;
    std::map<uint32_t, uint64_t> plugin_per_kind;
    std::map<uint32_t, std::set<uint32_t>> seqs_per_kind;
    for (const xpu_record_v1& r : ring.records) {
      if (!IsGpuCollective(ring, r)) {
        EXPECT_EQ(r.flags & XPU_REC_PLUGIN, 0) << "sig " << r.sig_id;
        continue;
      }
      const uint32_t kind = ring.sigs.at(r.sig_id).kind;
      if (r.flags & XPU_REC_PLUGIN) {
        EXPECT_EQ(r.flags & (XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID),
                  XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
        EXPECT_EQ(r.flags & XPU_REC_NOT_TIMED, 0);
        // GPU time mapped into the host clock: the op started after its CPU
        // launch, and not absurdly later (an unmapped ptimer is 1000 s off).
        EXPECT_GE(r.issue_latency_ns, 0);
        EXPECT_LT(r.issue_latency_ns, 1'000'000'000);  // 1 s
        EXPECT_GT(r.seq, 0u);
        ++plugin_keys[{r.sig_id, r.seq}];
        ++plugin_per_kind[kind];
        seqs_per_kind[kind].insert(r.seq);
        durations[{kind, r.seq}].push_back(DurationNs(r));
      } else {
        // The interposer's own record of a plugin-timed op: completion only.
        EXPECT_EQ(r.flags & XPU_REC_NOT_TIMED, XPU_REC_NOT_TIMED) << "sig " << r.sig_id;
        EXPECT_EQ(r.flags & XPU_REC_TIMED, 0);
        ++interposer_keys[{r.sig_id, r.seq}];
      }
    }
    // The join: same (sig_id, seq) on both sides, once each.
    EXPECT_EQ(plugin_keys.size(), interposer_keys.size());
    for (const auto& [key, n] : plugin_keys) {
      EXPECT_EQ(n, 1) << "sig " << key.first << " seq " << key.second;
      EXPECT_EQ(interposer_keys.count(key), 1u) << "sig " << key.first << " seq " << key.second;
    }
    // Counts per kind equal the fake runtime's call counts.
    const auto& counts = run.counts.at(rank);
    for (uint32_t kind : kTimedKinds) {
      ASSERT_TRUE(counts.count(ApiOf(kind))) << ApiOf(kind);
      EXPECT_EQ(plugin_per_kind[kind], counts.at(ApiOf(kind))) << ApiOf(kind);
    }
    // Collective seqs number all collectives of the communicator 1..K.
    std::set<uint32_t> coll;
    for (uint32_t k : {XPU_OP_ALLREDUCE, XPU_OP_ALLGATHER, XPU_OP_REDUCESCATTER}) {
      coll.insert(seqs_per_kind[k].begin(), seqs_per_kind[k].end());
    }
    const uint64_t k =
        counts.at("ncclAllReduce") + counts.at("ncclAllGather") + counts.at("ncclReduceScatter");
    ASSERT_EQ(coll.size(), k);
    EXPECT_EQ(*coll.begin(), 1u);
    EXPECT_EQ(*coll.rbegin(), k);
    EXPECT_EQ(seqs_per_kind[XPU_OP_SEND].size(), counts.at("ncclSend"));
    EXPECT_EQ(ring.plugin_events, plugin_keys.size());
  }

  // Every rank saw each op; the last rank to arrive waits for nobody, so the
  // shortest duration per op is the modelled transfer time.
  std::map<uint32_t, std::vector<double>> excess_ns;
  for (const auto& [key, ds] : durations) {
    EXPECT_EQ(ds.size(), static_cast<size_t>(kRanks)) << key.first << "/" << key.second;
    const double model = ModelNs(key.first, kRanks);
    const double shortest = static_cast<double>(*std::min_element(ds.begin(), ds.end()));
    EXPECT_GE(shortest, 0.95 * model) << "kind " << key.first << " seq " << key.second;
    excess_ns[key.first].push_back(shortest - model);
  }
  ASSERT_EQ(excess_ns.size(), std::size(kTimedKinds));
  for (auto& [kind, v] : excess_ns) {
    std::sort(v.begin(), v.end());
    // Beyond the model only the fake stream worker's scheduling delay: the
    // median stays within half the model plus 3 ms on a loaded machine.
    EXPECT_LT(v[v.size() / 2], 0.5 * ModelNs(kind, kRanks) + 3e6) << "kind " << kind;
  }
  if (!::testing::Test::HasFailure()) RemoveTree(run.dir);
}

// XPU_TIMING=all: the hook declines the plugin, two events time every op.
TEST(NcclProfilerE2eTest, TimingAllUsesEventsAndNoPlugin) {
  constexpr int kRanks = 2;
  TrainRun run = Launch(kRanks, {"XPU_TIMING=all"});
  ASSERT_EQ(run.status, 0) << LaunchLog(run);
  ASSERT_EQ(run.rings.size(), static_cast<size_t>(kRanks)) << LaunchLog(run);
  for (const auto& [rank, ring] : run.rings) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(ring.timing_policy, 1u);
    std::map<uint32_t, uint64_t> per_kind, timed_per_kind;
    for (const xpu_record_v1& r : ring.records) {
      EXPECT_EQ(r.flags & XPU_REC_PLUGIN, 0);
      if (!IsGpuCollective(ring, r)) continue;
      const uint32_t kind = ring.sigs.at(r.sig_id).kind;
      ++per_kind[kind];
      if (r.flags & XPU_REC_UNTRACKED) continue;  // before the hook's event pool existed
      EXPECT_EQ(r.flags & (XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID),
                XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
      EXPECT_EQ(r.flags & XPU_REC_SAMPLED, 0);
      ++timed_per_kind[kind];
    }
    for (uint32_t kind : kTimedKinds) {
      EXPECT_EQ(per_kind[kind], run.counts.at(rank).at(ApiOf(kind))) << ApiOf(kind);
      EXPECT_GE(2 * timed_per_kind[kind], per_kind[kind]) << ApiOf(kind);
    }
    EXPECT_EQ(ring.plugin_events, 0u);
  }
  if (!::testing::Test::HasFailure()) RemoveTree(run.dir);
}

// The plugin switched off ("none") or not loadable (a bad path): collectives
// fall back to event timing (sampled per signature: the first
// XPU_SAMPLE_FIRST occurrences, here all of them).
TEST(NcclProfilerE2eTest, WithoutThePluginCollectivesAreEventTimed) {
  constexpr int kRanks = 2;
  TrainRun run = Launch(kRanks, {},
                        {{0, "NCCL_PROFILER_PLUGIN=none"},
                         {1, "NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler-xpu.so"}});
  ASSERT_EQ(run.status, 0) << LaunchLog(run);
  ASSERT_EQ(run.rings.size(), static_cast<size_t>(kRanks)) << LaunchLog(run);
  for (const auto& [rank, ring] : run.rings) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::map<uint32_t, uint64_t> per_kind, timed_per_kind;
    for (const xpu_record_v1& r : ring.records) {
      EXPECT_EQ(r.flags & XPU_REC_PLUGIN, 0);
      if (!IsGpuCollective(ring, r)) continue;
      const uint32_t kind = ring.sigs.at(r.sig_id).kind;
      ++per_kind[kind];
      if (r.flags & XPU_REC_UNTRACKED) continue;  // before the hook's event pool existed
      EXPECT_EQ(r.flags & (XPU_REC_TIMED | XPU_REC_SAMPLED), XPU_REC_TIMED | XPU_REC_SAMPLED);
      ++timed_per_kind[kind];
    }
    for (uint32_t kind : kTimedKinds) {
      EXPECT_EQ(per_kind[kind], run.counts.at(rank).at(ApiOf(kind))) << ApiOf(kind);
      EXPECT_GE(2 * timed_per_kind[kind], per_kind[kind]) << ApiOf(kind);
    }
    EXPECT_EQ(ring.plugin_events, 0u);
  }
  if (!::testing::Test::HasFailure()) RemoveTree(run.dir);
}

// XPU_TIMING=off: interposition only. No GPU-op record (timed or not) and
// no plugin record; the ranks run normally.
TEST(NcclProfilerE2eTest, TimingOffWritesNoGpuRecords) {
  constexpr int kRanks = 2;
  TrainRun run = Launch(kRanks, {"XPU_TIMING=off"});
  ASSERT_EQ(run.status, 0) << LaunchLog(run);
  for (const auto& [rank, ring] : run.rings) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(ring.timing_policy, 2u);
    for (const xpu_record_v1& r : ring.records) {
      EXPECT_NE(r.flags & XPU_REC_HOST, 0) << "sig " << r.sig_id << " flags " << r.flags;
      EXPECT_EQ(r.flags & XPU_REC_PLUGIN, 0);
    }
    EXPECT_EQ(ring.plugin_events, 0u);
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_GT(run.counts.at(r).at("ncclAllReduce"), 0u);
  if (!::testing::Test::HasFailure()) RemoveTree(run.dir);
}

}  // namespace
