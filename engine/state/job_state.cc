#include "engine/state/job_state.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/wire/record_codec.h"
#include "xpu/formulas.h"
#include "xpu/ring.h"

namespace xpu::engine {
namespace {
constexpr size_t kMaxWindows = 64;
constexpr size_t kMaxOpenHostIntervals = 256;
}  // namespace

std::string_view LivenessName(Liveness l) {
  switch (l) {
    case Liveness::kAlive:
      return "alive";
    case Liveness::kSilent:
      return "silent";
    case Liveness::kExited:
      return "exited";
  }
  return "unknown";
}

void RecordRing::DropBefore(uint64_t p) {
  const uint64_t before = p / kChunkRecords;  // chunks below it hold no position >= p
  while (head_ < sealed_.size() && first_chunk_ < before) {
    sealed_bytes_ -= sealed_[head_].size;
    sealed_[head_++] = Sealed{};
    ++first_chunk_;
  }
  if (head_ == sealed_.size()) {
    sealed_.clear();
    head_ = 0;
  } else if (head_ * 2 >= sealed_.size()) {
    sealed_.erase(sealed_.begin(), sealed_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  if (sealed_.capacity() > 2 * sealed_.size() + 8) sealed_.shrink_to_fit();
  if (p >= written_) open_.reset();  // nothing held: the next record takes a new chunk
}

void RecordRing::Seal() {
  thread_local std::string blob;
  blob.clear();
  wire::EncodeCompactRecords(open_->data(), kChunkRecords, &blob);
  if (sealed_.size() == head_) first_chunk_ = written_ / kChunkRecords - 1;
  Sealed s;
  s.data.reset(new char[blob.size()]);
  std::memcpy(s.data.get(), blob.data(), blob.size());
  s.size = static_cast<uint32_t>(blob.size());
  sealed_bytes_ += s.size;
  sealed_.push_back(std::move(s));
}

const xpu_record_v1* RecordRing::Unpack(uint64_t chunk, std::vector<xpu_record_v1>* out) const {
  const Sealed& s = sealed_[head_ + (chunk - first_chunk_)];
  out->clear();
  if (!wire::DecodeCompactRecords(std::string_view(s.data.get(), s.size), out).ok() ||
      out->size() != kChunkRecords) {
    out->assign(kChunkRecords, xpu_record_v1{});  // not of this ring's making: never happens
  }
  return out->data();
}

void RecordRing::Append(const xpu_record_v1* r, size_t n) {
  if (n == 0) return;
  if (n >= capacity_) {  // only the newest `capacity_` survive anyway
    r += n - capacity_;
    written_ += n - capacity_;
    n = capacity_;
    held_ = 0;
    DropBefore(written_);
  }
  held_ = std::min(capacity_, held_ + n);
  while (n > 0) {
    if (!open_) open_ = std::make_unique<Chunk>();
    const size_t off = static_cast<size_t>(written_ % kChunkRecords);
    const size_t m = std::min(n, kChunkRecords - off);
    std::memcpy(open_->data() + off, r, m * sizeof(*r));
    written_ += m;
    r += m;
    n -= m;
    if (written_ % kChunkRecords == 0) {
      Seal();
      open_.reset();
    }
  }
  DropBefore(written_ - held_);
}

void RecordRing::Trim(size_t keep) {
  held_ = std::min({held_, keep, capacity_});
  DropBefore(written_ - held_);
}

std::vector<xpu_record_v1> RecordRing::Last(size_t n) const {
  n = std::min(n, held_);
  std::vector<xpu_record_v1> out;
  out.reserve(n);
  ForEachLast(n, [&out](const xpu_record_v1& r) { out.push_back(r); });
  return out;
}

void KindCounts::Add(uint16_t kind) {
  if (kind == XPU_OP_KERNEL || kind == XPU_OP_GRAPH_LAUNCH) {
    ++kernel;
  } else if (kind == XPU_OP_GEMM) {
    ++gemm;
  } else if (xpu_op_is_collective(kind)) {
    ++collective;
  } else if (kind == XPU_OP_MEMCPY) {
    ++memcpy;
  } else if (kind >= XPU_OP_SYNC_STREAM && kind <= XPU_OP_SYNC_EVENT) {
    ++sync;
  } else if (xpu_op_is_host(kind)) {
    ++host;
  } else {
    ++other;
  }
}

void KindCounts::Merge(const KindCounts& o) {
  kernel += o.kernel;
  gemm += o.gemm;
  collective += o.collective;
  memcpy += o.memcpy;
  sync += o.sync;
  host += o.host;
  other += o.other;
}

bool IsProgressRecord(uint16_t kind, uint16_t flags) {
  if (flags & XPU_REC_INCOMPLETE) return false;
  if (kind == XPU_OP_PY_GC || kind == XPU_OP_PY_CALLSITE) return false;
  // A host interval that opens (BEGIN) is work starting, not done.
  if ((flags & XPU_REC_HOST) && (flags & XPU_REC_BEGIN)) return false;
  return kind != XPU_OP_NONE;
}

JobState::JobState(std::string job, std::string job_name, size_t ring_capacity, uint64_t now_ns)
    : job_(std::move(job)),
      job_name_(std::move(job_name)),
      ring_capacity_(ring_capacity),
      first_seen_ns_(now_ns),
      last_seen_ns_(now_ns),
      window_start_ns_(now_ns) {}

std::string_view LossReasonName(int reason) {
  static constexpr std::string_view kNames[kLossReasons] = {
      "ring_full",           "ring_corrupt",   "ring_lapped",       "ring_abandoned",
      "ring_resync",         "daemon_restart", "daemon_buffer",     "engine_rejected",
      "undefined_signature", "ring_truncated", "record_undecodable"};
  return reason >= 0 && reason < kLossReasons ? kNames[reason] : "unknown";
}

std::string JobState::ProcessKey(const xpu::v1::ProcessIdentity& id) {
  return id.rank() >= 0 ? absl::StrCat("rank:", id.rank())
                        : absl::StrCat("pid:", id.pid(), "@", id.host());
}

void JobState::SetSeed(JobSeed seed) {
  seed_ = std::move(seed);
  SetOwnerOnce(seed_.owner_uid);
}

void JobState::SetOwnerOnce(int64_t uid) {
  int64_t unknown = -1;
  if (uid >= 0) owner_uid_.compare_exchange_strong(unknown, uid, std::memory_order_acq_rel);
}

uint64_t JobState::Dropped() const {
  uint64_t total = 0;
  for (const auto& [k, p] : processes_) total = std::max(total, total + p->dropped);
  return total;
}

std::array<uint64_t, kLossReasons> JobState::Lost() const {
  std::array<uint64_t, kLossReasons> total{};
  for (const auto& [k, p] : processes_) {
    for (int r = 0; r < kLossReasons; ++r) total[r] = std::max(total[r], total[r] + p->lost[r]);
  }
  return total;
}

void ProcessState::NoteBatch(uint64_t now_ns) {
  // A process split over several messages of one batch: one gap.
  if (last_seen_ns != 0 && now_ns >= last_seen_ns + 1000000ull) {
    batch_gaps_ms[batch_gap_next] =
        static_cast<uint32_t>(std::min<uint64_t>((now_ns - last_seen_ns) / 1000000ull, UINT32_MAX));
    batch_gap_next = static_cast<uint8_t>((batch_gap_next + 1) % batch_gaps_ms.size());
  }
  last_seen_ns = now_ns;
}

uint64_t ProcessState::SeenUntilNs(uint64_t now_ns) const {
  if (stream_open == nullptr || !stream_open->load(std::memory_order_relaxed)) return now_ns;
  // The median gap: the daemon's own pace, not the stalls of an ingest
  // that fell behind (those would widen the slack that hides them).
  std::array<uint32_t, 8> gaps;
  size_t n = 0;
  for (uint32_t g : batch_gaps_ms) {
    if (g != 0) gaps[n++] = g;
  }
  uint64_t gap_ms = 0;
  if (n > 0) {
    std::nth_element(gaps.begin(), gaps.begin() + n / 2, gaps.begin() + n);
    gap_ms = gaps[n / 2];
  }
  const uint64_t slack = std::max<uint64_t>(kSeenSlackMinNs, 2 * gap_ms * 1000000ull);
  return std::min(now_ns, last_seen_ns + slack);
}

ProcessState& JobState::GetOrCreateProcess(const xpu::v1::ProcessIdentity& id,
                                           const std::string& daemon_id, uint64_t now_ns) {
  const std::string key = ProcessKey(id);
  auto& slot = processes_[key];
  if (!slot) {
    slot = std::make_unique<ProcessState>(key, ring_capacity_);
    slot->sigs = SignatureTable(sig_pool_);  // names held once per job
    slot->first_seen_ns = now_ns;
    slot->identity = id;
    SetOwnerOnce(id.uid());
    // The same process, recorded before this engine restarted: its counts
    // go on, and records it had already are not taken twice.
    auto seed = seed_.ranks.find(key);
    if (seed != seed_.ranks.end()) {
      const RankSeed& r = seed->second;
      if (r.pid == id.pid() && r.host == id.host() && r.start_ticks == id.start_time_ticks()) {
        slot->records = r.records;
        slot->next_position = r.next_position;
        slot->unknown_sig = r.undefined_signature;
        records_ += r.records;
      }
      seed_.ranks.erase(seed);
    }
  } else if (slot->identity.pid() != id.pid() || slot->identity.host() != id.host()) {
    // Restarted rank: signature ids and ring positions belong to the old
    // process.
    slot->sigs.Clear();
    slot->window_gemm.clear();
    slot->open_host.clear();
    slot->identity = id;
    slot->liveness = Liveness::kAlive;
    slot->next_position = 0;
  }
  // The hook publishes the GPU model after its first traced op, so it often
  // arrives in a later batch than the identity; once known it stays (an
  // exited process's last batches no longer carry it).
  if (slot->identity.gpu_model().empty() && !id.gpu_model().empty())
    slot->identity.set_gpu_model(id.gpu_model());
  slot->daemon_id = daemon_id;
  slot->NoteBatch(now_ns);
  if (job_name_.empty() && !id.job_name().empty()) job_name_ = id.job_name();
  last_seen_ns_ = std::max(last_seen_ns_, now_ns);
  return *slot;
}

void JobState::NoteSignature(const ProcessState& p, const SignatureInfo& s) {
  if (!s.collective || s.abi.comm_id == 0) return;
  Communicator& c = comms_[s.abi.comm_id];
  c.comm_id = s.abi.comm_id;
  c.nranks = s.abi.comm_nranks;
  if (s.abi.comm_rank >= 0 && c.members.size() < 65536) {
    c.members[s.abi.comm_rank] = p.identity.rank();
  }
}

void JobState::ApplyRecords(ProcessState& p, const xpu_record_v1* r, size_t n, uint64_t now_ns) {
  if (n == 0) return;
  const size_t before = p.ring.bytes();
  p.ring.Append(r, n);
  ring_allocated_bytes_ += p.ring.bytes();
  ring_allocated_bytes_ -= std::min<uint64_t>(ring_allocated_bytes_, before);
  p.records += n;
  p.window_records += n;
  records_ += n;
  p.last_record_rx_ns = now_ns;
  if (p.liveness == Liveness::kSilent) p.liveness = Liveness::kAlive;
  const int32_t rank = p.identity.rank();
  uint64_t last_end = p.last_record_ns;
  // Records of a process known before this window began that ended before
  // it (with the slack) came after their own window's analysis.
  const uint64_t late_before =
      p.first_seen_ns < window_start_ns_ && window_start_ns_ > kLateRecordSlackNs
          ? window_start_ns_ - kLateRecordSlackNs
          : 0;
  for (size_t i = 0; i < n; ++i) {
    const xpu_record_v1& rec = r[i];
    const SignatureInfo* s = p.sigs.Find(rec.sig_id);
    if (s == nullptr) continue;  // the decoder filtered these; stay defensive
    const uint16_t kind = s->abi.kind;
    p.window_kinds.Add(kind);
    const uint64_t dur = xpu_record_duration_ns(&rec);
    window_late_records_ += rec.start_ns + dur < late_before;
    if (kind == XPU_OP_STEP && p.first_step_rx_ns == 0) {
      p.first_step_rx_ns = now_ns;
      p.progress_gap_unread_ns = 0;  // start-up gaps are not the job's pace
    }
    if (IsProgressRecord(kind, rec.flags)) {
      ++progress_records_;
      p.last_progress_rx_ns = now_ns;
      const uint64_t end = rec.start_ns + dur;
      if (p.last_progress_end_ns != 0 && end > p.last_progress_end_ns) {
        p.progress_gap_unread_ns = std::max(p.progress_gap_unread_ns, end - p.last_progress_end_ns);
      }
      p.last_progress_end_ns = std::max(p.last_progress_end_ns, end);
    }
    last_end = std::max(last_end, rec.start_ns + dur);
    if ((rec.flags & XPU_REC_HOST) && (rec.flags & (XPU_REC_BEGIN | XPU_REC_END))) {
      if (rec.flags & XPU_REC_BEGIN) {
        if (p.open_host.size() < kMaxOpenHostIntervals || p.open_host.count(rec.sig_id))
          p.open_host[rec.sig_id] = rec.start_ns;
      } else {
        p.open_host.erase(rec.sig_id);
      }
    }
    if (!(rec.flags & XPU_REC_TIMED)) {
      if (s->collective) collectives_.Add(*s, rank, rec);
      continue;
    }
    if (kind == XPU_OP_GEMM) {
      if (rec.sig_id >= p.window_gemm.size()) p.window_gemm.resize(rec.sig_id + 1);
      GemmAccum& g = p.window_gemm[rec.sig_id];
      ++g.count;
      g.total_ns += dur;
      g.flops += s->flops;
    } else if (s->collective) {
      collectives_.Add(*s, rank, rec);
    }
  }
  p.last_record_ns = last_end;
}

void JobState::ApplyCounters(ProcessState& p, const xpu::v1::ProcessBatch& pb, uint64_t now_ns) {
  if (pb.has_counters()) {
    p.counters = pb.counters();
    const xpu::v1::ProcessCounters& c = p.counters;
    p.lost[kLossRingFull] = c.hook_size() > XPU_CNT_DROPPED_FULL ? c.hook(XPU_CNT_DROPPED_FULL) : 0;
    p.lost[kLossRingCorrupt] = c.records_corrupt();
    p.lost[kLossRingLapped] = c.records_lapped();
    p.lost[kLossRingAbandoned] = c.records_abandoned();
    p.lost[kLossRingResync] = c.records_resync();
    p.lost[kLossDaemonRestart] = c.records_restart();
    p.lost[kLossDaemonBuffer] = c.records_dropped_daemon();
    p.lost[kLossEngineRejected] = c.records_rejected();
    p.lost[kLossRingTruncated] = c.records_truncated();
    p.hang_suspect = c.has_progress() && c.progress().suspect();
    p.hang_suspect_since_ns = p.hang_suspect ? c.progress().suspect_since_ns() : 0;
    p.oldest_pending_ns = 0;
    for (const auto& cp : c.progress().comms()) {
      if (cp.pending_seq() != 0 && cp.pending_since_ns() != 0 &&
          (p.oldest_pending_ns == 0 || cp.pending_since_ns() < p.oldest_pending_ns)) {
        p.oldest_pending_ns = cp.pending_since_ns();
      }
    }
  }
  p.lost[kLossUndefinedSignature] = p.unknown_sig;
  // Counts from other processes: a sum that could wrap saturates instead.
  uint64_t total = 0;
  for (uint64_t v : p.lost) total = total + v < total ? UINT64_MAX : total + v;
  p.dropped = total;
  if (pb.exited()) p.liveness = Liveness::kExited;
}

WindowSummaryRow JobState::CloseWindow(uint64_t now_ns) {
  WindowSummaryRow row;
  row.job = job_;
  row.window_start_ns = window_start_ns_;
  row.window_end_ns = now_ns;
  row.late_records = window_late_records_;
  late_records_ += window_late_records_;
  window_late_records_ = 0;
  std::map<std::string, GemmWindowRow> gemm;
  for (auto& [key, p] : processes_) {
    row.records += p->window_records;
    row.kinds.Merge(p->window_kinds);
    for (size_t id = 0; id < p->window_gemm.size(); ++id) {
      const GemmAccum& g = p->window_gemm[id];
      if (g.count == 0) continue;
      const SignatureInfo* s = p->sigs.Find(static_cast<uint32_t>(id));
      if (s == nullptr) continue;
      // Aggregated across ranks by shape, the unit analyses compare.
      std::string name =
          absl::StrCat(s->name.empty() ? "gemm" : s->name, " ", s->abi.m, "x", s->abi.n, "x",
                       s->abi.k, "x", std::max(1u, s->abi.batch), " dt", s->abi.dtype);
      GemmWindowRow& r = gemm[name];
      r.signature = name;
      r.count += g.count;
      r.total_ns += g.total_ns;
      r.flops += g.flops;
    }
    p->window_records = 0;
    p->window_kinds = KindCounts{};
    std::fill(p->window_gemm.begin(), p->window_gemm.end(), GemmAccum{});
  }
  for (auto& [name, r] : gemm) row.gemm.push_back(std::move(r));
  for (auto& [kind, bw] : collectives_.TakeCompleted()) {
    row.collectives.push_back(CollectiveWindowRow{OpKindName(kind), bw});
  }
  window_start_ns_ = now_ns;
  windows_.push_back(row);
  if (windows_.size() > kMaxWindows) windows_.pop_front();
  return row;
}

void JobState::UpdateLiveness(uint64_t now_ns, uint64_t silent_after_ns) {
  for (auto& [key, p] : processes_) {
    if (p->liveness == Liveness::kExited) continue;
    // Silent as far as the engine has seen it: a process whose batches wait
    // in an ingest backlog is not silent.
    const uint64_t last = std::max(p->last_record_rx_ns, p->first_seen_ns);
    const uint64_t until = p->SeenUntilNs(now_ns);
    p->liveness =
        until > last && until - last > silent_after_ns ? Liveness::kSilent : Liveness::kAlive;
  }
}

const ProcessState* JobState::PaceProcess() const {
  const ProcessState* pace = nullptr;
  for (const auto& [key, p] : processes_) {
    if (p->ring.written() == 0) continue;
    if (pace == nullptr ||
        (p->identity.rank() >= 0 &&
         (pace->identity.rank() < 0 || p->identity.rank() < pace->identity.rank())))
      pace = p.get();
  }
  return pace;
}

void JobState::TrimRings(size_t keep, size_t pace_keep) {
  const ProcessState* pace = PaceProcess();
  ring_allocated_bytes_ = 0;
  for (auto& [key, p] : processes_) {
    p->ring.Trim(p.get() == pace ? std::max(keep, pace_keep) : keep);
    ring_allocated_bytes_ += p->ring.bytes();
  }
}

std::string JobState::GpuModel() const {
  std::map<std::string, int> votes;
  for (const auto& [key, p] : processes_) {
    const std::string& m = p->identity.gpu_model();
    if (!m.empty()) votes[m]++;
  }
  std::string best;
  int n = 0;
  for (const auto& [m, v] : votes) {
    if (v > n) {
      best = m;
      n = v;
    }
  }
  return best;
}

uint64_t JobState::TickHeldWithin(uint64_t from_ns, uint64_t until_ns) const {
  uint64_t held = 0;
  for (const TickHold& h : tick_held_) {
    const uint64_t lo = std::max(from_ns, h.from_ns), hi = std::min(until_ns, h.until_ns);
    if (hi > lo) held += hi - lo;
  }
  return held;
}

size_t JobState::Alive() const {
  size_t n = 0;
  for (const auto& [k, p] : processes_) n += p->liveness == Liveness::kAlive;
  return n;
}

std::string_view JobState::StateName() const {
  size_t alive = 0, exited = 0;
  for (const auto& [k, p] : processes_) {
    alive += p->liveness == Liveness::kAlive;
    exited += p->liveness == Liveness::kExited;
  }
  if (!processes_.empty() && exited == processes_.size()) return "finished";
  if (alive > 0 || processes_.empty()) return "running";
  return "silent";
}

}  // namespace xpu::engine
