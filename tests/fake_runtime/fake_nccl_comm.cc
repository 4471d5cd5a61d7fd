// tests/fake_runtime/fake_nccl_comm.cc — the communicator engine of the fake
// NCCL: see fake_nccl_comm.h, the protocol in fake_nccl_shm.h and the model
// at the top of fake_nccl.cc.
//
// Thread-safety: the communicator registry is guarded by a mutex; shared
// memory is accessed with __atomic builtins (single writer per field).
#include "fake_nccl_comm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "fake_core.h"
#include "fake_nccl_profiler.h"

namespace xpu::fake::nccl {

namespace fk = xpu::fake;

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

namespace {

// nccl-tests bus bandwidth factor.
double BusFactor(Kind k, int n) {
  double d = n;
  switch (k) {
    case Kind::kAllReduce:
      return 2.0 * (d - 1) / d;
    case Kind::kAllGather:
    case Kind::kReduceScatter:
    case Kind::kAllToAll:
    case Kind::kGather:
    case Kind::kScatter:
      return (d - 1) / d;
    default:
      return 1.0;
  }
}

uint64_t DurationNs(const PendingOp& op) {
  double factor = BusFactor(op.kind, op.comm->nranks);
  // bytes / (GB/s * 1e9) seconds = bytes / GB/s nanoseconds.
  return static_cast<uint64_t>(static_cast<double>(op.size_bytes) * factor /
                               fk::GetConfig().net_gbps * op.comm->link_factor);
}

}  // namespace

// Waits until *p >= target; false if the communicator was aborted meanwhile.
// Polls with a growing sleep (2 us .. 200 us): cheap on a loaded machine, and
// the modelled end time is computed from stamps, not from when we woke up.
bool WaitAtLeast(const ncclComm* c, const uint64_t* p, uint64_t target) {
  uint64_t sleep_ns = 2000;
  while (Load(p) < target) {
    if (c->aborted.load(std::memory_order_relaxed)) return false;
    timespec ts{0, static_cast<long>(sleep_ns)};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min<uint64_t>(sleep_ns * 2, 200000);
  }
  return true;
}

namespace {

bool IsColl(Kind k) { return k != Kind::kSend && k != Kind::kRecv; }

// XPU_FAKE_NCCL_STALL_SEQ / _LINK (fake_nccl_shm.h): read once.
struct StallKnob {
  uint64_t seq = 0;  // 0: off
  int link = 0;
};
const StallKnob& Stall() {
  static const StallKnob k = [] {
    StallKnob s;
    if (const char* v = getenv("XPU_FAKE_NCCL_STALL_SEQ")) s.seq = strtoull(v, nullptr, 10);
    if (const char* v = getenv("XPU_FAKE_NCCL_STALL_LINK")) s.link = atoi(v);
    return s;
  }();
  return k;
}

// (kind << 56) | bytes, compared across the members of one collective.
uint64_t Shape(const PendingOp& op) {
  return (static_cast<uint64_t>(op.kind) << 56) | (op.size_bytes & ((1ull << 56) - 1));
}

void BlockForever(ncclComm* c) {
  while (!c->aborted.load(std::memory_order_relaxed)) {
    timespec ts{0, 100 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

// A broken ring link: this rank finishes its modelled steps, then waits
// forever inside the "kernel" (until the communicator is aborted).
void StallForever(ncclComm* c) {
  const int n = c->nranks;
  const int link = ((Stall().link % n) + n) % n;
  const uint64_t steps = static_cast<uint64_t>(((c->rank - (link + 1)) % n + n) % n);
  Store(&c->seg->slots[c->rank].coll_step, steps);
  BlockForever(c);
}

// The kernel a profiler sees for a group: one per launch, named as NCCL
// names its device kernels (without the reduction/type/algorithm suffix).
const char* KernelName(const std::vector<PendingOp>& ops) {
  switch (ops[0].kind) {
    case Kind::kAllReduce:
      return "ncclDevKernel_AllReduce";
    case Kind::kAllGather:
      return "ncclDevKernel_AllGather";
    case Kind::kReduceScatter:
      return "ncclDevKernel_ReduceScatter";
    case Kind::kBroadcast:
      return "ncclDevKernel_Broadcast";
    case Kind::kReduce:
      return "ncclDevKernel_Reduce";
    default:
      return "ncclDevKernel_SendRecv";  // AllToAll, Gather, Scatter: send/recv too
  }
}

// Runs on the stream worker: the whole rendezvous of a (possibly fused)
// group of ops of one stream.
void ExecuteOps(const std::vector<PendingOp>& ops, uint32_t stream_id, int device) {
  struct Ticket {
    uint64_t seq;
    uint64_t arrival_ns;  // the modelled kernel starts here (waits for peers inside)
  };
  std::vector<Ticket> tickets(ops.size());
  // 1. Announce every arrival first (a fused group must not wait before all
  //    its ops are visible to the peers).
  for (size_t i = 0; i < ops.size(); ++i) {
    const PendingOp& op = ops[i];
    ncclComm* c = op.comm;
    xpu_fake_nccl_slot& me = c->seg->slots[c->rank];
    uint64_t now = fk::NowNs();
    tickets[i].arrival_ns = now;
    if (IsColl(op.kind)) {
      uint64_t seq = ++c->coll_seq;
      me.coll_arrival_ns[seq % XPU_FAKE_NCCL_RING] = now;
      Store(&me.coll_step, uint64_t{0});
      me.coll_shape[seq % XPU_FAKE_NCCL_RING] = Shape(op);
      Store(&me.coll_arrived, seq);
      tickets[i].seq = seq;
    } else if (op.kind == Kind::kSend) {
      uint64_t seq = ++c->send_seq[op.peer];
      me.send_ns[op.peer][seq % XPU_FAKE_NCCL_P2P_RING] = now;
      Store(&me.send_arrived[op.peer], seq);
      tickets[i].seq = seq;
    } else {
      uint64_t seq = ++c->recv_seq[op.peer];
      me.recv_ns[op.peer][seq % XPU_FAKE_NCCL_P2P_RING] = now;
      Store(&me.recv_arrived[op.peer], seq);
      tickets[i].seq = seq;
    }
  }
  // The profiler plugin sees the kernel start (kernel-channel, proxy events).
  std::vector<prof::KernelEvents> kernel_events(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    prof::KernelStart(ops[i], tickets[i].arrival_ns, &kernel_events[i]);
  }
  // 2. Wait for the peers; the op starts when its last participant arrived.
  uint64_t end = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PendingOp& op = ops[i];
    ncclComm* c = op.comm;
    xpu_fake_nccl_segment* seg = c->seg;
    uint64_t seq = tickets[i].seq;
    uint64_t start = 0;
    bool ok = true;
    if (IsColl(op.kind)) {
      bool mismatch = false;
      for (int r = 0; r < c->nranks && ok; ++r) {
        ok = WaitAtLeast(c, &seg->slots[r].coll_arrived, seq);
        if (ok) start = std::max(start, seg->slots[r].coll_arrival_ns[seq % XPU_FAKE_NCCL_RING]);
        if (ok && seg->slots[r].coll_shape[seq % XPU_FAKE_NCCL_RING] != Shape(op)) mismatch = true;
      }
      if (mismatch) BlockForever(c);
    } else if (op.kind == Kind::kSend) {
      xpu_fake_nccl_slot& peer = seg->slots[op.peer];
      ok = WaitAtLeast(c, &peer.recv_arrived[c->rank], seq);
      if (ok) {
        start = std::max(seg->slots[c->rank].send_ns[op.peer][seq % XPU_FAKE_NCCL_P2P_RING],
                         peer.recv_ns[c->rank][seq % XPU_FAKE_NCCL_P2P_RING]);
      }
    } else {
      xpu_fake_nccl_slot& peer = seg->slots[op.peer];
      ok = WaitAtLeast(c, &peer.send_arrived[c->rank], seq);
      if (ok) {
        start = std::max(seg->slots[c->rank].recv_ns[op.peer][seq % XPU_FAKE_NCCL_P2P_RING],
                         peer.send_ns[c->rank][seq % XPU_FAKE_NCCL_P2P_RING]);
      }
    }
    if (ok) end = std::max(end, start + DurationNs(op));
    if (ok && IsColl(op.kind) && Stall().seq != 0 && seq == Stall().seq) StallForever(c);
  }
  // 3. Run for the modelled time, then publish completion.
  fk::SleepUntilNs(end);
  const uint64_t done = fk::NowNs();
  for (size_t i = 0; i < ops.size(); ++i) prof::KernelStop(ops[i], done, &kernel_events[i]);
  // Like a real NCCL kernel, it started when this rank arrived and spent the
  // wait for its peers inside.
  fk::KernelActivity activity;
  activity.name = KernelName(ops);
  activity.start_ns = tickets[0].arrival_ns;
  activity.end_ns = done;
  activity.stream_id = stream_id;
  activity.device = device;
  fk::ReportKernel(activity);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PendingOp& op = ops[i];
    if (IsColl(op.kind)) {
      xpu_fake_nccl_slot& me = op.comm->seg->slots[op.comm->rank];
      Store(&me.coll_step, static_cast<uint64_t>(2 * (op.comm->nranks - 1)));
      Store(&me.coll_completed, tickets[i].seq);
    }
  }
  for (const PendingOp& op : ops) op.comm->pending.fetch_sub(1);
}

}  // namespace

ncclResult_t EnqueueOps(std::vector<PendingOp> ops) {
  if (ops.empty()) return ncclSuccess;
  fk::Stream* s = fk::ResolveStream(ops[0].stream);
  if (s == nullptr) return ncclInvalidArgument;
  for (const PendingOp& op : ops) op.comm->pending.fetch_add(1);
  const uint32_t stream_id = fk::StreamId(s);
  const int device = fk::StreamDevice(s);
  cudaError_t e = fk::Enqueue(
      s, [ops = std::move(ops), stream_id, device] { ExecuteOps(ops, stream_id, device); });
  return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

namespace {

// Live communicators: a bogus handle is rejected without being dereferenced.
std::mutex& CommMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<const ncclComm*>& Comms() {
  static auto* s = new std::unordered_set<const ncclComm*>;
  return *s;
}

}  // namespace

bool ValidComm(const ncclComm* c) {
  std::lock_guard<std::mutex> lock(CommMu());
  return Comms().count(c) != 0 && c->magic == kCommMagic;
}

namespace {

std::string Hex(const void* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = static_cast<const uint8_t*>(p)[i];
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace

void SleepUs(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

ncclResult_t InitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank) {
  if (out == nullptr || nranks < 1 || nranks > XPU_FAKE_NCCL_MAX_RANKS || rank < 0 ||
      rank >= nranks) {
    return ncclInvalidArgument;
  }
  std::string name = XPU_FAKE_NCCL_SHM_PREFIX + Hex(id.internal, 16);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return ncclSystemError;
  // Every member sizes the file itself before mapping, so no member can
  // touch the mapping beyond a shorter file (SIGBUS).
  if (ftruncate(fd, sizeof(xpu_fake_nccl_segment)) != 0) {
    close(fd);
    return ncclSystemError;
  }
  void* mem =
      mmap(nullptr, sizeof(xpu_fake_nccl_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return ncclSystemError;
  auto* seg = static_cast<xpu_fake_nccl_segment*>(mem);

  uint32_t expected = 0;
  if (__atomic_load_n(&seg->header.magic, __ATOMIC_ACQUIRE) == 0) {
    // Publish nranks before magic; a loser of the race waits for the winner.
    uint32_t claimed = 0xffffffffu;
    if (__atomic_compare_exchange_n(&seg->header.magic, &expected, claimed, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      seg->header.version = XPU_FAKE_NCCL_VERSION;
      seg->header.nranks = nranks;
      __atomic_store_n(&seg->header.magic, XPU_FAKE_NCCL_MAGIC, __ATOMIC_RELEASE);
    }
  }
  while (__atomic_load_n(&seg->header.magic, __ATOMIC_ACQUIRE) != XPU_FAKE_NCCL_MAGIC) SleepUs(50);
  if (seg->header.nranks != nranks ||
      __atomic_load_n(&seg->slots[rank].init_done, __ATOMIC_ACQUIRE) != 0) {
    munmap(mem, sizeof(xpu_fake_nccl_segment));
    return ncclInvalidUsage;  // size mismatch or rank taken twice
  }
  const fk::Config& cfg = fk::GetConfig();
  xpu_fake_nccl_slot& me = seg->slots[rank];
  me.pid = getpid();
  me.global_rank = cfg.rank >= 0 ? cfg.rank : rank;
  me.device = fk::CurrentDevice();
  __atomic_fetch_add(&seg->header.attached, 1, __ATOMIC_ACQ_REL);
  Store(&me.init_done, 1);

  auto* c = new ncclComm;
  c->rank = rank;
  c->nranks = nranks;
  c->device = me.device;
  c->id = id;
  c->shm_name = name;
  c->seg = seg;
  // Like real NCCL init, block until every member joined.
  for (int r = 0; r < nranks; ++r) WaitAtLeast(c, &seg->slots[r].init_done, 1);
  for (int r = 0; r < nranks; ++r) {
    for (int slow : cfg.slow_link_ranks) {
      if (seg->slots[r].global_rank == slow) c->link_factor = cfg.slow_link_factor;
    }
  }
  prof::CommInit(c);  // as NCCL: once the communicator is up
  {
    std::lock_guard<std::mutex> lock(CommMu());
    Comms().insert(c);
  }
  *out = c;
  return ncclSuccess;
}

// Waits for queued ops to drain, then detaches from the segment; the last
// member to detach removes it.
ncclResult_t Release(ncclComm_t comm) {
  while (comm->pending.load() > 0) SleepUs(100);
  prof::CommFinalize(comm);
  {
    std::lock_guard<std::mutex> lock(CommMu());
    Comms().erase(comm);
    comm->magic = 0;
  }
  if (__atomic_sub_fetch(&comm->seg->header.attached, 1, __ATOMIC_ACQ_REL) == 0) {
    shm_unlink(comm->shm_name.c_str());
  }
  munmap(comm->seg, sizeof(xpu_fake_nccl_segment));
  // The ncclComm object is kept: a stale handle then fails validation
  // (magic 0) instead of reading freed memory.
  return ncclSuccess;
}

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

ncclResult_t NewUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return ncclInvalidArgument;
  size_t got = 0;
  while (got < sizeof(uniqueId->internal)) {
    ssize_t r = getrandom(uniqueId->internal + got, sizeof(uniqueId->internal) - got, 0);
    if (r <= 0) return ncclSystemError;
    got += static_cast<size_t>(r);
  }
  return ncclSuccess;
}

ncclUniqueId DeriveId(const ncclUniqueId& parent, uint64_t salt) {
  ncclUniqueId child;
  for (size_t i = 0; i < sizeof(child.internal) / 8; ++i) {
    uint64_t p;
    memcpy(&p, parent.internal + i * 8, 8);
    uint64_t v = Mix(p ^ salt ^ Mix(i));
    memcpy(child.internal + i * 8, &v, 8);
  }
  return child;
}

}  // namespace xpu::fake::nccl
