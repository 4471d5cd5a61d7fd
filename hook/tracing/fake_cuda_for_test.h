// hook/tracing/fake_cuda_for_test.h — an in-memory stand-in for the few CUDA
// runtime functions the hook core calls (CudaApi), for unit tests without a
// GPU. Events are FakeEvent objects: recording stamps the fake GPU clock
// (g_gpu_ms) and marks them not done; a test completes them explicitly.
// Thread-safety: single-threaded tests only. Test-only.
#ifndef XPU_HOOK_TRACING_FAKE_CUDA_FOR_TEST_H_
#define XPU_HOOK_TRACING_FAKE_CUDA_FOR_TEST_H_

#include <cuda_runtime_api.h>

#include "hook/tracing/cuda_api.h"

namespace xpu::hook::testing {

struct FakeEvent {
  double t_ms = 0;
  bool done = true;
  bool recorded = false;
  unsigned flags = 0;
};

inline double g_gpu_ms = 0;           // fake GPU clock
inline bool g_auto_complete = false;  // events complete at record time
inline const void* g_capturing_stream = reinterpret_cast<const void*>(0xCA97);
inline int g_event_records = 0;
inline FakeEvent* g_last_recorded = nullptr;
// Stream holds (cuStreamWaitValue32): armed waits, by address and value.
inline int g_waits = 0;
inline const uint32_t* g_last_wait_addr = nullptr;
inline uint32_t g_last_wait_value = 0;
inline FakeEvent g_event_store[1 << 16];
inline unsigned g_event_next = 0;

inline FakeEvent* AsFake(cudaEvent_t e) { return reinterpret_cast<FakeEvent*>(e); }
inline cudaEvent_t AsEvent(FakeEvent* f) { return reinterpret_cast<cudaEvent_t>(f); }

inline cudaError_t FakeGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t FakeSetDevice(int) { return cudaSuccess; }
inline cudaError_t FakeEventCreate(cudaEvent_t* e, unsigned flags) {
  FakeEvent* f = &g_event_store[g_event_next++ % (1 << 16)];
  *f = FakeEvent{};
  f->flags = flags;
  *e = AsEvent(f);
  return cudaSuccess;
}
inline cudaError_t FakeEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t FakeEventRecord(cudaEvent_t e, cudaStream_t) {
  FakeEvent* f = AsFake(e);
  f->t_ms = g_gpu_ms;
  f->done = g_auto_complete;
  f->recorded = true;
  ++g_event_records;
  g_last_recorded = f;
  return cudaSuccess;
}
inline CUresult FakeWaitValue32(CUstream, CUdeviceptr addr, cuuint32_t value, unsigned flags) {
  if (flags != CU_STREAM_WAIT_VALUE_GEQ) return CUDA_ERROR_NOT_SUPPORTED;
  ++g_waits;
  g_last_wait_addr = reinterpret_cast<const uint32_t*>(static_cast<uintptr_t>(addr));
  g_last_wait_value = value;
  return CUDA_SUCCESS;
}
// The GPU got past the last armed wait: its flag reached the value.
inline bool LastWaitReleased() {
  return g_last_wait_addr != nullptr &&
         static_cast<int32_t>(__atomic_load_n(g_last_wait_addr, __ATOMIC_ACQUIRE) -
                              g_last_wait_value) >= 0;
}
inline cudaError_t FakeEventQuery(cudaEvent_t e) {
  return AsFake(e)->done ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t FakeEventSynchronize(cudaEvent_t e) {
  AsFake(e)->done = true;
  return cudaSuccess;
}
inline cudaError_t FakeEventElapsed(float* ms, cudaEvent_t a, cudaEvent_t b) {
  FakeEvent* fa = AsFake(a);
  FakeEvent* fb = AsFake(b);
  if (!fa->recorded || !fb->recorded || (fa->flags & cudaEventDisableTiming) ||
      (fb->flags & cudaEventDisableTiming)) {
    return cudaErrorInvalidResourceHandle;
  }
  *ms = static_cast<float>(fb->t_ms - fa->t_ms);
  return cudaSuccess;
}
inline cudaError_t FakeStreamCreate(cudaStream_t* s, unsigned) {
  *s = reinterpret_cast<cudaStream_t>(0x5157);
  return cudaSuccess;
}
inline cudaError_t FakeStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* st) {
  *st = (static_cast<const void*>(s) == g_capturing_stream) ? cudaStreamCaptureStatusActive
                                                            : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

inline void InstallFakeCuda(CudaApi* api) {
  api->get_device = &FakeGetDevice;
  api->set_device = &FakeSetDevice;
  api->event_create = &FakeEventCreate;
  api->event_destroy = &FakeEventDestroy;
  api->event_record = &FakeEventRecord;
  api->event_query = &FakeEventQuery;
  api->event_synchronize = &FakeEventSynchronize;
  api->event_elapsed = &FakeEventElapsed;
  api->stream_create = &FakeStreamCreate;
  api->stream_is_capturing = &FakeStreamIsCapturing;
}

}  // namespace xpu::hook::testing

#endif  // XPU_HOOK_TRACING_FAKE_CUDA_FOR_TEST_H_
