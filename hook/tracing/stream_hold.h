// hook/tracing/stream_hold.h — exact GPU timing of short ops: the stream is
// held while the op is being enqueued.
//
// An event pair around a short op measures more than the op when the CPU is
// behind the GPU: the start event runs as soon as it is enqueued, and the GPU
// then sits idle until the launching call (cuBLAS choosing a kernel, NCCL
// building its plan) has enqueued the kernel; the idle gap lands inside the
// measured interval. For a timed op the hook therefore enqueues, before the
// start event, a wait on a flag in pinned, device-mapped host memory
// (cuStreamWaitValue32, cyclic >= comparison), and sets the flag from the CPU
// right after the real call returned and the end event was recorded. The GPU
// then runs start event, op and end event back to back; only ops before the
// hold are unaffected, and the op itself cannot start before it is enqueued
// anyway. Start time and issue latency are those of the start event: when
// the GPU was idle, that is when the op really started (within the hold's
// release latency, ~1-2 us), not when the CPU entered the call.
//
// Safety:
//  * Released on every path of the launch (EndGpuOp, success or failure).
//  * A timeout: the completion thread releases any hold older than
//    XPU_HOLD_TIMEOUT_US (default 2000) and counts XPU_CNT_HOLD_TIMEOUT, so
//    that a launching call that waits for the GPU itself (which would wait
//    for the hold) stalls the stream for at most the timeout, never forever.
//  * Never on a capturing stream (timed ops are not timed there at all).
//  * Off when stream memory operations fail (checked once per device with a
//    satisfied wait on a hook-owned stream) or XPU_TIMING_HOLD=0: timed ops
//    then get the plain event pair.
//  * Flags only grow (cyclically): a wait for value v is satisfied by any
//    later value, so a slot reused while an old wait is still queued can
//    only release that old wait early, never block it.
//
// Thread-safety: Arm/Release from any thread (lock-free); SetUp and
// ReleaseExpired on the completion thread.
#ifndef XPU_HOOK_TRACING_STREAM_HOLD_H_
#define XPU_HOOK_TRACING_STREAM_HOLD_H_

#include <atomic>
#include <cstdint>

#include "hook/tracing/cuda_api.h"
#include "hook/tracing/gpu_clock.h"

namespace xpu::hook {

class StreamHolds {
 public:
  static constexpr uint32_t kSlots = 256;  // power of two

  void Init(const CudaApi* api, bool enabled, uint64_t timeout_ns);
  // Completion thread, `device` current: allocates the flags (once) and
  // checks that a wait works on this device. Idempotent.
  bool SetUp(int device);
  bool Ready(int device) const {
    return device >= 0 && device < kMaxDevices &&
           (ready_.load(std::memory_order_acquire) >> device & 1) != 0;
  }

  // Launch path: enqueues a hold on `stream` (of `device`). Returns a handle
  // (slot + 1), or 0 when no hold was enqueued.
  uint32_t Arm(int device, const void* stream, uint64_t now_ns);
  // Lets the held stream run. Any thread; idempotent.
  void Release(uint32_t handle);
  // Completion thread: releases holds armed before now - timeout. Returns
  // how many (counted by the caller as XPU_CNT_HOLD_TIMEOUT).
  uint32_t ReleaseExpired(uint64_t now_ns);
  uint64_t timeout_ns() const { return timeout_ns_; }

  // Tests: flags in ordinary memory, device pointer == host pointer.
  void SetUpForTest(int device, uint32_t* flags);
  uint32_t FlagForTest(uint32_t handle) const { return flags_[(handle - 1) & (kSlots - 1)]; }

 private:
  const CudaApi* api_ = nullptr;
  bool enabled_ = false;
  uint64_t timeout_ns_ = 2000000;
  uint32_t* flags_ = nullptr;  // kSlots words, pinned and mapped (or test memory)
  uint64_t dptr_[kMaxDevices] = {};
  std::atomic<uint64_t> ready_{0};   // bit per device
  std::atomic<uint64_t> failed_{0};  // bit per device: no holds there
  std::atomic<uint32_t> cursor_{0};
  std::atomic<uint32_t> target_[kSlots] = {};
  std::atomic<uint64_t> armed_ns_[kSlots] = {};  // 0 = not armed
  uint64_t next_scan_ns_ = 0;                    // completion thread
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_STREAM_HOLD_H_
