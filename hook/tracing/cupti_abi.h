// hook/tracing/cupti_abi.h — the few CUPTI types, constants and entry points
// that the profiling window (cupti_window.h) uses, declared here instead of
// taken from <cupti.h>: the hook links no CUDA library and must build and load
// where CUPTI is absent, so CUPTI is reached only through dlopen/dlsym.
//
// Values are those of CUDA 13's cupti_result.h, cupti_callbacks.h and
// cupti_activity.h (CUPTI API version 130001); they have been stable since
// CUDA 9. cupti_window_unittest.cc checks every value and offset against the
// real headers when the build has them.
//
// Kernel activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) are
// CUpti_ActivityKernel10 in CUDA 13 (packed, 8-byte aligned, 216 bytes).
// Versions 4 to 10 of that struct share the prefix read here (up to `name`
// at byte 104); later fields were appended, so the reader does not depend on
// the exact version CUPTI emits. Fields are read with memcpy at fixed
// offsets: the buffer belongs to CUPTI and no struct is overlaid on it.
#ifndef XPU_HOOK_TRACING_CUPTI_ABI_H_
#define XPU_HOOK_TRACING_CUPTI_ABI_H_

#include <cstddef>
#include <cstdint>

namespace xpu::hook::cupti {

using Result = int;  // CUptiResult
constexpr Result kSuccess = 0;
constexpr Result kErrorMaxLimitReached = 12;
constexpr Result kErrorNotInitialized = 15;
constexpr Result kErrorInsufficientPrivileges = 35;
constexpr Result kErrorMultipleSubscribersNotSupported = 39;

using ActivityKind = int;  // CUpti_ActivityKind
constexpr ActivityKind kActivityKindKernel = 3;
constexpr ActivityKind kActivityKindConcurrentKernel = 10;
constexpr uint32_t kActivityFlagFlushForced = 1u << 0;

using CallbackDomain = int;  // CUpti_CallbackDomain
constexpr CallbackDomain kCbDomainRuntimeApi = 2;
using CallbackId = uint32_t;
constexpr int kApiExit = 1;  // CUpti_ApiCallbackSite::CUPTI_API_EXIT
// CUpti_CallbackData begins with its CUpti_ApiCallbackSite (an int).
constexpr size_t kCallbackDataSiteOffset = 0;

using SubscriberHandle = struct Subscriber_st*;
using CallbackFunc = void (*)(void* userdata, CallbackDomain domain, CallbackId cbid,
                              const void* cbdata);
using BufferRequestedFunc = void (*)(uint8_t** buffer, size_t* size, size_t* max_num_records);
using BufferCompletedFunc = void (*)(void* context, uint32_t stream_id, uint8_t* buffer,
                                     size_t size, size_t valid_size);

// Byte offsets in CUpti_ActivityKernel4..10.
constexpr size_t kKernelKindOffset = 0;            // uint32 CUpti_ActivityKind
constexpr size_t kKernelStartOffset = 16;          // uint64 ns, CUPTI timestamp
constexpr size_t kKernelEndOffset = 24;            // uint64 ns
constexpr size_t kKernelDeviceIdOffset = 40;       // uint32
constexpr size_t kKernelStreamIdOffset = 48;       // uint32, CUPTI's stream id
constexpr size_t kKernelCorrelationIdOffset = 92;  // uint32
constexpr size_t kKernelNameOffset = 104;          // const char*, owned by CUPTI
constexpr size_t kKernelPrefixSize = 112;
// Activity buffers must be aligned to ACTIVITY_RECORD_ALIGNMENT.
constexpr size_t kActivityRecordAlignment = 8;

// The entry points, resolved by dlsym from the CUPTI library.
struct Api {
  Result (*subscribe)(SubscriberHandle*, CallbackFunc, void*) = nullptr;
  Result (*unsubscribe)(SubscriberHandle) = nullptr;
  Result (*enable_domain)(uint32_t, SubscriberHandle, CallbackDomain) = nullptr;
  Result (*activity_register_callbacks)(BufferRequestedFunc, BufferCompletedFunc) = nullptr;
  Result (*activity_enable)(ActivityKind) = nullptr;
  Result (*activity_disable)(ActivityKind) = nullptr;
  Result (*activity_flush_all)(uint32_t) = nullptr;
  Result (*activity_get_next_record)(uint8_t*, size_t, void**) = nullptr;
  Result (*activity_get_num_dropped_records)(void*, uint32_t, size_t*) = nullptr;
  Result (*get_timestamp)(uint64_t*) = nullptr;
  Result (*finalize)() = nullptr;

  bool Complete() const {
    return subscribe && unsubscribe && enable_domain && activity_register_callbacks &&
           activity_enable && activity_disable && activity_flush_all && activity_get_next_record &&
           activity_get_num_dropped_records && get_timestamp && finalize;
  }
};

}  // namespace xpu::hook::cupti

#endif  // XPU_HOOK_TRACING_CUPTI_ABI_H_
