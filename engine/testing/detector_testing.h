// detector_testing — a job built by hand for the detectors' unit tests:
// ranks with their signatures and records go into a real JobState the way
// the ingest path puts them there (SignatureTable, NoteSignature,
// ApplyRecords), and windows are closed the way the engine's tick closes
// them, so that a detector's OnWindow sees exactly what it sees in the
// engine. Test-only; not thread-safe.
#ifndef XPU_ENGINE_DETECTORS_DETECTOR_TESTING_H_
#define XPU_ENGINE_DETECTORS_DETECTOR_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/state/batch_builder.h"
#include "engine/state/batch_decoder.h"
#include "engine/window/detector.h"
#include "engine/window/detector_config.h"
#include "engine/window/window_view.h"
#include "engine/history/history.h"
#include "engine/state/job_state.h"
#include "xpu/record.h"

namespace xpu::engine::testing {

inline constexpr uint64_t kUs = 1000;
inline constexpr uint64_t kMs = 1000 * kUs;
inline constexpr uint64_t kSec = 1000 * kMs;

// Signatures, built as a daemon sends them.
inline xpu::v1::Signature GemmSig(uint32_t id, uint32_t m, uint32_t n, uint32_t k) {
  return MakeGemmSignature(id, m, n, k);
}
inline xpu::v1::Signature KernelSig(uint32_t id, const std::string& name = "kernel") {
  return MakeKernelSignature(id, name);
}
// A collective of `count` bf16 elements on communicator `comm`.
inline xpu::v1::Signature CollSig(uint32_t id, uint16_t kind, uint64_t count, uint64_t comm,
                                  int32_t comm_rank, int32_t nranks, int32_t peer = -1) {
  xpu::v1::Signature s =
      MakeCollectiveSignature(id, kind, count, XPU_DT_BF16, comm, comm_rank, nranks);
  s.set_peer(peer);
  return s;
}
// A host event (step marker, DataLoader, GC, synchronization).
inline xpu::v1::Signature HostSig(uint32_t id, uint16_t kind) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(kind);
  s.set_name(absl::StrCat("op", kind));
  s.set_comm_rank(-1);
  s.set_peer(-1);
  return s;
}

// A GPU-timed record; `issue_ns` >= 0 sets a valid issue latency.
inline xpu_record_v1 Timed(uint32_t sig_id, uint64_t start_ns, uint64_t dur_ns, uint32_t seq = 0,
                           int64_t issue_ns = -1, uint16_t stream = 1) {
  xpu_record_v1 r = MakeRecord(sig_id, start_ns, static_cast<uint32_t>(dur_ns), seq);
  r.stream = stream;
  if (issue_ns >= 0) {
    r.issue_latency_ns = static_cast<int32_t>(issue_ns);
    r.flags |= XPU_REC_ISSUE_LAT_VALID;
  }
  return r;
}
// A host event record (XPU_REC_HOST).
inline xpu_record_v1 Host(uint32_t sig_id, uint64_t start_ns, uint64_t dur_ns, uint32_t seq = 0) {
  return MakeRecord(sig_id, start_ns, static_cast<uint32_t>(dur_ns), seq, XPU_REC_HOST);
}

class TestJob {
 public:
  static constexpr uint64_t kStartNs = 1000 * kSec;

  explicit TestJob(std::string job_name = "gpt", std::string job = "job-1")
      : state_(std::move(job), std::move(job_name), 1 << 20, kStartNs) {}

  // Rank `rank` on `host` ("node<rank / 4>" when empty), created on first use.
  ProcessState& Rank(int32_t rank, const std::string& host = "", const std::string& gpu = "") {
    xpu::v1::ProcessIdentity id;
    id.set_job(state_.job());
    id.set_job_name(state_.job_name());
    id.set_rank(rank);
    id.set_host(host.empty() ? absl::StrCat("node", rank / 4) : host);
    id.set_pid(1000 + rank);
    id.set_gpu_model(gpu);
    auto it = state_.processes().find(absl::StrCat("rank:", rank));
    if (it != state_.processes().end() && host.empty() && gpu.empty()) return *it->second;
    return state_.GetOrCreateProcess(id, "daemon", now_);
  }
  // Defines a signature on the rank (as the decoder does) and notes its
  // communicator.
  void Define(int32_t rank, const xpu::v1::Signature& s) {
    ProcessState& p = Rank(rank);
    p.sigs.Define(s.id(), ToSignatureInfo(s));
    state_.NoteSignature(p, *p.sigs.Find(s.id()));
  }
  void Add(int32_t rank, const xpu_record_v1& r) { Add(rank, std::vector<xpu_record_v1>{r}); }
  void Add(int32_t rank, const std::vector<xpu_record_v1>& r) {
    state_.ApplyRecords(Rank(rank), r.data(), r.size(), now_);
  }
  // Closes the window `window_ns` after the previous one; the detectors then
  // see the records added since.
  void CloseWindow(uint64_t window_ns = 60 * kSec) {
    now_ += window_ns;
    state_.CloseWindow(now_);
  }
  uint64_t now() const { return now_; }
  JobState& state() { return state_; }
  operator const JobState&() const { return state_; }

 private:
  JobState state_;
  uint64_t now_ = kStartNs;
};

// What `d` reports for the window just closed.
inline std::vector<Diagnosis> Diagnose(Detector& d, const JobState& job) {
  VectorSink sink;
  d.OnWindow(job, sink);
  return sink.out;
}

// Default thresholds with some overridden.
inline std::shared_ptr<const DetectorConfig> Config(
    std::initializer_list<std::pair<const char*, double>> overrides = {}) {
  auto c = std::make_shared<DetectorConfig>();
  for (const auto& [key, v] : overrides) c->Set(key, v);
  return c;
}

// Previous runs and calibrations from fixed values, instead of the store.
class FixedHistory : public history::HistorySource {
 public:
  absl::StatusOr<std::vector<history::RunBaseline>> PreviousRuns(const std::string& job_name,
                                                                 const std::string& gpu_model,
                                                                 const std::string& exclude_job,
                                                                 int limit) override {
    std::vector<history::RunBaseline> out;
    for (const history::RunBaseline& r : runs) {
      if (r.job_name == job_name && r.gpu_model == gpu_model && r.job != exclude_job &&
          static_cast<int>(out.size()) < limit)
        out.push_back(r);
    }
    return out;
  }
  absl::StatusOr<history::CalibrationRows> CalibrationOf(const std::string&) override {
    return calibration;
  }
  // `n` runs of `job_name` on `gpu`, each a copy of `run`.
  void AddRuns(int n, history::RunBaseline run, const std::string& job_name,
               const std::string& gpu) {
    for (int i = 0; i < n; ++i) {
      run.job_name = job_name;
      run.gpu_model = gpu;
      run.job = absl::StrCat("previous-", runs.size());
      run.windows = 6;
      runs.push_back(run);
    }
  }
  std::vector<history::RunBaseline> runs;
  history::CalibrationRows calibration;
};

}  // namespace xpu::engine::testing

#endif  // XPU_ENGINE_DETECTORS_DETECTOR_TESTING_H_
