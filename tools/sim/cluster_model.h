// tools/sim/cluster_model.h — xpu-sim's model of one training job on N ranks:
// a deterministic discrete-event model that emits, per rank and window, the
// 32-byte records the hook would write (include/xpu/record.h) under the
// hook's timing policy, plus each rank's hang-watch table.
//
// Layouts (ranks are numbered tensor-parallel first, then data-parallel,
// then pipeline stage: rank = tp_i + tp * (dp_i + dp * stage)):
//   dp       every rank holds the whole model. Per step: DataLoader, the
//            forward of every layer (QKV and MLP GEMMs, untraced element-wise
//            kernels), the LM-head GEMM, an all-reduce inside each host, the
//            backward (dgrad and wgrad GEMMs) with the layer's gradient
//            all-reduce over all ranks overlapping the next layer, an
//            all-gather and a reduce-scatter over all ranks, a ring
//            send/recv (rank r to r+1), the optimizer kernel and one stream
//            synchronize. (The model of tests/scenarios/synthetic_job.h, at
//            the hook's default policy.)
//   tpXppY   tensor-parallel groups of X ranks inside a host (an all-reduce
//            after each attention and MLP block, forward and backward),
//            Y pipeline stages across hosts (GPipe: every microbatch's
//            forward, stage by stage, activations sent to the next stage;
//            then the backward in reverse, gradients sent back), and per
//            stage layer a gradient all-reduce over the data-parallel group
//            (the ranks at the same stage and tensor-parallel index).
// GPU ops start at max(launch, stream free, dependency); a collective ends at
// its last member's arrival + size x factor / bandwidth; a point-to-point
// transfer at max(both ends ready) + size / bandwidth.
//
// Timing policy (docs/timing-policy.md): `sampled` (the hook's default):
// every GEMM and collective is a record; a GEMM's n-th occurrence per
// signature is GPU-timed when n <= 32 or (n - 32) % 16 == 0, else
// completion-tracked (XPU_REC_NOT_TIMED: CPU launch, completion - launch);
// every collective and send/recv has the interposer's XPU_REC_NOT_TIMED
// record plus the NCCL profiler plugin's timed one. `all`: every op is one
// timed record. Plain kernel launches are untraced in both (they take GPU
// time but write no record), as with XPU_KERNEL_SAMPLE_EVERY=0.
//
// Faults (fault.h) change the model from their window on. A hang fault stops
// the job at the first step of its window: the ranks of the stuck
// communicator issue the stuck collective (all of them for `hang`, all but
// the culprit for `stop` and `python`, the culprit with another size for
// `mismatch`) and no rank writes records afterwards.
//
// Thread-safety: none. RunWindow is the only mutator; the const accessors
// may be read by several threads once it has returned.
#ifndef XPU_TOOLS_SIM_CLUSTER_MODEL_H_
#define XPU_TOOLS_SIM_CLUSTER_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/fault.h"
#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::sim {

enum class TimingPolicy { kSampled, kAll };

struct Layout {
  std::string name = "dp";
  int tp = 1;  // tensor-parallel group size, inside a host
  int pp = 1;  // pipeline stages
  bool data_parallel_only() const { return tp == 1 && pp == 1; }
};
// "dp" or "tpXppY" (e.g. tp8pp4); checks that the ranks fill the layout and
// that a tensor-parallel group fits in a host.
absl::StatusOr<Layout> ParseLayout(std::string_view text, int32_t ranks, int32_t ranks_per_host);

struct ModelSpec {
  std::string job = "xpu-sim";
  std::string job_name = "xpu-sim";
  int32_t ranks = 8;
  int32_t ranks_per_host = 8;
  Layout layout;
  int layers = 8;
  int microbatches = 4;  // pipeline layouts
  int steps_per_window = 6;
  TimingPolicy timing = TimingPolicy::kSampled;
  uint32_t seed = 1;
  std::string gpu_model = "Simulated GPU";
  std::vector<FaultSpec> faults;
};

// What a rank does once the job hangs.
enum class HangRole : uint8_t {
  kNone,      // no hang, or not a member of the stuck communicator
  kWaiting,   // issued the stuck collective, waits inside it
  kStopped,   // culprit: stopped before issuing it
  kInPython,  // culprit: never issued it, stays in Python
  kOtherSize, // culprit: issued it with another size
  kLinkFrom,  // culprit: inside it, its link to the next rank stalls
};

struct HangState {
  bool active = false;
  int window = -1;
  uint64_t since_ns = 0;  // CPU launch of the stuck collective (the first member's)
  uint64_t comm_id = 0;
  uint32_t seq = 0;
  uint16_t kind = 0;
  uint64_t bytes = 0;
  std::string name;
  int32_t comm_nranks = 0;
};

class ClusterModel {
 public:
  explicit ClusterModel(ModelSpec spec);

  const ModelSpec& spec() const { return spec_; }
  int32_t ranks() const { return spec_.ranks; }
  int32_t hosts() const { return hosts_; }
  int32_t HostOf(int32_t rank) const { return rank / spec_.ranks_per_host; }
  std::string HostName(int32_t host) const;
  int32_t Pid(int32_t rank) const { return 100000 + rank; }

  // Simulates window `w`: its steps start no earlier than start_ns. Then
  // Records(r) holds rank r's records of the window and StepEnds(r) the
  // index in them after each step (a daemon flush per step).
  void RunWindow(int w, uint64_t start_ns);
  const std::vector<xpu_record_v1>& Records(int32_t r) const { return ranks_[r].out; }
  const std::vector<uint32_t>& StepEnds(int32_t r) const { return ranks_[r].step_ends; }
  uint64_t steps_done() const { return steps_done_; }
  uint64_t records_emitted() const { return records_emitted_; }
  // End of the latest record of any rank (host clock).
  uint64_t clock_ns() const { return clock_ns_; }
  // How long the latest window's steps took, from its start to the end of
  // its last op on any rank.
  uint64_t last_span_ns() const { return last_span_ns_; }

  void FillIdentity(int32_t r, xpu::v1::ProcessIdentity* id) const;
  // The rank's full signature table (sent once per process and stream).
  void AppendSignatures(int32_t r, xpu::v1::ProcessBatch* pb) const;
  // The hook's hang-watch table at `now_ns` (suspect once an op is
  // outstanding longer than hang_floor_ns).
  void FillProgress(int32_t r, uint64_t now_ns, uint64_t hang_floor_ns,
                    xpu::v1::HangProgress* p) const;

  const HangState& hang() const { return hang_; }
  HangRole Role(int32_t r) const { return hang_.active ? roles_[r] : HangRole::kNone; }
  // The members of the stuck communicator in ring order (comm rank order).
  std::vector<int32_t> StuckMembers() const;
  // The rank after `r` on the ring of the communicator a hang fault at `r`
  // stalls (the world communicator, or r's data-parallel group).
  int32_t RingNext(int32_t r) const;

 private:
  enum Sig : uint32_t {
    kQkv = 1,
    kMlpUp,
    kDgrad,
    kWgrad,
    kLmHead,
    kGradAllReduce,  // world (dp) or data-parallel group (tp/pp)
    kAllGather,
    kReduceScatter,
    kTpAllReduce,
    kSendNext,  // ring / pipeline: to the next rank or stage
    kRecvPrev,
    kSendPrev,  // pipeline backward: gradients to the previous stage
    kRecvNext,
    kStep,
    kDataLoader,
    kGc,
    kSync,
    kOtherSizeAllReduce,  // the mismatch culprit's collective
    kNumSigs
  };
  enum OpClass { kGemmOp, kCollectiveOp };
  // Communicators a rank is in.
  enum CommSlot { kDpComm = 0, kTpComm = 1, kRingComm = 2, kNumCommSlots };
  struct Rank {
    uint64_t cpu = 0, compute_free = 0, comm_free = 0;
    uint32_t compute_seq = 0, comm_seq = 0;
    uint32_t coll_seq[kNumCommSlots] = {0, 0, 0};
    uint32_t occurrences[kNumSigs] = {};
    std::vector<xpu_record_v1> out;
    std::vector<uint32_t> step_ends;
  };

  // The modelled accelerator and network, and the model's size.
  static constexpr double kWorldBusBw = 100e9;  // bytes/s, collectives across hosts
  static constexpr double kNodeBusBw = 300e9;   // inside a host
  static constexpr double kLinkBw = 50e9;       // point-to-point
  static constexpr uint64_t kLaunchNs = 8000;   // host cost of one launch
  static constexpr uint64_t kTokens = 4096;     // per step and rank
  uint64_t Hidden() const { return spec_.layout.data_parallel_only() ? 4096 : 8192; }

  // Fault state of the current window.
  bool Has(int32_t r, FaultKind k) const { return (active_[r] >> static_cast<int>(k)) & 1u; }
  void ActivateFaults(int w);
  double Jitter();
  uint64_t GemmNs(int32_t r, double flops);

  // Primitives.
  void Emit(int32_t r, Sig sig, uint64_t launch, uint64_t start, uint64_t dur, uint16_t stream,
            uint32_t seq, OpClass cls);
  void Compute(int32_t r, Sig sig, uint64_t dur, uint64_t dep, bool traced);
  void Host(int32_t r, Sig sig, uint64_t dur, uint32_t seq);
  void SyncStream(int32_t r);
  // All members of one communicator; end = last arrival + duration.
  void Collective(Sig sig, CommSlot slot, const std::vector<int32_t>& members, uint64_t bus_bytes,
                  double bw);
  // A point-to-point transfer src -> dst in two halves: the sender posts it
  // when its stage runs (returns when the sender was ready), the receiver
  // takes it when its stage runs (returns the end of the receive).
  uint64_t PostSend(int32_t src, int32_t dst, Sig sig, uint64_t bytes);
  uint64_t Receive(int32_t src, int32_t dst, Sig sig, uint64_t bytes, uint64_t sender_ready);
  // Every rank sends to r+1 and receives from r-1 at once (dp layout).
  void RingExchange(uint64_t bytes);
  double LinkNs(int32_t src, int32_t dst, uint64_t bytes);

  // The step programs.
  void StepDataParallel(bool hang_now);
  void StepPipeline(bool hang_now);
  void PipelineForward(int32_t stage);
  void PipelineBackward(int32_t stage);
  // The TP all-reduce of every tensor-parallel group of the stage.
  void StageTpAllReduce(int32_t stage);
  void StartStep(int32_t r);
  void GcPause(int32_t r);
  void Optimizer(int32_t r);
  void HangAt(CommSlot slot, Sig sig, const std::vector<int32_t>& members, uint64_t bytes);
  std::vector<int32_t> TpGroupOf(int32_t r) const;  // tp/pp layouts
  std::vector<int32_t> DpGroupOf(int32_t r) const;  // tp/pp layouts
  uint64_t CommId(int32_t r, CommSlot slot) const;
  int32_t CommRank(int32_t r, CommSlot slot) const;
  int32_t CommSize(CommSlot slot) const;

  ModelSpec spec_;
  int32_t hosts_ = 0;
  int dp_ = 1;  // data-parallel degree
  std::vector<Rank> ranks_;
  std::vector<int32_t> world_;     // 0..N-1
  std::vector<uint16_t> active_;   // per rank: bit per FaultKind active this window
  std::vector<HangRole> roles_;    // per rank, once hung
  std::vector<uint64_t> act_ready_;  // pipeline: sender ready per (rank, microbatch)
  HangState hang_;
  int window_ = 0;
  uint64_t rng_ = 0;
  uint64_t steps_done_ = 0;
  uint64_t records_emitted_ = 0;
  uint64_t clock_ns_ = 0;
  uint64_t last_span_ns_ = 0;
};

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_CLUSTER_MODEL_H_
