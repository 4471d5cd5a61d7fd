// hook/tracing/cupti_window.h — short CUPTI activity windows on request of the
// node daemon (PerfTracker's "online profiling", §4.1 of the paper: profile
// every kernel for 10 to 20 s when a slowdown is detected, then stop).
//
// Protocol: the control block of the ring header page (include/xpu/ring.h,
// xpu_ring_profile_ctl_v1). The completion thread calls Tick() (~20 Hz);
// everything CUPTI-related starts and ends there, never on the launch path:
//
//   idle       a new request -> load CUPTI (dlopen, once) -> cuptiSubscribe
//              (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another
//              client such as torch.profiler/Kineto or Nsight holds CUPTI;
//              skip, ack SKIPPED_OTHER_CLIENT and touch nothing else) ->
//              register buffer callbacks -> enable CONCURRENT_KERNEL
//              (unlike KIND_KERNEL it does not serialize kernels) -> ack
//              STARTED.
//   running    CUPTI hands filled buffers to OnBufferCompleted (on its own
//              thread, or on ours during a flush): each kernel becomes an
//              XPU_REC_PROFILE_WINDOW record (host clock, name interned as an
//              XPU_OP_KERNEL signature). At the deadline: disable the kind,
//              cuptiActivityFlushAll(FORCED), read CUPTI's drop count.
//   detaching  CUPTI is released with cuptiFinalize, as CUPTI's
//              documentation recommends, from the exit of a CUDA runtime API
//              call: runtime-domain callbacks are enabled on our subscriber
//              and the first API exit finalizes (one atomic exchange per API
//              call until then). A process that makes no runtime call within
//              `detach_wait_ns` is idle, so finalizing from this thread is
//              safe then. Ack DONE with the counts; buffers are freed.
//
// After a window the process carries no CUPTI state: no subscriber, no
// enabled kind, no callback. A skipped window changes nothing.
//
// Budget: at most `max_buffers` activity buffers of `buffer_bytes` each
// (allocated at the first window, freed after each), at most `max_records`
// records per window; beyond that kernels are dropped and counted in the
// control block (`dropped`, XPU_PROFILE_TRUNCATED). CUPTI failures never
// reach the host process: every call's result is checked, the window is
// abandoned and reported (FAILED with the CUptiResult in `detail`).
//
// Library search (first that loads): XPU_CUPTI_PATH (a file, or a directory
// holding libcupti.so.13 / libcupti.so); a libcupti already loaded in the
// process; next to the loaded libcudart (found with dladdr) and the usual
// relative places (pip wheels: ../../cuda_cupti/lib, ../../cu13/lib; the
// toolkit: ../extras/CUPTI/lib64); then the loader's search for
// libcupti.so.13 and libcupti.so. The library is never unloaded.
//
// Thread-safety: Init once before the completion thread starts; Tick on the
// completion thread only. The CUPTI callbacks (static) run on CUPTI's
// thread, on our thread during a flush, or on an application thread (API
// exit while detaching); they touch only atomics, the preallocated buffers
// and the lock-free ring writer and signature table. One instance per
// process (CUPTI's buffer callbacks carry no user pointer).
#ifndef XPU_HOOK_TRACING_CUPTI_WINDOW_H_
#define XPU_HOOK_TRACING_CUPTI_WINDOW_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "hook/ring/ring_writer.h"
#include "hook/tracing/cupti_abi.h"
#include "hook/tracing/signatures.h"
#include "xpu/ring.h"

namespace xpu::hook {

struct CuptiWindowOptions {
  bool enabled = true;                      // XPU_PROFILE_WINDOWS (0 = refuse every request)
  std::string cupti_path;                   // XPU_CUPTI_PATH
  uint32_t max_records = 500000;            // XPU_PROFILE_MAX_RECORDS, per window
  uint32_t buffer_bytes = 1u << 20;         // XPU_CUPTI_BUFFER_KB x 1024
  uint32_t max_buffers = 16;                // XPU_CUPTI_MAX_BUFFERS (1..64)
  uint64_t detach_wait_ns = 2000000000ull;  // XPU_CUPTI_DETACH_WAIT_MS
  uint64_t poll_ns = 50000000ull;           // request polling period
};

// Reads the variables above with getenv (initialisation only). Bad values
// keep the default.
CuptiWindowOptions CuptiWindowOptionsFromEnv();

// Negative `detail` values in the control block: reasons that are the hook's
// own, not a CUptiResult.
enum CuptiWindowDetail : int32_t {
  kDetailNoLibrary = -1,      // no libcupti found
  kDetailDisabled = -2,       // XPU_PROFILE_WINDOWS=0
  kDetailSymbolMissing = -3,  // libcupti lacks an entry point we need
  kDetailNoBuffers = -4,      // activity buffers could not be allocated
};

class CuptiWindow {
 public:
  CuptiWindow() = default;
  CuptiWindow(const CuptiWindow&) = delete;
  CuptiWindow& operator=(const CuptiWindow&) = delete;
  ~CuptiWindow();

  // `ctl` points into the ring header page (null: windows off). Publishes
  // hook_magic. `ring` and `sigs` receive the window's records and names.
  void Init(xpu_ring_profile_ctl_v1* ctl, RingWriter* ring, SignatureTable* sigs,
            const CuptiWindowOptions& options);

  // Completion thread. `cudart_anchor` is the address of any function of the
  // loaded libcudart (locates libcupti next to it), null when unknown.
  void Tick(uint64_t now_ns, const void* cudart_anchor);

  bool idle() const { return state_ == State::kIdle; }
  // Path of the CUPTI library in use ("" before the first window).
  const std::string& library() const { return library_; }

 private:
  enum class State { kIdle, kRunning, kDetaching };
  // Finalize ownership while detaching: whoever moves kArmed -> kClaimed
  // calls cuptiFinalize; kDone once it returned.
  enum Detach : uint32_t { kDetachOff = 0, kDetachArmed = 1, kDetachClaimed = 2, kDetachDone = 3 };

  bool LoadApi(const void* cudart_anchor, int32_t* detail);
  bool AllocateBuffers();
  void FreeBuffers();
  void Start(uint32_t req_id, uint32_t duration_ms, uint32_t max_records, uint64_t now_ns);
  void EndActivity(uint64_t now_ns);
  void Finish(uint64_t now_ns);
  // Host-clock minus CUPTI-clock offset, from the tightest of a few paired reads.
  bool SampleClockOffset(int64_t* offset_ns);
  void Ack(uint32_t req_id, uint32_t status, int32_t detail);
  void ProcessBuffer(uint8_t* buffer, size_t valid_size);
  uint32_t InternKernel(const char* name, uint32_t device);

  static void OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_num_records);
  static void OnBufferCompleted(void* context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                size_t valid_size);
  static void OnCallback(void* userdata, cupti::CallbackDomain domain, cupti::CallbackId cbid,
                         const void* cbdata);

  xpu_ring_profile_ctl_v1* ctl_ = nullptr;
  RingWriter* ring_ = nullptr;
  SignatureTable* sigs_ = nullptr;
  CuptiWindowOptions options_;

  // Completion thread only.
  State state_ = State::kIdle;
  bool api_loaded_ = false;
  bool api_failed_ = false;
  int32_t api_detail_ = 0;
  std::string library_;
  cupti::Api api_;
  cupti::SubscriberHandle subscriber_ = nullptr;
  uint32_t last_req_id_ = 0;  // id of the last ack
  uint32_t cur_req_id_ = 0;
  uint64_t end_at_ns_ = 0;
  uint64_t detach_deadline_ns_ = 0;
  uint64_t next_poll_ns_ = 0;
  uint32_t windows_total_ = 0;

  // Shared with the CUPTI callbacks.
  std::atomic<int64_t> clock_offset_ns_{0};
  std::atomic<uint32_t> max_records_{0};
  std::atomic<uint32_t> records_{0};
  std::atomic<uint32_t> dropped_{0};
  std::atomic<uint32_t> truncated_{0};
  std::atomic<uint32_t> detach_{kDetachOff};
  std::atomic<int32_t> finalize_result_{0};
  std::atomic<uint32_t> finalized_in_callback_{0};
  // Activity buffers: fixed pool, bit i of free_mask_ set = buffers_[i] free.
  std::unique_ptr<uint8_t*[]> buffers_;
  uint32_t nbuffers_ = 0;
  std::atomic<uint64_t> free_mask_{0};
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_CUPTI_WINDOW_H_
