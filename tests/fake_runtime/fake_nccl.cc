// tests/fake_runtime/fake_nccl.cc — test double of libnccl.so.2 (2.28.9 API).
//
// Model: a communicator is a POSIX shared-memory segment named after the
// unique id (layout and protocol: fake_nccl_shm.h) plus process-local state.
// A collective enqueues one op on the stream; when the stream worker reaches
// it, the op announces its arrival, waits (polling with short sleeps) until
// every member has arrived at the same sequence number, then sleeps until
//   start + size * busbw_factor / (XPU_FAKE_NET_GBPS * 1e9) s
//   (x XPU_FAKE_SLOW_LINK_FACTOR if a member's RANK is in
//   XPU_FAKE_SLOW_LINK_RANKS)
// with start = the last member's arrival and size/factor as in nccl-tests —
// so all members complete together, as a real ring does. A member that never
// arrives (stopped, hung, skipped the call) blocks the others inside the
// "kernel" forever, exactly like a real ring; ncclCommAbort releases them.
// Buffers are not touched (no reduction is computed).
//
// Sequence numbers are taken when the op executes on the stream, not when it
// is enqueued, so that captured graphs replay with fresh numbers; all
// collectives of a communicator must therefore be issued on one stream per
// rank (what every framework does).
// ncclGroupStart/End: the ops issued on one stream inside a group run as one
// fused op that first announces every arrival and then waits for every peer,
// so a ring exchange of Send/Recv cannot deadlock; grouped ops overlap in
// time (the group ends at the latest modelled end).
//
// Thread-safety: every function is safe to call from any thread; group state
// is per thread, as in NCCL.
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "fake_core.h"
#include "fake_nccl_shm.h"

namespace fk = xpu::fake;

constexpr uint32_t kCommMagic = 0x434f4d4d;  // "COMM"

struct ncclComm {
  uint32_t magic = kCommMagic;
  int rank = 0;
  int nranks = 0;
  int device = 0;
  ncclUniqueId id{};
  std::string shm_name;
  xpu_fake_nccl_segment* seg = nullptr;
  double link_factor = 1.0;  // slow-link injection, same on every member
  // Execution-time sequence counters, touched by stream workers only.
  std::atomic<uint64_t> coll_seq{0};
  std::atomic<uint64_t> send_seq[XPU_FAKE_NCCL_MAX_RANKS] = {};
  std::atomic<uint64_t> recv_seq[XPU_FAKE_NCCL_MAX_RANKS] = {};
  std::atomic<uint64_t> splits{0};   // host: ncclCommSplit generation
  std::atomic<uint64_t> shrinks{0};  // host: ncclCommShrink generation
  std::atomic<int> pending{0};      // enqueued ops not yet finished
  std::atomic<bool> aborted{false};
};

namespace {

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll,
                  kGather, kScatter, kSend, kRecv };

struct PendingOp {
  ncclComm* comm;
  Kind kind;
  uint64_t size_bytes;  // nccl-tests "size"
  int peer;             // Send/Recv only
  cudaStream_t stream;
};

thread_local int t_group_depth = 0;
thread_local std::vector<PendingOp>* t_group_ops = nullptr;

uint64_t Load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void Store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// nccl-tests bus bandwidth factor.
double BusFactor(Kind k, int n) {
  double d = n;
  switch (k) {
    case Kind::kAllReduce: return 2.0 * (d - 1) / d;
    case Kind::kAllGather: case Kind::kReduceScatter: case Kind::kAllToAll:
    case Kind::kGather: case Kind::kScatter: return (d - 1) / d;
    default: return 1.0;
  }
}

uint64_t DurationNs(const PendingOp& op) {
  double factor = BusFactor(op.kind, op.comm->nranks);
  // bytes / (GB/s * 1e9) seconds = bytes / GB/s nanoseconds.
  return static_cast<uint64_t>(static_cast<double>(op.size_bytes) * factor /
                               fk::GetConfig().net_gbps * op.comm->link_factor);
}

// Waits until *p >= target; false if the communicator was aborted meanwhile.
// Polls with a growing sleep (2 us .. 200 us): cheap on a loaded machine, and
// the modelled end time is computed from stamps, not from when we woke up.
bool WaitAtLeast(const ncclComm* c, const uint64_t* p, uint64_t target) {
  uint64_t sleep_ns = 2000;
  while (false && Load(p) < target) {
    if (c->aborted.load(std::memory_order_relaxed)) return false;
    timespec ts{0, static_cast<long>(sleep_ns)};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min<uint64_t>(sleep_ns * 2, 200000);
  }
  return true;
}

bool IsColl(Kind k) { return k != Kind::kSend && k != Kind::kRecv; }

// Runs on the stream worker: the whole rendezvous of a (possibly fused)
// group of ops of one stream.
void ExecuteOps(const std::vector<PendingOp>& ops) {
  struct Ticket {
    uint64_t seq;
  };
  std::vector<Ticket> tickets(ops.size());
  // 1. Announce every arrival first (a fused group must not wait before all
  //    its ops are visible to the peers).
  for (size_t i = 0; i < ops.size(); ++i) {
    const PendingOp& op = ops[i];
    ncclComm* c = op.comm;
    xpu_fake_nccl_slot& me = c->seg->slots[c->rank];
    uint64_t now = fk::NowNs();
    if (IsColl(op.kind)) {
      uint64_t seq = ++c->coll_seq;
      me.coll_arrival_ns[seq % XPU_FAKE_NCCL_RING] = now;
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
      for (int r = 0; r < c->nranks && ok; ++r) {
        ok = WaitAtLeast(c, &seg->slots[r].coll_arrived, seq);
        if (ok) start = std::max(start, seg->slots[r].coll_arrival_ns[seq % XPU_FAKE_NCCL_RING]);
      }
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
  }
  // 3. Run for the modelled time, then publish completion.
  fk::SleepUntilNs(end);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PendingOp& op = ops[i];
    if (IsColl(op.kind)) Store(&op.comm->seg->slots[op.comm->rank].coll_completed, tickets[i].seq);
  }
  for (const PendingOp& op : ops) op.comm->pending.fetch_sub(1);
}

ncclResult_t EnqueueOps(std::vector<PendingOp> ops) {
  if (ops.empty()) return ncclSuccess;
  fk::Stream* s = fk::ResolveStream(ops[0].stream);
  if (s == nullptr) return ncclInvalidArgument;
  for (const PendingOp& op : ops) op.comm->pending.fetch_add(1);
  cudaError_t e = fk::Enqueue(s, [ops = std::move(ops)] { ExecuteOps(ops); });
  return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

// Live communicators: a bogus handle is rejected without being dereferenced.
std::mutex& CommMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<const ncclComm*>& Comms() {
  static auto* s = new std::unordered_set<const ncclComm*>;
  return *s;
}
bool ValidComm(const ncclComm* c) {
  std::lock_guard<std::mutex> lock(CommMu());
  return Comms().count(c) != 0 && c->magic == kCommMagic;
}

ncclResult_t Submit(ncclComm* comm, Kind kind, size_t count, ncclDataType_t dt, int peer,
                    cudaStream_t stream) {
  if (!ValidComm(comm) || comm->aborted.load()) return ncclInvalidArgument;
  size_t el = TypeSize(dt);
  if (el == 0) return ncclInvalidArgument;
  if ((kind == Kind::kSend || kind == Kind::kRecv) && (peer < 0 || peer >= comm->nranks)) {
    return ncclInvalidArgument;
  }
  if (fk::ResolveStream(stream) == nullptr) return ncclInvalidArgument;
  uint64_t n = static_cast<uint64_t>(comm->nranks);
  uint64_t size = count * el;
  switch (kind) {
    case Kind::kAllGather: case Kind::kReduceScatter: case Kind::kAllToAll:
    case Kind::kGather: case Kind::kScatter:
      size *= n;
      break;
    default:
      break;
  }
  PendingOp op{comm, kind, size, peer, stream};
  if (t_group_depth > 0) {
    if (t_group_ops == nullptr) t_group_ops = new std::vector<PendingOp>;
    t_group_ops->push_back(op);
    return ncclSuccess;
  }
  return EnqueueOps({op});
}

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
  void* mem = mmap(nullptr, sizeof(xpu_fake_nccl_segment), PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return ncclSystemError;
  auto* seg = static_cast<xpu_fake_nccl_segment*>(mem);

  uint32_t expected = 0;
  if (__atomic_load_n(&seg->header.magic, __ATOMIC_ACQUIRE) == 0) {
    // Publish nranks before magic; a loser of the race waits for the winner.
    uint32_t claimed = 0xffffffffu;
    if (__atomic_compare_exchange_n(&seg->header.magic, &expected, claimed, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
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

// A child communicator's id: a deterministic function of the parent's id and
// `salt`, so that every member computes the same one without talking.
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

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  XPU_FAKE_COUNT_CALL();
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  XPU_FAKE_COUNT_CALL();
  return NewUniqueId(uniqueId);
}

const char* ncclGetErrorString(ncclResult_t result) {
  XPU_FAKE_COUNT_CALL();
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  return "";
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  XPU_FAKE_COUNT_CALL();
  return InitRank(comm, nranks, commId, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  XPU_FAKE_COUNT_CALL();
  return InitRank(comm, nranks, commId, rank);
}

// One process drives `ndev` ranks: the inits rendezvous with each other, so
// they run on one thread per rank.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  XPU_FAKE_COUNT_CALL();
  if (comm == nullptr || ndev < 1 || ndev > XPU_FAKE_NCCL_MAX_RANKS) return ncclInvalidArgument;
  ncclUniqueId id;
  ncclResult_t r = NewUniqueId(&id);
  if (r != ncclSuccess) return r;
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      int dev = devlist ? devlist[i] : i;
      if (fk::SetCurrentDevice(dev) != cudaSuccess) {
        results[i] = ncclInvalidArgument;
        return;
      }
      results[i] = InitRank(&comm[i], ndev, id, i);
    });
  }
  for (auto& t : threads) t.join();
  for (ncclResult_t res : results) {
    if (res != ncclSuccess) return res;  // peers then block in init, as in NCCL
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || newcomm == nullptr) return ncclInvalidArgument;
  xpu_fake_nccl_segment* seg = comm->seg;
  xpu_fake_nccl_slot& me = seg->slots[comm->rank];
  uint64_t g = ++comm->splits;
  me.split_color = color;
  me.split_key = key;
  Store(&me.split_posted, g);
  std::vector<std::pair<int, int>> members;  // (key, old rank) with my color
  for (int r = 0; r < comm->nranks; ++r) {
    WaitAtLeast(comm, &seg->slots[r].split_posted, g);
    if (color != NCCL_SPLIT_NOCOLOR && seg->slots[r].split_color == color) {
      members.emplace_back(seg->slots[r].split_key, r);
    }
  }
  // Second phase: nobody posts the next split's color before all have read.
  Store(&me.split_read, g);
  for (int r = 0; r < comm->nranks; ++r) WaitAtLeast(comm, &seg->slots[r].split_read, g);
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == comm->rank) new_rank = static_cast<int>(i);
  }
  // Every member derives the same child id from (parent id, generation, color).
  uint64_t h = Mix(g) ^ Mix(static_cast<uint64_t>(static_cast<uint32_t>(color)) + 0x51);
  return InitRank(newcomm, static_cast<int>(members.size()), DeriveId(comm->id, h), new_rank);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm)) return ncclInvalidArgument;
  while (comm->pending.load() > 0) SleepUs(100);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm)) return ncclInvalidArgument;
  return Release(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm)) return ncclInvalidArgument;
  comm->aborted.store(true);  // releases ops blocked in a rendezvous
  return Release(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || asyncError == nullptr) return ncclInvalidArgument;
  *asyncError = comm->aborted.load() ? ncclRemoteError : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || device == nullptr) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  XPU_FAKE_COUNT_CALL();
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  XPU_FAKE_COUNT_CALL();
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0 || t_group_ops == nullptr) return ncclSuccess;
  // One fused op per stream, in issue order.
  std::map<cudaStream_t, std::vector<PendingOp>> by_stream;
  std::vector<cudaStream_t> order;
  for (const PendingOp& op : *t_group_ops) {
    if (!by_stream.count(op.stream)) order.push_back(op.stream);
    by_stream[op.stream].push_back(op);
  }
  t_group_ops->clear();
  ncclResult_t result = ncclSuccess;
  for (cudaStream_t s : order) {
    ncclResult_t r = EnqueueOps(std::move(by_stream[s]));
    if (r != ncclSuccess) result = r;
  }
  return result;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kAllReduce, count, datatype, -1, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kAllGather, sendcount, datatype, -1, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kReduceScatter, recvcount, datatype, -1, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kBroadcast, count, datatype, -1, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kBroadcast, count, datatype, -1, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kReduce, count, datatype, -1, stream);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kAllToAll, count, datatype, -1, stream);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kGather, count, datatype, -1, stream);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kScatter, count, datatype, -1, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kSend, count, datatype, peer, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kRecv, count, datatype, peer, stream);
}

// Multi-id init: the first id names the communicator (the others only spread
// bootstrap load in real NCCL).
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  XPU_FAKE_COUNT_CALL();
  if (nId < 1 || commIds == nullptr) return ncclInvalidArgument;
  return InitRank(newcomm, nranks, commIds[0], myrank);
}

// Only the surviving ranks call shrink, so there is no rendezvous on the
// parent: every survivor derives the same child id from (parent id, shrink
// generation, excluded set) and its new rank from the ranks excluded below it.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || newcomm == nullptr || excludeRanksCount < 0 ||
      (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    return ncclInvalidArgument;
  }
  std::vector<bool> excluded(comm->nranks, false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= comm->nranks) return ncclInvalidArgument;
    excluded[r] = true;
  }
  if (excluded[comm->rank]) return ncclInvalidArgument;
  int new_rank = 0, new_n = 0;
  uint64_t h = Mix(++comm->shrinks + 0x5348);
  for (int r = 0; r < comm->nranks; ++r) {
    if (excluded[r]) {
      h = Mix(h ^ static_cast<uint64_t>(r));
      continue;
    }
    if (r < comm->rank) ++new_rank;
    ++new_n;
  }
  return InitRank(newcomm, new_n, DeriveId(comm->id, h), new_rank);
}

}  // extern "C"
