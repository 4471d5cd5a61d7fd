// hook/tracing/hang_watch.cc — see hang_watch.h. Completion thread only.
#include "hook/tracing/hang_watch.h"

#include <cstdlib>
#include <cstring>

#include "xpu/formulas.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kSecond = 1000000000ull;

bool IsSequencedCollective(uint32_t kind) {
  // Send/Recv carry per-peer sequences (comm_registry.h), not the
  // communicator's collective sequence.
  return kind >= XPU_OP_ALLREDUCE && kind <= XPU_OP_SCATTER;
}

double EnvDouble(const char* name, double def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  double d = strtod(v, &end);
  if (end == v || *end != '\0' || !(d >= 0) || d > 1e9) return def;
  return d;
}

template <typename T>
void Store(T* field, T value) {
  __atomic_store_n(field, value, __ATOMIC_RELAXED);
}

}  // namespace

HangWatchOptions HangWatchOptionsFromEnv() {
  HangWatchOptions o;
  o.floor_ns = static_cast<uint64_t>(EnvDouble("XPU_HANG_FLOOR_S", 5.0) * 1e9);
  o.multiple = EnvDouble("XPU_HANG_MULTIPLE", 4.0);
  double decay = EnvDouble("XPU_HANG_DECAY_S", 300.0);
  o.decay_ns = decay > 0 ? static_cast<uint64_t>(decay * 1e9) : 300 * kSecond;
  return o;
}

void HangWatch::Init(xpu_ring_progress_v1* progress, const xpu_signature_v1* sigs,
                     uint32_t sig_capacity, const HangWatchOptions& options) {
  options_ = options;
  sigs_ = sigs;
  sig_capacity_ = sigs != nullptr ? sig_capacity : 0;
  stats_.reset(new SigStat[sig_capacity_ + 1]());
  progress_ = progress;
  if (progress_ == nullptr) return;
  Store(&progress_->ncomms, XPU_RING_PROGRESS_COMMS);
  __atomic_store_n(&progress_->magic, XPU_RING_PROGRESS_MAGIC, __ATOMIC_RELEASE);
}

void HangWatch::BeginWrite(uint32_t* gen) {
  uint32_t g = __atomic_load_n(gen, __ATOMIC_RELAXED);
  __atomic_store_n(gen, g | 1u, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

void HangWatch::EndWrite(uint32_t* gen) {
  uint32_t g = __atomic_load_n(gen, __ATOMIC_RELAXED);
  __atomic_store_n(gen, (g | 1u) + 1u, __ATOMIC_RELEASE);
}

const xpu_signature_v1* HangWatch::Sig(uint32_t sig_id) const {
  if (sig_id == 0 || sig_id >= sig_capacity_) return nullptr;
  const xpu_signature_v1* s = &sigs_[sig_id];
  // Published signatures carry commit == id (ring.h).
  if (__atomic_load_n(&s->commit, __ATOMIC_ACQUIRE) != sig_id) return nullptr;
  return s;
}

xpu_comm_progress_v1* HangWatch::Comm(uint64_t comm_id, const xpu_signature_v1& sig) {
  if (comm_id == 0) return nullptr;
  for (uint32_t i = 0; i < XPU_RING_PROGRESS_COMMS; ++i) {
    xpu_comm_progress_v1* c = &progress_->comms[i];
    if (c->comm_id == comm_id) return c;
    if (c->comm_id == 0) {
      BeginWrite(&c->gen);
      Store(&c->comm_rank, sig.comm_rank);
      Store(&c->comm_nranks, sig.comm_nranks);
      Store(&c->comm_id, comm_id);
      EndWrite(&c->gen);
      return c;
    }
  }
  return nullptr;  // more communicators than entries: the rest go unwatched
}

uint64_t HangWatch::ThresholdNs(uint32_t sig_id, uint64_t now_ns) const {
  uint64_t t = options_.floor_ns;
  if (sig_id < sig_capacity_ && stats_) {
    const SigStat& st = stats_[sig_id];
    uint64_t m = st.max_ns;
    // Halve the remembered maximum per elapsed decay period.
    if (options_.decay_ns > 0 && now_ns > st.max_at_ns) {
      uint64_t halvings = (now_ns - st.max_at_ns) / options_.decay_ns;
      m = halvings >= 64 ? 0 : m >> halvings;
    }
    double scaled = static_cast<double>(m) * options_.multiple;
    if (scaled > static_cast<double>(t)) t = static_cast<uint64_t>(scaled);
  }
  return t;
}

void HangWatch::OnIssued(const WatchedOp& op, uint64_t now_ns) {
  if (!enabled()) return;
  const xpu_signature_v1* s = Sig(op.sig_id);
  if (s == nullptr || !IsSequencedCollective(s->kind) || op.seq == 0) return;
  xpu_comm_progress_v1* c = Comm(s->comm_id, *s);
  if (c == nullptr) return;
  BeginWrite(&c->gen);
  if (op.seq > c->last_issued_seq) Store(&c->last_issued_seq, op.seq);
  if (c->pending_seq == 0) {
    Store(&c->pending_seq, op.seq);
    Store(&c->pending_sig_id, op.sig_id);
    Store(&c->pending_kind, s->kind);
    Store(&c->pending_bytes, s->count * xpu_dtype_size(s->dtype));
    Store(&c->pending_since_ns, op.launch_ns);
  }
  Store(&c->updated_ns, now_ns);
  EndWrite(&c->gen);
}

void HangWatch::OnCompleted(const WatchedOp& op, uint64_t duration_ns, uint64_t now_ns) {
  if (!enabled()) return;
  if (op.sig_id < sig_capacity_) {
    // An op that outlived its threshold was a stall (a stopped peer, a
    // debugger attached), not a sample of how long it takes: it raises the
    // remembered maximum only to the threshold it broke, so that one hang
    // does not hide the next for the decay period, while an op that is
    // always that long still earns its threshold in a few occurrences.
    const uint64_t limit = ThresholdNs(op.sig_id, now_ns);
    if (duration_ns > limit) duration_ns = limit;
    SigStat& st = stats_[op.sig_id];
    uint64_t current = st.max_ns;
    if (options_.decay_ns > 0 && now_ns > st.max_at_ns &&
        now_ns - st.max_at_ns >= options_.decay_ns) {
      current >>= 1;  // a decayed maximum is replaced by fresher evidence
    }
    if (duration_ns >= current) {
      st.max_ns = duration_ns;
      st.max_at_ns = now_ns;
    }
  }
  if (suspect_sig_ != 0 && op.sig_id == suspect_sig_ && op.seq == suspect_seq_ &&
      op.launch_ns == suspect_launch_ns_) {
    // The overdue op finished after all: a slow op, not a hang.
    BeginWrite(&progress_->suspect_gen);
    Store(&progress_->suspect_sig_id, 0u);
    EndWrite(&progress_->suspect_gen);
    suspect_sig_ = 0;
  }
  const xpu_signature_v1* s = Sig(op.sig_id);
  if (s == nullptr || !IsSequencedCollective(s->kind) || op.seq == 0) return;
  xpu_comm_progress_v1* c = Comm(s->comm_id, *s);
  if (c == nullptr) return;
  BeginWrite(&c->gen);
  if (op.seq > c->last_completed_seq) Store(&c->last_completed_seq, op.seq);
  if (c->last_completed_seq >= c->last_issued_seq) {
    Store(&c->pending_seq, 0u);
    Store(&c->pending_sig_id, 0u);
    Store(&c->pending_kind, uint16_t{0});
    Store(&c->pending_bytes, uint64_t{0});
    Store(&c->pending_since_ns, uint64_t{0});
    Store(&c->flags, uint16_t{0});
  } else if (c->pending_seq <= op.seq) {
    // The next outstanding one is filled in by Check() from the stream heads.
    Store(&c->pending_seq, op.seq + 1);
    Store(&c->pending_sig_id, 0u);
  }
  Store(&c->updated_ns, now_ns);
  EndWrite(&c->gen);
}

void HangWatch::Check(const WatchedOp* oldest, uint32_t n, uint64_t now_ns) {
  if (!enabled()) return;
  // 1. Pending fields of each communicator from the heads of the streams.
  for (uint32_t i = 0; i < n; ++i) {
    const xpu_signature_v1* s = Sig(oldest[i].sig_id);
    if (s == nullptr || !IsSequencedCollective(s->kind)) continue;
    xpu_comm_progress_v1* c = Comm(s->comm_id, *s);
    if (c == nullptr) continue;
    if (c->pending_sig_id == oldest[i].sig_id && c->pending_seq == oldest[i].seq) continue;
    if (c->pending_seq != 0 && oldest[i].seq > c->pending_seq && c->pending_sig_id != 0) continue;
    BeginWrite(&c->gen);
    Store(&c->pending_seq, oldest[i].seq);
    Store(&c->pending_sig_id, oldest[i].sig_id);
    Store(&c->pending_kind, s->kind);
    Store(&c->pending_bytes, s->count * xpu_dtype_size(s->dtype));
    Store(&c->pending_since_ns, oldest[i].launch_ns);
    Store(&c->updated_ns, now_ns);
    EndWrite(&c->gen);
  }
  // 2. The most overdue op (age beyond its threshold, largest age first).
  const WatchedOp* worst = nullptr;
  uint64_t worst_age = 0, worst_threshold = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (oldest[i].launch_ns == 0 || now_ns <= oldest[i].launch_ns) continue;
    uint64_t age = now_ns - oldest[i].launch_ns;
    uint64_t threshold = ThresholdNs(oldest[i].sig_id, now_ns);
    if (age > threshold && age > worst_age) {
      worst = &oldest[i];
      worst_age = age;
      worst_threshold = threshold;
    }
  }
  // 3. Flag the communicators whose outstanding op is overdue.
  for (uint32_t i = 0; i < XPU_RING_PROGRESS_COMMS; ++i) {
    xpu_comm_progress_v1* c = &progress_->comms[i];
    if (c->comm_id == 0) break;
    uint16_t want = 0;
    if (c->pending_seq != 0 && c->pending_since_ns != 0 && now_ns > c->pending_since_ns &&
        now_ns - c->pending_since_ns > ThresholdNs(c->pending_sig_id, now_ns)) {
      want = XPU_PROGRESS_SUSPECT;
    }
    if (c->flags != want) {
      BeginWrite(&c->gen);
      Store(&c->flags, want);
      EndWrite(&c->gen);
    }
  }
  if (worst == nullptr) {
    if (suspect_sig_ != 0) {
      BeginWrite(&progress_->suspect_gen);
      Store(&progress_->suspect_sig_id, 0u);
      EndWrite(&progress_->suspect_gen);
      suspect_sig_ = 0;
    }
    return;
  }
  if (suspect_sig_ == worst->sig_id && suspect_seq_ == worst->seq &&
      suspect_launch_ns_ == worst->launch_ns) {
    return;  // already raised
  }
  const xpu_signature_v1* s = Sig(worst->sig_id);
  BeginWrite(&progress_->suspect_gen);
  Store(&progress_->suspect_sig_id, worst->sig_id);
  Store(&progress_->suspect_seq, worst->seq);
  Store(&progress_->suspect_since_ns, worst->launch_ns);
  Store(&progress_->suspect_detected_ns, now_ns);
  Store(&progress_->suspect_threshold_ns, worst_threshold);
  Store(&progress_->suspect_kind, s != nullptr ? s->kind : uint16_t{0});
  Store(&progress_->suspect_stream, worst->stream);
  Store(&progress_->suspect_comm_id, s != nullptr ? s->comm_id : uint64_t{0});
  Store(&progress_->suspects_total, progress_->suspects_total + 1);
  EndWrite(&progress_->suspect_gen);
  suspect_sig_ = worst->sig_id;
  suspect_seq_ = worst->seq;
  suspect_launch_ns_ = worst->launch_ns;
}

}  // namespace xpu::hook
