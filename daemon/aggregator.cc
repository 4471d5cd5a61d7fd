#include "daemon/aggregator.h"

#include <algorithm>

#include "xpu/formulas.h"

namespace xpu::daemon {
namespace {
// End of the window starting at `start`, saturating instead of wrapping for
// hostile timestamps near the end of the clock.
uint64_t WindowEnd(uint64_t start, uint64_t len) {
  return start > ~0ull - len ? ~0ull : start + len;
}
}  // namespace

Aggregator::Aggregator(uint64_t window_ns) : window_ns_(window_ns == 0 ? 1 : window_ns) {}

void Aggregator::Add(const xpu_record_v1& rec, const xpu_signature_v1* sig) {
  const uint64_t start = rec.start_ns - rec.start_ns % window_ns_;
  auto it = windows_.find(start);
  if (it == windows_.end()) {
    it = windows_.emplace(start, Window{}).first;
  }
  newest_start_ns_ = std::max(newest_start_ns_, rec.start_ns);
  Stats& s = it->second[rec.sig_id];
  const uint64_t dur = xpu_record_duration_ns(&rec);
  // A plugin record times an occurrence the interposer already recorded
  // (same sig_id and seq, record.h): it adds timing, not an occurrence.
  if ((rec.flags & XPU_REC_PLUGIN) == 0) {
    ++s.count;
    s.total_ns += dur;
  }
  if (rec.flags & XPU_REC_TIMED) {
    s.timed_min_ns = s.timed_count == 0 ? dur : std::min(s.timed_min_ns, dur);
    s.timed_max_ns = std::max(s.timed_max_ns, dur);
    ++s.timed_count;
    s.timed_total_ns += dur;
    s.timed_sumsq += static_cast<double>(dur) * static_cast<double>(dur);
    if (sig != nullptr) {
      s.flops += xpu_sig_flops(sig);
      s.bytes += static_cast<double>(xpu_sig_bytes(sig));
    }
  }
  if (rec.flags & XPU_REC_ISSUE_LAT_VALID) {
    ++s.lat_count;
    s.lat_sum += rec.issue_latency_ns;
  }
}

void Aggregator::Emit(uint64_t start, uint64_t window_ns, const Window& w,
                      xpu::v1::WindowSummary* out) {
  out->set_window_start_ns(start);
  out->set_window_end_ns(WindowEnd(start, window_ns));
  for (const auto& [sig_id, s] : w) {
    xpu::v1::SignatureStats* p = out->add_stats();
    p->set_sig_id(sig_id);
    p->set_count(s.count);
    p->set_total_ns(s.total_ns);
    p->set_timed_count(s.timed_count);
    p->set_timed_total_ns(s.timed_total_ns);
    p->set_timed_min_ns(s.timed_min_ns);
    p->set_timed_max_ns(s.timed_max_ns);
    p->set_timed_sumsq_ns2(s.timed_sumsq);
    p->set_flops(s.flops);
    p->set_bytes(s.bytes);
    p->set_issue_latency_count(s.lat_count);
    p->set_issue_latency_sum_ns(s.lat_sum);
  }
}

void Aggregator::TakeCompleted(bool force, std::vector<xpu::v1::WindowSummary>* out) {
  while (!windows_.empty()) {
    auto it = windows_.begin();
    const uint64_t end = WindowEnd(it->first, window_ns_);
    // Complete once the newest record is a full window past this one's end.
    const bool complete = newest_start_ns_ >= end && newest_start_ns_ - end >= window_ns_;
    if (!force && !complete && windows_.size() <= kMaxOpenWindows) break;
    out->emplace_back();
    Emit(it->first, window_ns_, it->second, &out->back());
    windows_.erase(it);
  }
}

}  // namespace xpu::daemon
