// tests/fake_runtime/fake_nccl_profiler.cc — see fake_nccl_profiler.h.
#include "fake_nccl_profiler.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "fake_core.h"
#include "nccl_profiler_api.h"  // hook/nccl_profiler: the published v5 layout

namespace xpu::fake::nccl::prof {
namespace {

namespace fk = xpu::fake;

constexpr uint64_t kStaggerNs = 100;

struct Plugin {
  const xpu_nccl_profiler_v5_t* table = nullptr;
  int channels = 2;
  int proxy_steps = 2;
  int64_t gpu_offset_ns = -1000ll * 1000 * 1000 * 1000;
};

long EnvLong(const char* name, long def, long lo, long hi) {
  const char* s = getenv(name);
  if (s == nullptr || *s == '\0') return def;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  return (*end != '\0' || v < lo || v > hi) ? def : v;
}

const Plugin& GetPlugin() {
  static Plugin p;
  static std::once_flag once;
  std::call_once(once, [] {
    p.channels = static_cast<int>(EnvLong("XPU_FAKE_NCCL_CHANNELS", 2, 1, 32));
    p.proxy_steps = static_cast<int>(EnvLong("XPU_FAKE_NCCL_PROXY_STEPS", 2, 0, 64));
    const char* off = getenv("XPU_FAKE_GPU_TIMER_OFFSET_NS");
    if (off != nullptr && *off != '\0') p.gpu_offset_ns = strtoll(off, nullptr, 10);
    const char* env = getenv("NCCL_PROFILER_PLUGIN");
    std::string name;
    if (env == nullptr) {
      name = "libnccl-profiler.so";
    } else if (strcasecmp(env, "none") == 0 || *env == '\0') {
      return;
    } else if (strchr(env, '/') != nullptr ||
               (strlen(env) > 3 && strcmp(env + strlen(env) - 3, ".so") == 0)) {
      name = env;
    } else {
      name = std::string("libnccl-profiler-") + env + ".so";
    }
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return;  // NCCL: INFO log, no profiler
    p.table = static_cast<const xpu_nccl_profiler_v5_t*>(dlsym(h, "ncclProfiler_v5"));
    if (p.table == nullptr) dlclose(h);
  });
  return p;
}

uint64_t GpuTime(uint64_t host_ns) {
  return static_cast<uint64_t>(static_cast<int64_t>(host_ns) + GetPlugin().gpu_offset_ns);
}

void Logger(int, unsigned long, const char*, int, const char*, ...) {}

uint64_t CommHash(const ncclComm* c) {
  uint64_t h = 0;
  for (size_t i = 0; i < sizeof(c->id.internal) / 8; ++i) {
    uint64_t v;
    memcpy(&v, c->id.internal + i * 8, 8);
    h = Mix(h ^ v);
  }
  return h;
}

// Name of the op as NCCL's descriptors spell it; null: no events.
const char* FuncName(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return "AllReduce";
    case Kind::kAllGather:
      return "AllGather";
    case Kind::kReduceScatter:
      return "ReduceScatter";
    case Kind::kBroadcast:
      return "Broadcast";
    case Kind::kReduce:
      return "Reduce";
    case Kind::kSend:
      return "Send";
    case Kind::kRecv:
      return "Recv";
    default:
      return nullptr;
  }
}

const char* TypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "unknown";
  }
}

bool Wants(const ncclComm* c, uint64_t type) {
  return GetPlugin().table != nullptr && c != nullptr && c->prof_ctx != nullptr &&
         (static_cast<uint64_t>(c->prof_mask) & type) != 0;
}

// NCCL's per-communicator, per-function collective counter (seqNumber).
uint64_t NextSeqNumber(const ncclComm* c, Kind k) {
  static std::mutex mu;
  static auto* seqs = new std::map<std::pair<const ncclComm*, int>, uint64_t>;
  std::lock_guard<std::mutex> lock(mu);
  return (*seqs)[{c, static_cast<int>(k)}]++;
}

void* Start(const ncclComm* c, xpu_nccl_event_descr_v5_t* d) {
  void* h = nullptr;
  GetPlugin().table->startEvent(c->prof_ctx, &h, d);
  return h;
}

void Stop(void* h) {
  if (h != nullptr) GetPlugin().table->stopEvent(h);
}

void State(void* h, int state, xpu_nccl_state_args_v5_t* args) {
  if (h != nullptr) GetPlugin().table->recordEventState(h, state, args);
}

}  // namespace

void CommInit(ncclComm* comm) {
  const Plugin& p = GetPlugin();
  if (p.table == nullptr) return;
  void* ctx = nullptr;
  int mask = 0;
  if (p.table->init(&ctx, CommHash(comm), &mask, "", 1, comm->nranks, comm->rank, &Logger) !=
      ncclSuccess) {
    return;  // NCCL disables the plugin for this communicator
  }
  comm->prof_ctx = ctx;
  comm->prof_mask = mask;
}

void CommFinalize(ncclComm* comm) {
  if (comm->prof_ctx == nullptr) return;
  GetPlugin().table->finalize(comm->prof_ctx);
  comm->prof_ctx = nullptr;
}

void* LaunchBegin(std::vector<PendingOp>* ops) {
  if (ops->empty()) return nullptr;
  const Plugin& p = GetPlugin();
  void* group = nullptr;
  const ncclComm* first = (*ops)[0].comm;
  if (Wants(first, kNcclProfileGroup)) {
    xpu_nccl_event_descr_v5_t d;
    memset(&d, 0, sizeof(d));
    d.type = kNcclProfileGroup;
    d.rank = first->rank;
    group = Start(first, &d);
  }
  for (PendingOp& op : *ops) {
    const char* func = FuncName(op.kind);
    const bool p2p = op.kind == Kind::kSend || op.kind == Kind::kRecv;
    const uint64_t type = p2p ? kNcclProfileP2p : kNcclProfileColl;
    op.nchannels = static_cast<uint8_t>(p.channels);
    if (func == nullptr || !Wants(op.comm, type)) continue;
    xpu_nccl_event_descr_v5_t d;
    memset(&d, 0, sizeof(d));
    d.type = type;
    d.parentObj = nullptr;  // the CollApi/P2pApi event: not modelled
    d.rank = op.comm->rank;
    if (p2p) {
      d.p2p.func = func;
      d.p2p.datatype = TypeName(op.dtype);
      d.p2p.count = op.count;
      d.p2p.peer = op.peer;
      d.p2p.nChannels = op.nchannels;
      d.p2p.parentGroup = group;
    } else {
      d.coll.seqNumber = NextSeqNumber(op.comm, op.kind);
      d.coll.func = func;
      d.coll.count = op.count;
      d.coll.root = op.root;
      d.coll.datatype = TypeName(op.dtype);
      d.coll.nChannels = op.nchannels;
      d.coll.nWarps = 16;
      d.coll.algo = "RING";
      d.coll.proto = "SIMPLE";
      d.coll.parentGroup = group;
    }
    op.prof = Start(op.comm, &d);
  }
  return group;
}

void LaunchEnd(const std::vector<PendingOp>& ops, void* group) {
  if (GetPlugin().table == nullptr) return;
  for (const PendingOp& op : ops) Stop(op.prof);
  Stop(group);
}

void KernelStart(const PendingOp& op, uint64_t host_ns, KernelEvents* ev) {
  const Plugin& p = GetPlugin();
  if (op.prof == nullptr) return;
  if (Wants(op.comm, kNcclProfileKernelCh)) {
    for (int c = 0; c < op.nchannels; ++c) {
      xpu_nccl_event_descr_v5_t d;
      memset(&d, 0, sizeof(d));
      d.type = kNcclProfileKernelCh;
      d.parentObj = op.prof;
      d.rank = op.comm->rank;
      d.kernelCh.channelId = static_cast<uint8_t>(c);
      d.kernelCh.pTimer = GpuTime(host_ns + c * kStaggerNs);
      ev->channels.push_back(Start(op.comm, &d));
    }
  }
  if (p.proxy_steps > 0 && Wants(op.comm, kNcclProfileProxyOp)) {
    const bool send = op.kind != Kind::kRecv;
    const int peer = op.peer >= 0 ? op.peer : (op.comm->rank + 1) % op.comm->nranks;
    for (int c = 0; c < op.nchannels; ++c) {
      xpu_nccl_event_descr_v5_t d;
      memset(&d, 0, sizeof(d));
      d.type = kNcclProfileProxyOp;
      d.parentObj = op.prof;
      d.rank = op.comm->rank;
      d.proxyOp.pid = getpid();
      d.proxyOp.channelId = static_cast<uint8_t>(c);
      d.proxyOp.peer = peer;
      d.proxyOp.nSteps = p.proxy_steps;
      d.proxyOp.chunkSize =
          static_cast<int>(op.size_bytes / static_cast<uint64_t>(op.nchannels * p.proxy_steps));
      d.proxyOp.isSend = send ? 1 : 0;
      void* h = Start(op.comm, &d);
      ev->proxy_ops.push_back(h);
      ev->steps.emplace_back();
      if (h == nullptr || !Wants(op.comm, kNcclProfileProxyStep)) continue;
      for (int s = 0; s < p.proxy_steps; ++s) {
        xpu_nccl_event_descr_v5_t sd;
        memset(&sd, 0, sizeof(sd));
        sd.type = kNcclProfileProxyStep;
        sd.parentObj = h;
        sd.rank = op.comm->rank;
        sd.proxyStep.step = s;
        ev->steps.back().push_back(Start(op.comm, &sd));
      }
    }
  }
}

void KernelStop(const PendingOp& op, uint64_t host_ns, KernelEvents* ev) {
  const Plugin& p = GetPlugin();
  if (op.prof == nullptr || p.table == nullptr) return;
  const bool send = op.kind != Kind::kRecv;
  const uint64_t per_step =
      p.proxy_steps > 0 ? op.size_bytes / static_cast<uint64_t>(op.nchannels * p.proxy_steps) : 0;
  for (size_t i = 0; i < ev->proxy_ops.size(); ++i) {
    for (void* step : ev->steps[i]) {
      xpu_nccl_state_args_v5_t a;
      memset(&a, 0, sizeof(a));
      a.proxyStep.transSize = per_step;
      if (send) {
        State(step, kNcclProxyStepSendGPUWait, &a);
        State(step, kNcclProxyStepSendWait, &a);
      } else {
        State(step, kNcclProxyStepRecvWait, &a);
        State(step, kNcclProxyStepRecvFlushWait, &a);
        State(step, kNcclProxyStepRecvGPUWait, &a);
      }
      Stop(step);
    }
    Stop(ev->proxy_ops[i]);
  }
  const size_t n = ev->channels.size();
  for (size_t c = 0; c < n; ++c) {
    xpu_nccl_state_args_v5_t a;
    memset(&a, 0, sizeof(a));
    a.kernelCh.pTimer = GpuTime(host_ns - (n - 1 - c) * kStaggerNs);
    State(ev->channels[c], kNcclKernelChStop, &a);
    Stop(ev->channels[c]);
  }
}

}  // namespace xpu::fake::nccl::prof
