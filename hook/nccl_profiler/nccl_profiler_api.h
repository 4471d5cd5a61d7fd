// hook/nccl_profiler/nccl_profiler_api.h — our declarations of NCCL's
// profiler plugin interface, versions 5 (NCCL 2.26 .. 2.28) and 4 (NCCL
// 2.25). The interface is not part of nccl.h; these declarations follow the
// published plugin interface (NCCL's plugins/profiler documentation) field
// by field, since NCCL reads and writes these structs directly: order, types
// and sizes are ABI. Only what this plugin uses is named; the enums hold the
// numeric values NCCL uses.
//
// Thread-safety: declarations only.
#ifndef XPU_HOOK_NCCL_PROFILER_NCCL_PROFILER_API_H_
#define XPU_HOOK_NCCL_PROFILER_NCCL_PROFILER_API_H_

#include <nccl.h>
#include <stdint.h>
#include <sys/types.h>

extern "C" {

// Event type bits (eDescr.type, and the activation mask returned by init).
enum XpuNcclProfileEventType : uint64_t {
  kNcclProfileGroup = 1u << 0,         // legacy (v4) group of tasks
  kNcclProfileColl = 1u << 1,          // collective task (enqueue side)
  kNcclProfileP2p = 1u << 2,           // point-to-point task
  kNcclProfileProxyOp = 1u << 3,       // proxy work on one channel
  kNcclProfileProxyStep = 1u << 4,     // one network transfer of a proxy op
  kNcclProfileProxyCtrl = 1u << 5,     // proxy thread idle/active/append
  kNcclProfileKernelCh = 1u << 6,      // kernel work on one channel (GPU ptimer)
  kNcclProfileNetPlugin = 1u << 7,     // network-plugin defined
  kNcclProfileGroupApi = 1u << 8,      // v5: ncclGroupStart/End API
  kNcclProfileCollApi = 1u << 9,       // v5: collective API call
  kNcclProfileP2pApi = 1u << 10,       // v5: p2p API call
  kNcclProfileKernelLaunch = 1u << 11  // v5: kernel launch
};

// Event states (recordEventState), NCCL's numbering.
enum XpuNcclProfilerEventState : int {
  kNcclProxyStepSendGPUWait = 8,
  kNcclProxyStepSendWait = 9,
  kNcclProxyStepRecvWait = 10,
  kNcclProxyStepRecvFlushWait = 11,
  kNcclProxyStepRecvGPUWait = 12,
  kNcclProxyCtrlIdle = 13,
  kNcclProxyCtrlActive = 14,
  kNcclProxyCtrlSleep = 15,
  kNcclProxyCtrlWakeup = 16,
  kNcclProxyCtrlAppend = 17,
  kNcclProxyCtrlAppendEnd = 18,
  kNcclProxyOpInProgress = 19,
  kNcclProxyStepSendPeerWait = 20,
  kNcclNetPluginUpdate = 21,
  kNcclKernelChStop = 22,
  kNcclGroupStartApiStop = 23,
  kNcclGroupEndApiStart = 24
};
typedef int xpu_nccl_profiler_state_t;  // an XpuNcclProfilerEventState value

// NCCL's logger (level, subsystem flags, file, line, printf format).
typedef void (*xpu_nccl_logger_t)(int level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

// ---- version 5 --------------------------------------------------------------

typedef struct {
  uint64_t type;    // one kNcclProfile* bit
  void* parentObj;  // handle of the parent event returned by startEvent, or null
  int rank;         // rank in the communicator
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;  // NCCL's own counter (per communicator and function)
      const char* func;    // "AllReduce", "AllGather", ...
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;  // "ncclBfloat16", ...
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;  // the v4 group event
    } coll;
    struct {
      const char* func;  // "Send" / "Recv"
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;  // process that created the proxy op (PXN: may be remote)
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // GPU globaltimer (ns) when the channel started
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} xpu_nccl_event_descr_v5_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;  // GPU globaltimer when the channel stopped
} xpu_nccl_state_args_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, xpu_nccl_logger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, xpu_nccl_event_descr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, xpu_nccl_profiler_state_t eState,
                                   xpu_nccl_state_args_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} xpu_nccl_profiler_v5_t;

// ---- version 4 --------------------------------------------------------------

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} xpu_nccl_event_descr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} xpu_nccl_state_args_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName,
                       uint64_t commHash, int nNodes, int nranks, int rank,
                       xpu_nccl_logger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, xpu_nccl_event_descr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, xpu_nccl_profiler_state_t eState,
                                   xpu_nccl_state_args_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} xpu_nccl_profiler_v4_t;

}  // extern "C"

#endif  // XPU_HOOK_NCCL_PROFILER_NCCL_PROFILER_API_H_
