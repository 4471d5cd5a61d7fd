// job_series — the engine's per-job Prometheus series, tracked so that a
// job's series can be removed together: when a finished job has been gone
// longer than --metrics-retain-finished-s (Engine::TickWindow) or leaves the
// engine. A retired job's series are not re-created until ReviveJob (the
// same job id running again, e.g. an elastic restart).
//
// A series is addressed by (family, slot): the slot is what identifies it
// for its owner (e.g. job + rank + family labels), the labels are what
// Prometheus sees. When the labels of a slot change (a rank's GPU UUID
// became known after its first export), the old series is removed, so that a
// rank never has two series of one figure.
//
// Every removal of a tracked series must go through Remove/RetireJob.
//
// Thread-safety: all methods are thread-safe (one mutex; prometheus-cpp's
// families lock themselves).
#ifndef XPU_ENGINE_STATE_JOB_SERIES_H_
#define XPU_ENGINE_STATE_JOB_SERIES_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "prometheus/family.h"
#include "prometheus/labels.h"
#include "xpu/v1/common.pb.h"

namespace xpu::engine {

// Label names.
inline constexpr char kJobLabel[] = "xpu_job";
inline constexpr char kJobNameLabel[] = "xpu_job_name";
inline constexpr char kRankLabel[] = "rank";
// dcgm-exporter's names for the host and the GPU of a series.
inline constexpr char kHostLabel[] = "Hostname";
inline constexpr char kGpuLabel[] = "gpu";
inline constexpr char kUuidLabel[] = "UUID";
inline constexpr char kModelLabel[] = "modelName";

// The labels of every series of a job.
prometheus::Labels JobLabels(const std::string& job, const std::string& job_name);
// A rank's series: the job's labels, `rank` (the rank, or the process key
// of a rank-less process) and, when known, Hostname, gpu (the GPU index the
// daemon derived, else the CUDA device ordinal), UUID and modelName.
prometheus::Labels RankLabels(const prometheus::Labels& job_labels, const std::string& rank,
                              const xpu::v1::ProcessIdentity& id);

class JobSeries {
 public:
  // The series of `job` in `family` at `slot` with `labels` (created with
  // `args`, e.g. histogram buckets), or nullptr when the job is retired.
  template <class T, class... Args>
  T* Get(const std::string& job, prometheus::Family<T>& family, const std::string& slot,
         const prometheus::Labels& labels, Args&&... args) {
    std::lock_guard<std::mutex> l(mu_);
    if (retired_.count(job)) return nullptr;
    Entry& e = series_[job][{&family, slot}];
    const uint64_t hash = LabelsHash(labels);
    if (e.metric != nullptr && e.labels_hash == hash) return static_cast<T*>(e.metric);
    if (e.metric != nullptr) e.Remove();
    T* m = &family.Add(labels, std::forward<Args>(args)...);
    e.metric = m;
    e.family = &family;
    e.labels_hash = hash;
    e.remove = [](void* f, void* metric) {
      static_cast<prometheus::Family<T>*>(f)->Remove(static_cast<T*>(metric));
    };
    return m;
  }
  // Same, with the labels as the slot.
  template <class T, class... Args>
  T* Get(const std::string& job, prometheus::Family<T>& family, const prometheus::Labels& labels,
         Args&&... args) {
    return Get(job, family, SlotOf(labels), labels, std::forward<Args>(args)...);
  }

  template <class T>
  void Remove(const std::string& job, prometheus::Family<T>& family, const std::string& slot) {
    std::lock_guard<std::mutex> l(mu_);
    auto j = series_.find(job);
    if (j == series_.end()) return;
    auto it = j->second.find({&family, slot});
    if (it == j->second.end()) return;
    it->second.Remove();
    j->second.erase(it);
  }

  // Removes every series of the job in `family`.
  template <class T>
  void RemoveFamily(const std::string& job, prometheus::Family<T>& family) {
    std::lock_guard<std::mutex> l(mu_);
    auto j = series_.find(job);
    if (j == series_.end()) return;
    const void* f = &family;
    for (auto it = j->second.lower_bound({f, std::string()});
         it != j->second.end() && it->first.first == f;) {
      it->second.Remove();
      it = j->second.erase(it);
    }
  }

  // Removes every series of the job; later Gets return nullptr.
  void RetireJob(const std::string& job);
  // Gets create series of the job again.
  void ReviveJob(const std::string& job);
  bool Retired(const std::string& job) const;
  // Removes the job's series and forgets it (no longer retired either).
  void ForgetJob(const std::string& job);
  // Series currently held for the job.
  size_t Count(const std::string& job) const;

  static std::string SlotOf(const prometheus::Labels& labels);
  // 64-bit FNV-1a of the labels' names and values (a changed label set of
  // a slot is seen by its hash; the family holds the labels themselves).
  static uint64_t LabelsHash(const prometheus::Labels& labels);

 private:
  // A series held for a job: small, since a job of many ranks holds a few
  // per rank (the labels are not copied: the family keeps them).
  struct Entry {
    void* metric = nullptr;
    void* family = nullptr;
    uint64_t labels_hash = 0;
    void (*remove)(void* family, void* metric) = nullptr;
    void Remove() const {
      if (metric != nullptr) remove(family, metric);
    }
  };
  void RemoveAllLocked(const std::string& job);

  mutable std::mutex mu_;
  std::map<std::string, std::map<std::pair<const void*, std::string>, Entry>> series_;
  std::set<std::string> retired_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_JOB_SERIES_H_
