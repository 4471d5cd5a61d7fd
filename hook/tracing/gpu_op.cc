// hook/tracing/gpu_op.cc — the launch path of traced GPU ops:
// BeginGpuOp/EndGpuOp (declared in core_api.h), which take a slot of the
// pending table (pending_table.h), ask the sampler, record CUDA events and hand
// the op to the completion thread. Runs on application threads: no
// allocation, lock, syscall or dlsym; CUDA is reached only through the
// resolved real functions in Runtime::cuda.
#include "hook/core_api.h"
#include "hook/process/runtime.h"
#include "hook/tracing/pending_table.h"
#include "hook/tracing/record_fields.h"

namespace xpu::hook {

namespace {

// A record for an op that is never observed on the GPU: CPU times only.
void WriteHostSideRecord(Runtime* rt, const PendingOp& p, uint64_t end_ns, uint16_t flags) {
  xpu_record_v1 r{};
  r.sig_id = p.sig_id;
  r.start_ns = p.launch_ns;
  uint16_t f = static_cast<uint16_t>(p.flags | flags | XPU_REC_NOT_TIMED);
  f &= static_cast<uint16_t>(~(XPU_REC_TIMED | XPU_REC_SAMPLED | XPU_REC_ISSUE_LAT_VALID));
  r.duration = EncodeDuration(end_ns > p.launch_ns ? end_ns - p.launch_ns : 0, &f);
  r.seq = p.seq;
  r.stream = p.stream;
  r.flags = f;
  rt->ring.Write(r);
}

void ReleaseOp(Runtime* rt, uint32_t slot) {
  PendingOp& p = rt->pending.op(slot);
  rt->pool.Give(p.start_ev);
  rt->pool.Give(p.end_ev);
  p.start_ev = p.end_ev = 0;
  rt->pending.Release(slot);
  rt->pending.AddInFlight(-1);
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
  // Until a slot is tracked, the handle describes an untracked op: EndGpuOp
  // then writes a CPU-side record so that no occurrence goes missing.
  h.sig_id = sig_id;
  h.launch_ns = launch_ns;
  h.seq = seq != 0 ? seq : stream_seq;
  h.stream = sidx;
  h.untracked = 1;

  const Config& c = rt->config;
  const uint32_t kind = rt->sigs.KindOf(sig_id);
  // Plain kernels reach us only when the layer's XPU_KERNEL_SAMPLE_EVERY
  // tally picked this launch. Everything else asks the per-signature
  // sampler, whatever the policy: its pick also decides which launches get a
  // Python call site (OpHandle::picked), under XPU_TIMING=all too.
  const bool picked = kind == XPU_OP_KERNEL ||
                      SampleDecision(rt->sampler.Next(sig_id), c.sample_first, c.sample_every);
  h.picked = picked ? 1 : 0;
  bool timed;
  if ((extra_flags & XPU_REC_NOT_TIMED) != 0) {
    // The caller has another timer for this op (a collective timed by the
    // NCCL profiler plugin, docs/timing-policy.md): completion tracking only.
    timed = false;
  } else {
    timed = picked || c.timing == TimingPolicy::kAll;
  }

  if (!rt->cuda_ready.load(std::memory_order_acquire)) {
    // No real runtime (yet): the pool cannot exist.
    Count(XPU_CNT_EVENT_POOL_EMPTY);
    return h;
  }
  const CudaApi& cuda = rt->cuda;
  cudaStream_t s = const_cast<cudaStream_t>(static_cast<const CUstream_st*>(stream));
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  // An event recorded into a capturing stream would become a graph node (or
  // invalidate the capture): no events, but the launch is still recorded.
  // A failed query (e.g. legacy stream during a global capture) counts as
  // capturing for the same reason.
  bool capturing =
      cuda.stream_is_capturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone;
  int dev = -1;
  if (!capturing && cuda.get_device(&dev) != cudaSuccess) {
    Count(XPU_CNT_CUDA_ERROR);
    return h;
  }
  uint32_t slot = rt->pending.Acquire();
  if (slot == 0) {
    Count(XPU_CNT_PENDING_FULL);
    return h;
  }
  PendingOp& p = rt->pending.op(slot);
  p.launch_ns = launch_ns;
  p.sig_id = sig_id;
  p.seq = seq != 0 ? seq : stream_seq;
  p.stream = sidx;
  p.device = static_cast<int16_t>(dev);
  p.start_ev = p.end_ev = 0;
  p.next = 0;
  p.flags = extra_flags;
  rt->pending.AddInFlight(1);
  if (capturing) {
    Count(XPU_CNT_CAPTURE_SKIPPED);
    p.flags |= XPU_REC_GRAPH_CAPTURE;
  } else {
    if (timed) p.start_ev = rt->pool.Take(dev, true);
    p.end_ev = (timed && p.start_ev == 0) ? 0 : rt->pool.Take(dev, timed);
    if (p.end_ev == 0) {
      Count(XPU_CNT_EVENT_POOL_EMPTY);
      ReleaseOp(rt, slot);
      return h;
    }
    p.calib_gen = rt->clock.Generation(dev);
    if (timed && cuda.event_record(rt->pool.Get(p.start_ev), s) != cudaSuccess) {
      Count(XPU_CNT_CUDA_ERROR);
      ReleaseOp(rt, slot);
      return h;
    }
    if (timed) {
      p.flags |= XPU_REC_TIMED;
      if (c.timing == TimingPolicy::kSampled) p.flags |= XPU_REC_SAMPLED;
      Count(XPU_CNT_SAMPLED);
    }
    if (__atomic_load_n(&rt->ring.header()->device, __ATOMIC_RELAXED) == -1) {
      rt->ring.SetDevice(dev);
    }
  }
  h.slot = slot;
  h.untracked = 0;
  return h;
}

void EndGpuOp(const OpHandle& op, const void* stream, int status) {
  if (op.slot == 0) {
    if (op.untracked == 0 || op.sig_id == 0) return;
    Runtime* rt = GetRuntime();
    if (rt == nullptr) return;
    const uint64_t end_ns = NowNs();
    xpu_record_v1 r{};
    r.sig_id = op.sig_id;
    r.start_ns = op.launch_ns;
    uint16_t f = XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED;
    if (status != 0) f |= XPU_REC_CALL_FAILED;
    r.duration = EncodeDuration(end_ns > op.launch_ns ? end_ns - op.launch_ns : 0, &f);
    r.seq = op.seq;
    r.stream = op.stream;
    r.flags = f;
    rt->ring.Write(r);
    return;
  }
  Runtime* rt = GetRuntime();
  if (rt == nullptr || op.slot > rt->pending.capacity()) return;
  PendingOp& p = rt->pending.op(op.slot);
  if (status != 0 || p.end_ev == 0) {
    // Failed call, or a capture launch: nothing will run on the GPU that we
    // can observe, so the record carries CPU times.
    WriteHostSideRecord(rt, p, NowNs(), status != 0 ? XPU_REC_CALL_FAILED : 0);
    ReleaseOp(rt, op.slot);
    return;
  }
  cudaStream_t s = const_cast<cudaStream_t>(static_cast<const CUstream_st*>(stream));
  if (rt->cuda.event_record(rt->pool.Get(p.end_ev), s) != cudaSuccess) {
    Count(XPU_CNT_CUDA_ERROR);
    ReleaseOp(rt, op.slot);
    return;
  }
  if (!rt->pending.Submit(op.slot)) {  // cannot happen: the queue holds every slot
    Count(XPU_CNT_PENDING_FULL);
    ReleaseOp(rt, op.slot);
  }
}

}  // namespace xpu::hook
