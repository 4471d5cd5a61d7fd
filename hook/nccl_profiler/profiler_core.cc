// hook/nccl_profiler/profiler_core.cc — see profiler_core.h.
#include "profiler_core.h"

#include <unistd.h>

#include <strings.h>
#include <cstring>

namespace xpu::nccl_profiler {

namespace {

constexpr uint64_t kNoTime = UINT64_MAX;

void AtomicMin(std::atomic<uint64_t>* a, uint64_t v) {
  uint64_t cur = a->load(std::memory_order_relaxed);
  while (v < cur && !a->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
void AtomicMax(std::atomic<uint64_t>* a, uint64_t v) {
  uint64_t cur = a->load(std::memory_order_relaxed);
  while (v > cur && !a->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
void AtomicMinI(std::atomic<int64_t>* a, int64_t v) {
  int64_t cur = a->load(std::memory_order_relaxed);
  while (v < cur && !a->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// record.h duration encoding: ns, else us with XPU_REC_DUR_US, else saturated.
uint32_t EncodeDuration(uint64_t ns, uint16_t* flags) {
  if (ns <= UINT32_MAX) return static_cast<uint32_t>(ns);
  *flags |= XPU_REC_DUR_US;
  const uint64_t us = ns / 1000;
  if (us <= UINT32_MAX) return static_cast<uint32_t>(us);
  *flags |= XPU_REC_DUR_SATURATED;
  return UINT32_MAX;
}

int32_t SaturateI32(int64_t v) {
  if (v > INT32_MAX) return INT32_MAX;
  if (v < INT32_MIN) return INT32_MIN;
  return static_cast<int32_t>(v);
}

bool IsRooted(uint32_t kind) {
  return kind == XPU_OP_BROADCAST || kind == XPU_OP_REDUCE || kind == XPU_OP_GATHER ||
         kind == XPU_OP_SCATTER;
}

// The reference word of an op slot: generation (high 32) | references (low 32).
constexpr uint64_t Word(uint32_t gen, uint32_t refs) { return (uint64_t{gen} << 32) | refs; }
constexpr uint32_t GenOf(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
constexpr uint32_t RefsOf(uint64_t w) { return static_cast<uint32_t>(w); }

}  // namespace

// ---- clock ---------------------------------------------------------------------

void ClockOffset::Observe(uint64_t gpu_ns, uint64_t host_ns) {
  if (gpu_ns == 0 || host_ns == 0) return;
  const int64_t sample = static_cast<int64_t>(host_ns - gpu_ns);
  uint64_t start = window_start_.load(std::memory_order_relaxed);
  if (start == 0 || host_ns - start > kWindowNs) {
    // Rotate: the winner moves the current minimum to `prev_`.
    if (window_start_.compare_exchange_strong(start, host_ns, std::memory_order_relaxed)) {
      prev_.store(cur_.exchange(sample, std::memory_order_relaxed), std::memory_order_relaxed);
      return;
    }
  }
  AtomicMinI(&cur_, sample);
}

bool ClockOffset::Get(int64_t* offset) const {
  const int64_t c = cur_.load(std::memory_order_relaxed);
  const int64_t p = prev_.load(std::memory_order_relaxed);
  const int64_t m = c < p ? c : p;
  if (m == kNone) return false;
  *offset = m;
  return true;
}

// ---- slots -----------------------------------------------------------------------

struct Profiler::Context {
  std::atomic<uint32_t> used{0};
  uint64_t nccl_comm_id = 0;
  int32_t rank = -1;
  int32_t nranks = 0;
  std::atomic<uint64_t> xpu_comm_id{0};  // learned from the first unambiguous join
};

struct Profiler::OpSlot {
  std::atomic<uint32_t> live{0};  // 0 free, 1 owned by an op
  std::atomic<uint64_t> word{0};  // Word(gen, refs)
  xpu_nccl_issued_op_v1 issued{};
  bool joined = false;
  std::atomic<uint64_t> stopped_ns{0};  // NCCL's stopEvent of the op ("enqueued")
  std::atomic<uint64_t> gpu_start{kNoTime};
  std::atomic<uint64_t> gpu_stop{0};
  std::atomic<uint32_t> channels{0};
  std::atomic<uint64_t> proxy_first{kNoTime};
  std::atomic<uint64_t> proxy_last{0};

  void ResetMeasurements() {
    stopped_ns.store(0, std::memory_order_relaxed);
    gpu_start.store(kNoTime, std::memory_order_relaxed);
    gpu_stop.store(0, std::memory_order_relaxed);
    channels.store(0, std::memory_order_relaxed);
    proxy_first.store(kNoTime, std::memory_order_relaxed);
    proxy_last.store(0, std::memory_order_relaxed);
  }
};

struct Profiler::ChildSlot {
  std::atomic<uint32_t> live{0};
  uint64_t type = 0;
  OpSlot* op = nullptr;  // null: orphan or late (updates ignored)
  uint32_t op_gen = 0;
  bool holds_ref = false;
  uint64_t ptimer_stop = 0;
  uint64_t host_start = 0;
  uint64_t trans_size = 0;
};

Profiler::Profiler(const HookApi& api, uint32_t max_ops, uint32_t max_children)
    : api_(api),
      max_ops_(max_ops == 0 ? 1 : max_ops),
      max_children_(max_children == 0 ? 1 : max_children),
      pid_(static_cast<int32_t>(getpid())),
      ops_(new OpSlot[max_ops_]),
      children_(new ChildSlot[max_children_]),
      contexts_(new Context[kMaxContexts]) {}

Profiler::~Profiler() = default;

Profiler::OpSlot* Profiler::AcquireOp(uint64_t now) {
  for (uint32_t probe = 0; probe < max_ops_; ++probe) {
    OpSlot& s = ops_[op_cursor_.fetch_add(1, std::memory_order_relaxed) % max_ops_];
    uint32_t expected = 0;
    if (s.live.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return &s;
    // An op stopped long ago that never got all its channel stops (graph
    // capture, channels NCCL did not use): reclaim it without a record.
    const uint64_t stopped = s.stopped_ns.load(std::memory_order_relaxed);
    if (stopped != 0 && now > stopped && now - stopped > kStaleNs) {
      uint64_t w = s.word.load(std::memory_order_acquire);
      if (RefsOf(w) != 0 &&
          s.word.compare_exchange_strong(w, Word(GenOf(w) + 1, 0), std::memory_order_acq_rel)) {
        stats_.ops_stale.fetch_add(1, std::memory_order_relaxed);
        return &s;  // still live: now ours
      }
    }
  }
  return nullptr;
}

Profiler::ChildSlot* Profiler::AcquireChild() {
  for (uint32_t probe = 0; probe < max_children_; ++probe) {
    ChildSlot& s = children_[child_cursor_.fetch_add(1, std::memory_order_relaxed) % max_children_];
    uint32_t expected = 0;
    if (s.live.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return &s;
  }
  return nullptr;
}

Profiler::OpSlot* Profiler::AsOp(void* p) const {
  const uintptr_t base = reinterpret_cast<uintptr_t>(ops_.get());
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < base || a >= base + uintptr_t{max_ops_} * sizeof(OpSlot)) return nullptr;
  if ((a - base) % sizeof(OpSlot) != 0) return nullptr;
  return static_cast<OpSlot*>(p);
}

Profiler::ChildSlot* Profiler::AsChild(void* p) const {
  const uintptr_t base = reinterpret_cast<uintptr_t>(children_.get());
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < base || a >= base + uintptr_t{max_children_} * sizeof(ChildSlot)) return nullptr;
  if ((a - base) % sizeof(ChildSlot) != 0) return nullptr;
  return static_cast<ChildSlot*>(p);
}

Profiler::Context* Profiler::AsContext(void* p) const {
  const uintptr_t base = reinterpret_cast<uintptr_t>(contexts_.get());
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < base || a >= base + uintptr_t{kMaxContexts} * sizeof(Context)) return nullptr;
  if ((a - base) % sizeof(Context) != 0) return nullptr;
  Context* c = static_cast<Context*>(p);
  return c->used.load(std::memory_order_acquire) != 0 ? c : nullptr;
}

uint32_t Profiler::LiveOps() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < max_ops_; ++i) n += ops_[i].live.load(std::memory_order_relaxed);
  return n;
}

// ---- descriptor strings --------------------------------------------------------

uint32_t Profiler::KindFromFunc(const char* f) {
  if (f == nullptr) return XPU_OP_NONE;
  struct Entry {
    const char* name;
    uint32_t kind;
  };
  static constexpr Entry kFuncs[] = {{"AllReduce", XPU_OP_ALLREDUCE},
                                     {"AllGather", XPU_OP_ALLGATHER},
                                     {"ReduceScatter", XPU_OP_REDUCESCATTER},
                                     {"Broadcast", XPU_OP_BROADCAST},
                                     {"Reduce", XPU_OP_REDUCE},
                                     {"AllToAll", XPU_OP_ALLTOALL},
                                     {"Gather", XPU_OP_GATHER},
                                     {"Scatter", XPU_OP_SCATTER},
                                     {"Send", XPU_OP_SEND},
                                     {"Recv", XPU_OP_RECV}};
  for (const Entry& e : kFuncs) {
    if (strcasecmp(f, e.name) == 0) return e.kind;
  }
  return XPU_OP_NONE;
}

uint32_t Profiler::DtypeSizeFromName(const char* t) {
  if (t == nullptr) return 0;
  // NCCL hands out pointers into its own static table of names: remember the
  // last few pointers, so that an op costs a pointer compare, not strcmp's.
  // One word per entry, (size << 56) | pointer, so that a reader never pairs
  // one writer's pointer with another's size; pointers with high bits set
  // (tagged) are not cached.
  static std::atomic<uint64_t> cache[4];
  const uint64_t p = reinterpret_cast<uintptr_t>(t);
  constexpr uint64_t kPtrMask = (uint64_t{1} << 56) - 1;
  std::atomic<uint64_t>& slot = cache[(p >> 3) & 3u];
  const uint64_t cached = slot.load(std::memory_order_relaxed);
  if (cached != 0 && (cached & kPtrMask) == p) return static_cast<uint32_t>(cached >> 56);
  const uint32_t size = DtypeSizeSlow(t);
  if ((p & ~kPtrMask) == 0) slot.store((uint64_t{size} << 56) | p, std::memory_order_relaxed);
  return size;
}

uint32_t Profiler::DtypeSizeSlow(const char* t) {
  if (strncmp(t, "nccl", 4) == 0) t += 4;
  struct Entry {
    const char* name;
    uint32_t size;
  };
  static constexpr Entry kTypes[] = {
      {"Int8", 1},    {"Char", 1},    {"Uint8", 1},    {"Float8e4m3", 1}, {"Float8e5m2", 1},
      {"Float16", 2}, {"Half", 2},    {"Bfloat16", 2}, {"Int32", 4},      {"Int", 4},
      {"Uint32", 4},  {"Float32", 4}, {"Float", 4},    {"Int64", 8},      {"Uint64", 8},
      {"Float64", 8}, {"Double", 8}};
  for (const Entry& e : kTypes) {
    if (strcasecmp(t, e.name) == 0) return e.size;
  }
  return 0;
}

// ---- entry points ----------------------------------------------------------------

ncclResult_t Profiler::Init(void** context, uint64_t nccl_comm_id, int* activation_mask, int nranks,
                            int rank) {
  if (context == nullptr) return ncclInvalidArgument;
  *context = nullptr;
  if (!api_.complete()) return ncclSystemError;
  if (api_.attach(XPU_NCCL_PLUGIN_API_VERSION) != 1) return ncclInvalidUsage;
  for (uint32_t i = 0; i < kMaxContexts; ++i) {
    Context& c = contexts_[i];
    uint32_t expected = 0;
    if (!c.used.compare_exchange_strong(expected, 2, std::memory_order_acquire)) continue;
    c.nccl_comm_id = nccl_comm_id;
    c.rank = rank;
    c.nranks = nranks;
    c.xpu_comm_id.store(0, std::memory_order_relaxed);
    c.used.store(1, std::memory_order_release);
    if (activation_mask != nullptr) *activation_mask = kActivationMask;
    *context = &c;
    return ncclSuccess;
  }
  return ncclSystemError;  // more live communicators than contexts
}

ncclResult_t Profiler::Finalize(void* context) {
  if (Context* c = AsContext(context)) c->used.store(0, std::memory_order_release);
  return ncclSuccess;
}

ncclResult_t Profiler::StartEvent(void* context, void** handle,
                                  const xpu_nccl_event_descr_v5_t* d) {
  if (handle == nullptr) return ncclSuccess;
  *handle = nullptr;
  if (d == nullptr) return ncclSuccess;
  switch (d->type) {
    case kNcclProfileColl:
    case kNcclProfileP2p: {
      Context* ctx = AsContext(context);
      if (ctx == nullptr) {
        stats_.foreign_handles.fetch_add(1, std::memory_order_relaxed);
        return ncclSuccess;
      }
      return StartOp(ctx, handle, d);
    }
    case kNcclProfileKernelCh:
    case kNcclProfileProxyOp:
    case kNcclProfileProxyStep:
      return StartChild(handle, d);
    default:
      return ncclSuccess;  // not activated: nothing to track
  }
}

ncclResult_t Profiler::StartOp(Context* ctx, void** handle, const xpu_nccl_event_descr_v5_t* d) {
  const uint64_t now = api_.now_ns();
  OpSlot* op = AcquireOp(now);
  if (op == nullptr) {
    stats_.pool_exhausted.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  stats_.ops_started.fetch_add(1, std::memory_order_relaxed);
  const bool coll = d->type == kNcclProfileColl;
  xpu_nccl_issue_query_v1 q{};
  q.kind = KindFromFunc(coll ? d->coll.func : d->p2p.func);
  const uint64_t count = coll ? d->coll.count : d->p2p.count;
  q.bytes = count * DtypeSizeFromName(coll ? d->coll.datatype : d->p2p.datatype);
  q.peer = coll ? (IsRooted(q.kind) ? d->coll.root : -1) : d->p2p.peer;
  q.rank = ctx->rank;
  q.nranks = ctx->nranks;
  q.comm_id = ctx->xpu_comm_id.load(std::memory_order_relaxed);
  const int matches = q.kind != XPU_OP_NONE ? api_.claim(&q, &op->issued) : 0;
  op->joined = matches > 0;
  if (matches > 0) {
    stats_.ops_joined.fetch_add(1, std::memory_order_relaxed);
    if (matches > 1) stats_.ops_ambiguous.fetch_add(1, std::memory_order_relaxed);
    if (matches == 1 && q.comm_id == 0 && op->issued.comm_id != 0) {
      ctx->xpu_comm_id.store(op->issued.comm_id, std::memory_order_relaxed);
    }
  } else {
    stats_.ops_unjoined.fetch_add(1, std::memory_order_relaxed);
  }
  op->ResetMeasurements();
  const uint32_t nch = coll ? d->coll.nChannels : d->p2p.nChannels;
  // References: NCCL's stopEvent of the op, plus one per expected channel.
  const uint32_t gen = GenOf(op->word.load(std::memory_order_relaxed));
  op->word.store(Word(gen, 1 + nch), std::memory_order_release);
  *handle = op;
  return ncclSuccess;
}

ncclResult_t Profiler::StartChild(void** handle, const xpu_nccl_event_descr_v5_t* d) {
  ChildSlot* c = AcquireChild();
  if (c == nullptr) {
    stats_.pool_exhausted.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  c->type = d->type;
  c->op = nullptr;
  c->op_gen = 0;
  c->holds_ref = false;
  c->ptimer_stop = 0;
  c->trans_size = 0;
  c->host_start = api_.now_ns();
  *handle = c;

  OpSlot* op = nullptr;
  uint32_t gen = 0;
  if (d->type == kNcclProfileProxyStep) {
    ChildSlot* parent = AsChild(d->parentObj);
    if (parent != nullptr && parent->op != nullptr) {
      op = parent->op;
      gen = parent->op_gen;
    }
  } else if (!(d->type == kNcclProfileProxyOp && static_cast<int32_t>(d->proxyOp.pid) != pid_)) {
    // (A PXN proxy op from another process carries a parent pointer of that
    // address space: never dereferenced.)
    op = AsOp(d->parentObj);
    if (op != nullptr) gen = GenOf(op->word.load(std::memory_order_acquire));
  }
  if (op == nullptr) {
    stats_.children_orphaned.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  const uint64_t w = op->word.load(std::memory_order_acquire);
  if (GenOf(w) != gen || RefsOf(w) == 0) {
    stats_.children_late.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  c->op = op;
  c->op_gen = gen;
  switch (d->type) {
    case kNcclProfileKernelCh:
      if (d->kernelCh.pTimer != 0) {
        clock_.Observe(d->kernelCh.pTimer, c->host_start);
        AtomicMin(&op->gpu_start, d->kernelCh.pTimer);
      }
      break;
    case kNcclProfileProxyOp: {
      // Holds the op open while the proxy works on it (if still open).
      uint64_t cur = w;
      while (GenOf(cur) == gen && RefsOf(cur) != 0) {
        if (op->word.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) {
          c->holds_ref = true;
          break;
        }
      }
      break;
    }
    case kNcclProfileProxyStep:
      AtomicMin(&op->proxy_first, c->host_start);
      break;
    default:
      break;
  }
  return ncclSuccess;
}

ncclResult_t Profiler::RecordEventState(void* handle, int state,
                                        const xpu_nccl_state_args_v5_t* args) {
  ChildSlot* c = AsChild(handle);
  if (c == nullptr || args == nullptr) return ncclSuccess;
  if (c->type == kNcclProfileKernelCh && state == kNcclKernelChStop) {
    c->ptimer_stop = args->kernelCh.pTimer;
  } else if (c->type == kNcclProfileProxyStep &&
             (state == kNcclProxyStepSendWait || state == kNcclProxyStepRecvWait ||
              state == kNcclProxyStepSendGPUWait || state == kNcclProxyStepRecvFlushWait ||
              state == kNcclProxyStepRecvGPUWait || state == kNcclProxyStepSendPeerWait)) {
    if (args->proxyStep.transSize != 0) c->trans_size = args->proxyStep.transSize;
  }
  return ncclSuccess;
}

ncclResult_t Profiler::StopEvent(void* handle) {
  if (handle == nullptr) return ncclSuccess;
  if (OpSlot* op = AsOp(handle)) {
    op->stopped_ns.store(api_.now_ns(), std::memory_order_relaxed);
    Unref(op, GenOf(op->word.load(std::memory_order_acquire)));
    return ncclSuccess;
  }
  ChildSlot* c = AsChild(handle);
  if (c == nullptr) {
    stats_.foreign_handles.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  OpSlot* op = c->op;
  if (op != nullptr) {
    const uint64_t w = op->word.load(std::memory_order_acquire);
    const bool current = GenOf(w) == c->op_gen && RefsOf(w) != 0;
    switch (c->type) {
      case kNcclProfileKernelCh:
        if (!current) {
          stats_.children_late.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        if (c->ptimer_stop != 0) {
          clock_.Observe(c->ptimer_stop, api_.now_ns());
          AtomicMax(&op->gpu_stop, c->ptimer_stop);
          op->channels.fetch_add(1, std::memory_order_relaxed);
        }
        stats_.kernel_channels.fetch_add(1, std::memory_order_relaxed);
        Unref(op, c->op_gen);
        break;
      case kNcclProfileProxyOp:
        if (c->holds_ref) Unref(op, c->op_gen);
        break;
      case kNcclProfileProxyStep:
        stats_.proxy_steps.fetch_add(1, std::memory_order_relaxed);
        stats_.net_bytes.fetch_add(c->trans_size, std::memory_order_relaxed);
        if (current) AtomicMax(&op->proxy_last, api_.now_ns());
        break;
      default:
        break;
    }
  }
  c->op = nullptr;
  c->live.store(0, std::memory_order_release);
  return ncclSuccess;
}

void Profiler::Unref(OpSlot* op, uint32_t gen) {
  uint64_t w = op->word.load(std::memory_order_acquire);
  while (true) {
    if (GenOf(w) != gen || RefsOf(w) == 0) {
      stats_.children_late.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (op->word.compare_exchange_weak(w, w - 1, std::memory_order_acq_rel)) break;
  }
  if (RefsOf(w) == 1) Complete(op);  // we dropped the last reference
}

void Profiler::Complete(OpSlot* op) {
  if (op->joined) {
    xpu_record_v1 r{};
    r.sig_id = op->issued.sig_id;
    r.seq = op->issued.seq;
    r.stream = op->issued.stream;
    uint16_t flags = XPU_REC_PLUGIN;
    const uint64_t gs = op->gpu_start.load(std::memory_order_relaxed);
    const uint64_t ge = op->gpu_stop.load(std::memory_order_relaxed);
    const uint64_t pf = op->proxy_first.load(std::memory_order_relaxed);
    const uint64_t pl = op->proxy_last.load(std::memory_order_relaxed);
    int64_t offset = 0;
    bool timed = false;
    uint64_t duration = 0;
    if (op->channels.load(std::memory_order_relaxed) != 0 && gs != kNoTime && ge >= gs &&
        clock_.Get(&offset)) {
      r.start_ns = static_cast<uint64_t>(static_cast<int64_t>(gs) + offset);
      duration = ge - gs;
      timed = true;
    } else if (pf != kNoTime && pl >= pf) {
      // No kernel-channel timestamps: the proxy's network activity, on the
      // host clock, is the best interval there is.
      r.start_ns = pf;
      duration = pl - pf;
      timed = true;
    }
    if (timed) {
      flags |= XPU_REC_TIMED;
      if (op->issued.launch_ns != 0) {
        r.issue_latency_ns = SaturateI32(static_cast<int64_t>(r.start_ns) -
                                         static_cast<int64_t>(op->issued.launch_ns));
        flags |= XPU_REC_ISSUE_LAT_VALID;
      }
      r.duration = EncodeDuration(duration, &flags);
      r.flags = flags;
      if (api_.emit(&r) == 0) {
        stats_.records_written.fetch_add(1, std::memory_order_relaxed);
      } else {
        stats_.records_dropped.fetch_add(1, std::memory_order_relaxed);
      }
    } else {
      stats_.ops_untimed.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Next generation; a child still pointing here is now "late".
  const uint64_t w = op->word.load(std::memory_order_relaxed);
  op->word.store(Word(GenOf(w) + 1, 0), std::memory_order_release);
  op->live.store(0, std::memory_order_release);
}

}  // namespace xpu::nccl_profiler
