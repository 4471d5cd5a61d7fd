// hook/tracing/completion_tracker.cc — see completion_tracker.h. Completion
// thread only, except PushNotice (inline in the header).
#include "hook/tracing/completion_tracker.h"

#include <cmath>

#include "hook/core_api.h"
#include "hook/process/runtime.h"
#include "hook/tracing/record_fields.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kRetireEveryNs = 50ull * 1000 * 1000;

inline uint32_t KeyOf(uint32_t lane, uint16_t stream) { return ((lane << 16) | stream) + 1; }

inline uint32_t HashKey(uint32_t k) { return (k * 0x9e3779b1u) >> 7; }

// The op's calibration generation from its low 16 bits, relative to now.
inline uint32_t FullGeneration(uint32_t current, uint16_t low) {
  return current - static_cast<uint16_t>(static_cast<uint16_t>(current) - low);
}

// A collective the NCCL profiler plugin times: its completion is announced
// by the plugin (the interposer asked for no timing: XPU_REC_NOT_TIMED).
inline bool PluginTimed(const LaneEntry& e) { return (e.flags & XPU_REC_NOT_TIMED) != 0; }

}  // namespace

void CompletionTracker::Init(Runtime* rt, HangWatch* watch, uint32_t capacity,
                             uint64_t uncovered_ns) {
  rt_ = rt;
  watch_ = watch;
  uncovered_ns_ = uncovered_ns;
  capacity_ = capacity;
  nodes_.reset(new Node[capacity + 1]());
  free_head_ = 0;
  for (uint32_t i = capacity; i >= 1; --i) {
    nodes_[i].next = free_head_;
    free_head_ = i;
  }
  fifos_.reset(new Fifo[kMaxFifos]());
  map_.reset(new uint32_t[kMapSlots]());
  active_.reset(new uint32_t[kMaxFifos]());
  fifo_count_ = 1;  // index 0 unused
  notices_.Init(4096);
}

CompletionTracker::Fifo* CompletionTracker::FifoFor(uint32_t lane, uint16_t stream, bool create) {
  const uint32_t key = KeyOf(lane, stream);
  for (uint32_t probe = 0, i = HashKey(key) & (kMapSlots - 1); probe < kMapSlots;
       ++probe, i = (i + 1) & (kMapSlots - 1)) {
    const uint32_t idx = map_[i];
    if (idx == 0) {
      if (!create || fifo_count_ >= kMaxFifos) return nullptr;
      const uint32_t n = fifo_count_++;
      fifos_[n] = Fifo{};
      fifos_[n].key = key;
      map_[i] = n;
      return &fifos_[n];
    }
    if (fifos_[idx].key == key) return &fifos_[idx];
  }
  return nullptr;
}

void CompletionTracker::Activate(Fifo* f) {
  if (f->active_pos != 0) return;
  active_[active_count_] = static_cast<uint32_t>(f - fifos_.get());
  f->active_pos = ++active_count_;
}

void CompletionTracker::Append(Fifo* f, uint32_t node) {
  nodes_[node].next = 0;
  if (f->tail == 0) {
    f->head = node;
  } else {
    nodes_[f->tail].next = node;
  }
  f->tail = node;
  ++f->count;
  if (f->first_marker == 0 && nodes_[node].e.ev_end != 0) f->first_marker = node;
  Activate(f);
}

void CompletionTracker::FreeNode(uint32_t node) {
  Node& n = nodes_[node];
  rt_->pool.Give(n.e.ev_start);
  rt_->pool.Give(n.e.ev_end);
  n.e.ev_start = n.e.ev_end = 0;
  n.next = free_head_;
  free_head_ = node;
  --pending_;
}

void CompletionTracker::FindFirstMarker(Fifo* f) {
  f->first_marker = 0;
  for (uint32_t i = f->head; i != 0; i = nodes_[i].next) {
    if (nodes_[i].e.ev_end != 0) {
      f->first_marker = i;
      return;
    }
  }
}

int CompletionTracker::Drain(uint64_t now_ns) {
  int taken_total = 0;
  LaneEntry buf[256];
  const uint32_t lanes = rt_->lanes.lanes_used();
  for (uint32_t lane = 0; lane < lanes; ++lane) {
    for (;;) {
      const uint32_t n = rt_->lanes.Peek(lane, buf, 256);
      if (n == 0) break;
      uint32_t taken = 0;
      for (; taken < n; ++taken) {
        const LaneEntry& e = buf[taken];
        if (e.type == LaneEntry::kOp) {
          // Full: make room by retiring an op nothing will cover, else the
          // rest waits in the lane (which the producer may then find full).
          if (free_head_ == 0 && !EvictUncovered(now_ns)) break;
          Fifo* f = FifoFor(lane, e.stream, true);
          if (f == nullptr) {
            // More (thread, stream) pairs than FIFOs: on record, unobserved.
            Count(XPU_CNT_PENDING_FULL);
            Node tmp{e, 0};
            WriteRetired(tmp, now_ns, XPU_REC_UNTRACKED, true);
            rt_->pool.Give(e.ev_start);
            rt_->pool.Give(e.ev_end);
            continue;
          }
          const uint32_t node = free_head_;
          free_head_ = nodes_[node].next;
          nodes_[node].e = e;
          ++pending_;
          Append(f, node);
          if (watch_ != nullptr) {
            watch_->OnIssued(WatchedOp{e.sig_id, e.seq, e.launch_ns, e.stream}, e.launch_ns);
          }
        } else if (e.type == LaneEntry::kStreamSync) {
          Fifo* f = FifoFor(lane, e.stream, false);
          if (f != nullptr && f->tail != 0) CompleteThrough(f, f->tail, e.launch_ns, now_ns);
        } else if (e.type == LaneEntry::kAllSync) {
          for (uint32_t i = 0; i < active_count_;) {
            Fifo* f = &fifos_[active_[i]];
            const bool mine = ((f->key - 1) >> 16) == lane;
            const int8_t dev = nodes_[f->head].e.device;
            if (mine && (e.device < 0 || dev < 0 || dev == e.device)) {
              const uint32_t before = active_count_;
              CompleteThrough(f, f->tail, e.launch_ns, now_ns);
              if (active_count_ < before) continue;  // f left the list: same i again
            }
            ++i;
          }
        }
      }
      rt_->lanes.Consume(lane, taken);
      taken_total += static_cast<int>(taken);
      if (taken < n || n < 256) break;
    }
  }
  return taken_total;
}

void CompletionTracker::WriteCompleted(const Node& n, uint64_t done_ns, uint64_t now_ns) {
  const LaneEntry& e = n.e;
  xpu_record_v1 r{};
  r.sig_id = e.sig_id;
  r.seq = e.seq;
  r.stream = e.stream;
  uint16_t flags = e.flags;
  uint64_t duration_ns = 0;
  bool timed = false;
  if (e.ev_start != 0 && e.ev_end != 0) {
    const CudaApi& cuda = rt_->cuda;
    cudaEvent_t start = rt_->pool.Get(e.ev_start);
    uint64_t gpu_start = 0;
    float ms = 0;
    const uint32_t gen = FullGeneration(rt_->clock.Generation(e.device), e.calib_gen);
    if (rt_->clock.MapGpuToHost(e.device, gen, start, &gpu_start) &&
        cuda.event_elapsed(&ms, start, rt_->pool.Get(e.ev_end)) == cudaSuccess) {
      timed = true;
      duration_ns = ms > 0 ? static_cast<uint64_t>(std::llround(double{ms} * 1e6)) : 0;
      // What the event pair itself adds (event_overhead.h): half of it
      // before the op started, half after it ended.
      if (rt_->config.timing_correct) {
        const uint64_t oh = rt_->overhead.OverheadNs(e.device);
        gpu_start += oh / 2;
        duration_ns = duration_ns > oh ? duration_ns - oh : 0;
      }
      r.start_ns = gpu_start;
      r.issue_latency_ns =
          SaturateI32(static_cast<int64_t>(gpu_start) - static_cast<int64_t>(e.launch_ns));
      flags |= XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID;
    } else {
      Count(XPU_CNT_CUDA_ERROR);
    }
  }
  if (!timed) {
    // Completion evidence only: an upper bound from launch to the evidence.
    flags = static_cast<uint16_t>((flags & ~(XPU_REC_TIMED | XPU_REC_SAMPLED)) | XPU_REC_NOT_TIMED);
    r.start_ns = e.launch_ns;
    duration_ns = done_ns > e.launch_ns ? done_ns - e.launch_ns : 0;
  }
  r.duration = EncodeDuration(duration_ns, &flags);
  r.flags = flags;
  rt_->ring.Write(r);
  if (watch_ != nullptr) {
    watch_->OnCompleted(WatchedOp{e.sig_id, e.seq, e.launch_ns, e.stream},
                        done_ns > e.launch_ns ? done_ns - e.launch_ns : 0, now_ns);
  }
}

void CompletionTracker::WriteRetired(const Node& n, uint64_t now_ns, uint16_t extra_flags,
                                     bool zero_duration) {
  const LaneEntry& e = n.e;
  xpu_record_v1 r{};
  r.sig_id = e.sig_id;
  r.seq = e.seq;
  r.stream = e.stream;
  r.start_ns = e.launch_ns;
  uint16_t flags = static_cast<uint16_t>(
      ((e.flags | extra_flags) & ~(XPU_REC_TIMED | XPU_REC_SAMPLED | XPU_REC_ISSUE_LAT_VALID)) |
      XPU_REC_NOT_TIMED);
  const uint64_t age = now_ns > e.launch_ns ? now_ns - e.launch_ns : 0;
  r.duration = EncodeDuration(zero_duration ? 0 : age, &flags);
  r.flags = flags;
  rt_->ring.Write(r);
  if (watch_ != nullptr) {
    watch_->OnCompleted(WatchedOp{e.sig_id, e.seq, e.launch_ns, e.stream}, zero_duration ? 0 : age, now_ns);
  }
}

int CompletionTracker::CompleteThrough(Fifo* f, uint32_t last, uint64_t done_ns, uint64_t now_ns) {
  int n = 0;
  while (f->head != 0) {
    const uint32_t node = f->head;
    f->head = nodes_[node].next;
    if (f->head == 0) f->tail = 0;
    --f->count;
    WriteCompleted(nodes_[node], done_ns, now_ns);
    FreeNode(node);
    ++n;
    if (node == last) break;
  }
  FindFirstMarker(f);
  if (f->head == 0) Deactivate(f);
  return n;
}

void CompletionTracker::Deactivate(Fifo* f) {
  if (f->active_pos == 0) return;
  // Swap with the last entry of the active list.
  const uint32_t pos = f->active_pos - 1;
  const uint32_t moved = active_[--active_count_];
  active_[pos] = moved;
  fifos_[moved].active_pos = pos + 1;
  f->active_pos = 0;
}

bool CompletionTracker::TakeNotice(const PluginNotice& p, uint64_t now_ns, int* written) {
  for (uint32_t i = 0; i < active_count_; ++i) {
    Fifo* f = &fifos_[active_[i]];
    if (static_cast<uint16_t>((f->key - 1) & 0xffff) != p.stream) continue;
    for (uint32_t node = f->head; node != 0; node = nodes_[node].next) {
      const LaneEntry& e = nodes_[node].e;
      if (e.sig_id == p.sig_id && e.seq == p.seq) {
        *written += CompleteThrough(f, node, p.ns, now_ns);
        return true;
      }
    }
  }
  return false;
}

int CompletionTracker::Poll(uint64_t now_ns) {
  int written = 0;
  // Plugin notices: the op may not be drained yet (its kernel can finish
  // before the launching call returned), so unmatched ones are kept a while.
  for (uint32_t i = 0; i < deferred_count_;) {
    if (TakeNotice(deferred_[i], now_ns, &written) || now_ns - deferred_[i].ns > kNoticeKeepNs) {
      deferred_[i] = deferred_[--deferred_count_];
    } else {
      ++i;
    }
  }
  PluginNotice p;
  while (notices_.TryPop(&p)) {
    if (!TakeNotice(p, now_ns, &written) && deferred_count_ < kMaxDeferred) {
      deferred_[deferred_count_++] = p;
    }
  }
  // Markers: the first pending marker of each FIFO, in order.
  const CudaApi& cuda = rt_->cuda;
  for (uint32_t i = 0; i < active_count_;) {
    Fifo* f = &fifos_[active_[i]];
    bool left = false;
    while (f->first_marker != 0) {
      const cudaError_t q = cuda.Query(rt_->pool.Get(nodes_[f->first_marker].e.ev_end));
      if (q == cudaErrorNotReady) break;
      if (q == cudaSuccess) {
        written += CompleteThrough(f, f->first_marker, now_ns, now_ns);
      } else {
        // A sticky error (device fault) or a destroyed context: these ops
        // will never be observed complete; keep their launches on record.
        Count(XPU_CNT_CUDA_ERROR);
        const uint32_t last = f->first_marker;
        while (f->head != 0) {
          const uint32_t node = f->head;
          f->head = nodes_[node].next;
          if (f->head == 0) f->tail = 0;
          --f->count;
          WriteRetired(nodes_[node], now_ns, XPU_REC_INCOMPLETE, false);
          FreeNode(node);
          ++written;
          if (node == last) break;
        }
        FindFirstMarker(f);
        if (f->head == 0) Deactivate(f);
      }
      if (f->active_pos == 0) {
        left = true;
        break;
      }
    }
    if (!left) ++i;
  }
  if (now_ns >= next_retire_ns_) {
    next_retire_ns_ = now_ns + kRetireEveryNs;
    written += Retire(now_ns);
  }
  return written;
}

bool CompletionTracker::EvictUncovered(uint64_t now_ns) {
  for (uint32_t i = 0; i < active_count_; ++i) {
    Fifo* f = &fifos_[active_[i]];
    if (f->first_marker != 0 || PluginTimed(nodes_[f->head].e)) continue;
    const uint32_t node = f->head;
    f->head = nodes_[node].next;
    if (f->head == 0) f->tail = 0;
    --f->count;
    WriteRetired(nodes_[node], now_ns, XPU_REC_UNTRACKED, true);
    Count(XPU_CNT_PENDING_FULL);
    FreeNode(node);
    if (f->head == 0) Deactivate(f);
    return true;
  }
  return false;
}

int CompletionTracker::Retire(uint64_t now_ns) {
  int n = 0;
  for (uint32_t i = 0; i < active_count_;) {
    Fifo* f = &fifos_[active_[i]];
    // Only FIFOs without any pending marker: a marker will decide the rest.
    while (f->first_marker == 0 && f->head != 0) {
      const Node& h = nodes_[f->head];
      if (PluginTimed(h.e) || now_ns < h.e.launch_ns || now_ns - h.e.launch_ns < uncovered_ns_) {
        break;
      }
      const uint32_t node = f->head;
      f->head = nodes_[node].next;
      if (f->head == 0) f->tail = 0;
      --f->count;
      WriteRetired(nodes_[node], now_ns, XPU_REC_UNTRACKED, true);
      Count(XPU_CNT_UNCOVERED);
      FreeNode(node);
      ++n;
    }
    if (f->head == 0) {
      Deactivate(f);  // another FIFO moved to position i
      continue;
    }
    ++i;
  }
  return n;
}

int CompletionTracker::FlushIncomplete(uint64_t now_ns) {
  Drain(now_ns);
  int n = Poll(now_ns);
  while (active_count_ > 0) {
    Fifo* f = &fifos_[active_[0]];
    while (f->head != 0) {
      const uint32_t node = f->head;
      f->head = nodes_[node].next;
      if (f->head == 0) f->tail = 0;
      --f->count;
      WriteRetired(nodes_[node], now_ns, XPU_REC_INCOMPLETE, false);
      FreeNode(node);
      ++n;
    }
    f->first_marker = 0;
    Deactivate(f);
  }
  return n;
}

uint32_t CompletionTracker::WatchedHeads(WatchedOp* out, uint32_t max) const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < active_count_ && n < max; ++i) {
    const Fifo& f = fifos_[active_[i]];
    if (f.head == 0) continue;
    const LaneEntry& e = nodes_[f.head].e;
    if (f.first_marker == 0 && !PluginTimed(e)) continue;  // nothing will decide it
    out[n++] = WatchedOp{e.sig_id, e.seq, e.launch_ns, e.stream};
  }
  return n;
}

}  // namespace xpu::hook
