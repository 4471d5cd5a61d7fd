// synthetic_job — a SYNTHETIC record generator for the scenario runner: a
// deterministic discrete-event model of a data-parallel transformer job on
// N ranks that emits the records the hook would write (GEMMs, kernels,
// collectives with last-arrival semantics, ring send/recv, host events,
// step markers, issue latencies), with one anomaly class injected.
//
// It is a model, not the real GPU-less pipeline: it exists so that the
// detectors can be exercised through the engine's real ingest path
// (Ingest.Stream) while the hook → daemon → engine pipeline is integrated.
// What it models, per step and rank:
//   host: [step marker] DataLoader call, then launches (launch_us each);
//   forward per layer on the compute stream: layernorm kernel, QKV GEMM,
//     an untraced ("minority") kernel, MLP-up GEMM, gelu kernel;
//   then an LM-head GEMM (m x n x k with k = 8512, or 8484 for bad_gemm);
//   backward per layer: dgrad + wgrad GEMMs, then the layer's gradient
//     all-reduce on the comm stream (waits for the compute stream, overlaps
//     the next layer's backward);
//   per step: all-gather and reduce-scatter on the world communicator, a
//     tensor-parallel all-reduce per host, a ring send/recv (r -> r+1), the
//     optimizer kernel, and one stream synchronize.
//   GPU: an op starts at max(launch, stream free, dependency); collectives
//   start on each member when it is ready and end together at last
//   arrival + size·factor / bandwidth.
// Faults (ScenarioFault): slow GEMMs on some ranks, slow links of some
// ranks, GC pauses on the host during forward/backward, a synchronize after
// every layer, a slow DataLoader, more untraced kernel time, misaligned
// LM-head GEMM; each from a given step on.
// Thread-safety: none; a value type used by one test thread.
#ifndef XPU_TESTS_SCENARIOS_SYNTHETIC_JOB_H_
#define XPU_TESTS_SCENARIOS_SYNTHETIC_JOB_H_

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "xpu/record.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::scenarios {

struct ScenarioFault {
  int from_step = 0;
  int until_step = -1;  // fault ends before this step (-1: never)
  std::set<int> slow_gpu_ranks;
  double slow_gpu_factor = 2.0;
  std::set<int> shared_gpu_ranks;  // a share of the GEMM calls wait for another process
  double shared_gpu_share = 0.3;   // of the calls
  double shared_gpu_factor = 8.0;  // time of such a call x factor
  std::set<int> slow_link_ranks;
  double slow_link_factor = 3.0;
  std::set<int> gc_ranks;
  double gc_ms_per_layer = 0;  // GC pause before every forward and backward layer
  std::set<int> sync_ranks;    // synchronize after every forward layer
  double sync_host_us = 0;     // then host work before the next launch (using the synced value)
  std::set<int> dataloader_ranks;
  double dataloader_ms = 0;  // instead of the healthy DataLoader time
  std::set<int> minority_ranks;
  double minority_us = 0;  // untraced kernel time per layer instead of the healthy one
  bool bad_gemm = false;   // LM-head k = 8484 at low efficiency on every rank
};

struct SyntheticJobSpec {
  std::string job = "synthetic";
  std::string job_name = "synthetic-backbone";
  int ranks = 8;
  int ranks_per_host = 4;
  int layers = 4;
  bool step_markers = true;
  uint32_t seed = 1;
  std::string gpu_model;     // ProcessIdentity.gpu_model; empty: not reported
  double peak_tflops = 400;  // modelled accelerator; healthy GEMMs reach 80 % of it
  ScenarioFault fault;
};

class SyntheticJob {
 public:
  explicit SyntheticJob(SyntheticJobSpec spec, uint64_t start_ns);
  // Simulates `steps` more steps; returns one Batch (all ranks) with the
  // signatures on first use and the records of those steps.
  xpu::v1::Batch NextWindow(int steps);
  int step() const { return step_; }
  std::string HostOf(int rank) const;
  uint64_t records_emitted() const { return records_emitted_; }

 private:
  struct Rank {
    uint64_t cpu = 0;
    uint64_t compute_free = 0;
    uint64_t comm_free = 0;
    uint32_t compute_seq = 0, comm_seq = 0;
    std::map<uint64_t, uint32_t> coll_seq;  // comm id -> next seq
    std::vector<xpu_record_v1> out;
    bool sigs_sent = false;
  };
  enum Sig : uint32_t {
    kLayerNorm = 1,
    kGelu,
    kOptimizer,
    kQkv,
    kMlpUp,
    kDgrad,
    kWgrad,
    kLmHead,
    kGradAllReduce,
    kAllGather,
    kReduceScatter,
    kTpAllReduce,
    kSend,
    kRecv,
    kStep,
    kDataLoader,
    kGc,
    kSync,
  };
  bool Active() const {
    return step_ >= spec_.fault.from_step &&
           (spec_.fault.until_step < 0 || step_ < spec_.fault.until_step);
  }
  double Jitter();
  void Launch(int r, Sig sig, uint64_t dur_ns, bool comm_stream, uint64_t dep_ns = 0,
              bool traced = true);
  void Host(int r, Sig sig, uint64_t dur_ns, uint32_t seq = 0);
  void Sync(int r);
  void Collective(Sig sig, const std::vector<int>& members, uint64_t comm_id, uint64_t bus_bytes);
  void RingP2p(uint64_t bytes);
  uint64_t GemmNs(int r, double flops, double efficiency);
  void Step();
  void AddSignatures(int r, xpu::v1::ProcessBatch* pb) const;

  SyntheticJobSpec spec_;
  std::vector<Rank> ranks_;
  int step_ = 0;
  std::mt19937 rng_;
  uint64_t records_emitted_ = 0;
};

}  // namespace xpu::scenarios

#endif  // XPU_TESTS_SCENARIOS_SYNTHETIC_JOB_H_
