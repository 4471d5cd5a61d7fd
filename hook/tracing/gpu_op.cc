// hook/tracing/gpu_op.cc — the launch path of traced GPU ops:
// BeginGpuOp/EndGpuOp, NoteHostSync and NoteCapture (declared in
// core_api.h). Runs on application threads: no allocation, lock or dlsym;
// no system call except one gettid() per thread at its first traced op
// (op_lanes.h); CUDA is reached only through the resolved real functions in
// Runtime::cuda.
//
// What an op costs here (docs/performance.md has the measured figures):
//  * untimed (the common case): a clock read, the stream index, two relaxed
//    fetch_adds (per-stream launch count, per-signature sampler) and a
//    32-byte entry in the thread's lane. No CUDA call, no lock-prefixed
//    instruction shared with the completion thread;
//  * plus, once per XPU_MARKER_US per (thread, stream), and after each
//    collective that the NCCL profiler plugin does not time: a capture check
//    and one non-timing event record (the completion marker);
//  * timed (sampled, or every op under XPU_TIMING=all): a capture check, a
//    stream hold (stream_hold.h) and two timing event records.
#include "hook/core_api.h"
#include "hook/process/runtime.h"
#include "hook/tracing/record_fields.h"

namespace xpu::hook {

namespace {

std::atomic<int> g_captures_active{0};

// Per-thread launch time of the last completion marker on a stream: a small
// direct-mapped table (a thread launches on few streams; a collision only
// costs an early marker). Trivially constructible: no TLS init guard.
struct MarkerClock {
  uint32_t key[8];  // stream index + 1, 0 = empty
  uint64_t last_ns[8];
};
__attribute__((tls_model("initial-exec"))) thread_local MarkerClock t_markers;

inline bool MarkerDue(uint16_t stream, uint64_t now_ns, uint64_t quantum_ns) {
  const uint32_t i = stream & 7u;
  const MarkerClock& m = t_markers;
  return m.key[i] != uint32_t{stream} + 1 || now_ns - m.last_ns[i] >= quantum_ns;
}

inline void MarkerRecorded(uint16_t stream, uint64_t now_ns) {
  const uint32_t i = stream & 7u;
  t_markers.key[i] = uint32_t{stream} + 1;
  t_markers.last_ns[i] = now_ns;
}

inline bool IsCollectiveOrGraph(uint32_t kind) {
  return (kind >= XPU_OP_ALLREDUCE && kind <= XPU_OP_RECV) || kind == XPU_OP_GRAPH_LAUNCH;
}

// A record for an op that is never observed on the GPU: CPU times only.
void WriteHostSideRecord(Runtime* rt, const OpHandle& op, uint64_t end_ns, uint16_t flags) {
  xpu_record_v1 r{};
  r.sig_id = op.sig_id;
  r.start_ns = op.launch_ns;
  uint16_t f = static_cast<uint16_t>(op.flags | flags | XPU_REC_NOT_TIMED);
  f &= static_cast<uint16_t>(~(XPU_REC_TIMED | XPU_REC_SAMPLED | XPU_REC_ISSUE_LAT_VALID));
  r.duration = EncodeDuration(end_ns > op.launch_ns ? end_ns - op.launch_ns : 0, &f);
  r.seq = op.seq;
  r.stream = op.stream;
  r.flags = f;
  rt->ring.Write(r);
}

void DropEvents(Runtime* rt, OpHandle* op) {
  rt->holds.Release(op->hold);
  rt->pool.Give(op->ev_start);
  rt->pool.Give(op->ev_end);
  op->hold = op->ev_start = op->ev_end = 0;
}

void NoteDevice(Runtime* rt, int dev) {
  if (__atomic_load_n(&rt->ring.header()->device, __ATOMIC_RELAXED) == -1) rt->ring.SetDevice(dev);
}

// Timing events and the stream hold of a timed op; on any shortage the op
// simply stays untimed (counted).
void BeginTimed(Runtime* rt, OpHandle* h, const void* stream) {
  const CudaApi& cuda = rt->cuda;
  // An event recorded into a capturing stream would become a graph node (or
  // invalidate the capture): no events, but the launch is still recorded.
  if (cuda.Capturing(stream)) {
    Count(XPU_CNT_CAPTURE_SKIPPED);
    h->flags |= XPU_REC_GRAPH_CAPTURE;
    return;
  }
  int dev = -1;
  if (cuda.get_device(&dev) != cudaSuccess) {
    Count(XPU_CNT_CUDA_ERROR);
    return;
  }
  const uint32_t start = rt->pool.Take(dev, true);
  const uint32_t end = start != 0 ? rt->pool.Take(dev, true) : 0;
  if (end == 0) {
    // No timing events (the pool is not created yet, or exhausted): the
    // occurrence is recorded from CPU times, XPU_REC_UNTRACKED, as the
    // sampler's pick cannot be honoured (docs/timing-policy.md).
    rt->pool.Give(start);
    Count(XPU_CNT_EVENT_POOL_EMPTY);
    h->slot = 0;
    h->untracked = 1;
    return;
  }
  h->hold = rt->config.timing_hold ? rt->holds.Arm(dev, stream, h->launch_ns) : 0;
  if (cuda.Record(rt->pool.Get(start), stream) != cudaSuccess) {
    rt->holds.Release(h->hold);
    h->hold = 0;
    rt->pool.Give(start);
    rt->pool.Give(end);
    Count(XPU_CNT_CUDA_ERROR);
    return;
  }
  h->ev_start = start;
  h->ev_end = end;
  h->device = static_cast<int8_t>(dev);
  h->calib_gen = static_cast<uint16_t>(rt->clock.Generation(dev));
  h->flags |= XPU_REC_TIMED;
  if (rt->config.timing == TimingPolicy::kSampled) h->flags |= XPU_REC_SAMPLED;
  Count(XPU_CNT_SAMPLED);
  NoteDevice(rt, dev);
}

// Records a completion marker after the op; false when none could be.
bool RecordMarker(Runtime* rt, LaneEntry* e, const void* stream) {
  const CudaApi& cuda = rt->cuda;
  if (cuda.Capturing(stream)) return false;
  int dev = -1;
  if (cuda.get_device(&dev) != cudaSuccess) {
    Count(XPU_CNT_CUDA_ERROR);
    return false;
  }
  // Not counted when the pool has no event: nothing is lost, a later
  // marker (or sync) covers this op.
  const uint32_t ev = rt->pool.Take(dev, false);
  if (ev == 0) return false;
  if (cuda.Record(rt->pool.Get(ev), stream) != cudaSuccess) {
    rt->pool.Give(ev);
    Count(XPU_CNT_CUDA_ERROR);
    return false;
  }
  e->ev_end = ev;
  e->device = static_cast<int8_t>(dev);
  NoteDevice(rt, dev);
  return true;
}

}  // namespace

// The calling layer holds the ReentrancyGuard around Begin, the real call and
// End, so the CUDA calls made here (through Runtime::cuda, never through an
// interposer anyway) and any nested interposed call pass straight through.
OpHandle BeginGpuOp(uint32_t sig_id, const void* stream, uint32_t seq, uint16_t extra_flags) {
  OpHandle h;
  if (!Active() || sig_id == 0) return h;
  Runtime* rt = GetRuntime();
  const uint64_t launch_ns = NowNs();
  EnsureStarted();
  const uint16_t sidx = StreamIndex(stream);
  const uint32_t stream_seq = rt->stream_seq[sidx].fetch_add(1, std::memory_order_relaxed) + 1;
  // Until the op is tracked, the handle describes an untracked op: EndGpuOp
  // then writes a CPU-side record so that no occurrence goes missing.
  h.sig_id = sig_id;
  h.launch_ns = launch_ns;
  h.seq = seq != 0 ? seq : stream_seq;
  h.stream = sidx;
  h.untracked = 1;
  h.flags = extra_flags;

  const Config& c = rt->config;
  const uint32_t kind = rt->sigs.KindOf(sig_id);
  // Plain kernels reach us only when the layer's XPU_KERNEL_SAMPLE_EVERY
  // tally picked this launch. Everything else asks the per-signature
  // sampler, whatever the policy: its pick also decides which launches get a
  // Python call site (OpHandle::picked), under XPU_TIMING=all too.
  const bool picked = kind == XPU_OP_KERNEL ||
                      SampleDecision(rt->sampler.Next(sig_id), c.sample_first, c.sample_every);
  h.picked = picked ? 1 : 0;
  // XPU_REC_NOT_TIMED from the caller: another timer has this op (a
  // collective timed by the NCCL profiler plugin, docs/timing-policy.md),
  // which also announces its completion. Other collectives and graph
  // launches get a marker of their own: hang diagnosis needs their
  // completion exactly.
  const bool timed =
      (extra_flags & XPU_REC_NOT_TIMED) == 0 && (picked || c.timing == TimingPolicy::kAll);
  h.want_marker = (extra_flags & XPU_REC_NOT_TIMED) == 0 && IsCollectiveOrGraph(kind) ? 1 : 0;

  if (!rt->cuda_ready.load(std::memory_order_acquire)) {
    // No real runtime (yet): no events, no markers.
    Count(XPU_CNT_EVENT_POOL_EMPTY);
    return h;
  }
  const uint32_t lane = rt->lanes.ThisThreadLane();
  if (lane == 0) {
    Count(XPU_CNT_PENDING_FULL);
    return h;
  }
  h.slot = lane;
  h.untracked = 0;
  if (g_captures_active.load(std::memory_order_relaxed) != 0 && !timed &&
      rt->cuda.Capturing(stream)) {
    // An interposed capture is under way: this launch may be a graph node.
    Count(XPU_CNT_CAPTURE_SKIPPED);
    h.flags |= XPU_REC_GRAPH_CAPTURE;
    return h;
  }
  if (timed) BeginTimed(rt, &h, stream);
  return h;
}

void EndGpuOp(const OpHandle& op_in, const void* stream, int status) {
  if (op_in.slot == 0) {
    if (op_in.untracked == 0 || op_in.sig_id == 0) return;
    Runtime* rt = GetRuntime();
    if (rt == nullptr) return;
    WriteHostSideRecord(rt, op_in, NowNs(),
                        XPU_REC_UNTRACKED | (status != 0 ? XPU_REC_CALL_FAILED : 0));
    return;
  }
  Runtime* rt = GetRuntime();
  if (rt == nullptr) return;
  OpHandle op = op_in;
  if (status != 0 || (op.flags & XPU_REC_GRAPH_CAPTURE) != 0) {
    // Failed call, or a capture launch: nothing will run on the GPU that we
    // can observe, so the record carries CPU times.
    DropEvents(rt, &op);
    WriteHostSideRecord(rt, op, NowNs(), status != 0 ? XPU_REC_CALL_FAILED : 0);
    return;
  }
  LaneEntry e;
  e.launch_ns = op.launch_ns;
  e.sig_id = op.sig_id;
  e.seq = op.seq;
  e.ev_start = 0;
  e.ev_end = 0;
  e.stream = op.stream;
  e.flags = op.flags;
  e.type = LaneEntry::kOp;
  e.device = op.device;
  e.calib_gen = op.calib_gen;
  if (op.ev_end != 0) {
    // End event first, then the release: the GPU runs start event, op and
    // end event back to back (stream_hold.h).
    if (rt->cuda.Record(rt->pool.Get(op.ev_end), stream) != cudaSuccess) {
      Count(XPU_CNT_CUDA_ERROR);
      DropEvents(rt, &op);
      e.flags &= static_cast<uint16_t>(~(XPU_REC_TIMED | XPU_REC_SAMPLED));
    } else {
      rt->holds.Release(op.hold);
      e.ev_start = op.ev_start;
      e.ev_end = op.ev_end;
      MarkerRecorded(op.stream, op.launch_ns);
    }
  }
  // Plugin-timed collectives (XPU_REC_NOT_TIMED from the caller) need no
  // marker: the plugin announces their completion.
  if (e.ev_end == 0 &&
      (op.want_marker != 0 || ((op.flags & XPU_REC_NOT_TIMED) == 0 &&
                               MarkerDue(op.stream, op.launch_ns, rt->marker_ns)))) {
    if (RecordMarker(rt, &e, stream)) MarkerRecorded(op.stream, op.launch_ns);
  }
  if (!rt->lanes.Push(op.slot, e)) {
    // The completion thread is far behind: keep the occurrence on record.
    Count(XPU_CNT_PENDING_FULL);
    rt->pool.Give(e.ev_start);
    rt->pool.Give(e.ev_end);
    WriteHostSideRecord(rt, op, NowNs(), XPU_REC_UNTRACKED);
  }
}

void NoteHostSync(const void* stream, bool all_streams) {
  if (!Active()) return;
  Runtime* rt = GetRuntime();
  const uint32_t lane = rt->lanes.CurrentLane();
  if (lane == 0) return;  // this thread never launched a traced op
  LaneEntry e{};
  e.launch_ns = NowNs();
  e.type = all_streams ? LaneEntry::kAllSync : LaneEntry::kStreamSync;
  e.device = -1;
  if (all_streams) {
    int dev = -1;
    if (rt->cuda_ready.load(std::memory_order_acquire) &&
        rt->cuda.get_device(&dev) == cudaSuccess && dev >= 0 && dev < 128) {
      e.device = static_cast<int8_t>(dev);
    }
  } else {
    e.stream = StreamIndex(stream);
  }
  // A full lane only delays completion until the next marker.
  rt->lanes.Push(lane, e);
}

void NoteCapture(int delta) { g_captures_active.fetch_add(delta, std::memory_order_relaxed); }

}  // namespace xpu::hook
