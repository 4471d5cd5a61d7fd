// hook/ring/ring_writer.cc — see ring_writer.h. Lock-free multi-producer ring
// on shared memory; the reserve/commit protocol is the one ring.h specifies.
#include "hook/ring/ring_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hook/ring/ring_fault_guard.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t AlignPage(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }

void CopyField(char* dst, size_t cap, const std::string& s) {
  size_t n = s.size() < cap - 1 ? s.size() : cap - 1;  // always NUL-terminated
  memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// A ring file is only as safe as its directory: another user who can write
// there could replace or (with write access to the file) truncate it.
// Regular files cannot be sealed, so the directory must be ours, a real
// directory (no symlink), and writable by nobody else. What its owner or
// root may still do, truncate it, costs records but not the process
// (ring_fault_guard.h).
bool PrivateDirectory(const std::string& dir, std::string* why) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    *why = dir + ": " + strerror(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = dir + " is not a directory (or is a symlink)";
    return false;
  }
  if (st.st_uid != geteuid()) {
    *why = dir + " belongs to another user";
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    *why = dir + " is writable by group or others";
    return false;
  }
  return true;
}

// Seals a memfd against shrinking and growing, and the seals themselves, so
// that nobody holding the descriptor (the daemon, root through /proc) can
// take pages away from under the hook's mapping.
bool SealRing(int fd) {
  return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0;
}

}  // namespace

bool IsEmptyRingFile(const std::string& path, int32_t pid) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  xpu_ring_header_v1 h;
  bool empty = pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
               h.magic == XPU_RING_MAGIC && h.pid == pid && h.write_index == 0 && h.sig_count == 0;
  close(fd);
  return empty;
}

RingLayout ComputeLayout(uint32_t ring_capacity, uint32_t sig_capacity, uint64_t str_capacity) {
  RingLayout l;
  l.ring_capacity = ring_capacity;
  l.sig_capacity = sig_capacity;
  l.str_capacity = AlignPage(str_capacity);
  l.ring_offset = XPU_RING_HEADER_SIZE;
  l.sig_offset = AlignPage(l.ring_offset + uint64_t{ring_capacity} * sizeof(xpu_record_v1));
  l.str_offset = AlignPage(l.sig_offset + uint64_t{sig_capacity} * sizeof(xpu_signature_v1));
  l.file_size = l.str_offset + l.str_capacity;
  return l;
}

RingWriter::~RingWriter() {
  if (guarded_) UnguardRingMapping(base_);
  if (owned_ && base_ != nullptr) munmap(base_, layout_.file_size);
  if (fd_ >= 0) close(fd_);
}

bool RingWriter::Create(const RingLayout& layout, const RingIdentity& id, const std::string& dir,
                        std::string* error) {
  int fd = -1;
  bool memfd = dir.empty();
  if (!memfd && !PrivateDirectory(dir, &file_refused_)) {
    // Not safe to share: keep tracing into a sealed memfd instead (counted
    // in XPU_CNT_RING_FILE_REFUSED once the header exists).
    memfd = true;
  }
  if (memfd) {
    fd = memfd_create("xpu-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
      *error = std::string("memfd_create: ") + strerror(errno);
      return false;
    }
  } else {
    // O_EXCL: never reuse (and corrupt) a file a previous process with the
    // same pid left behind for post-mortem reading; take a suffix instead.
    // An existing file that holds nothing (no record, no signature) is the
    // ring of an earlier image of this very process (exec keeps the pid:
    // shells, launcher shims) and is replaced rather than kept. O_NOFOLLOW:
    // a planted symlink is never followed.
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      std::string p = dir + "/xpu-ring-" + std::to_string(id.pid) +
                      (attempt == 0 ? "" : "." + std::to_string(attempt)) + ".bin";
      fd = open(p.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd >= 0) {
        path_ = p;
      } else if (errno != EEXIST) {
        break;
      } else if (IsEmptyRingFile(p, id.pid)) {
        unlink(p.c_str());
        --attempt;  // same name again; bounded: an unlinked name is free unless raced
        if (++replaced_ > 4) break;
      }
    }
    if (fd < 0) {
      *error = "open " + dir + ": " + strerror(errno);
      return false;
    }
  }
  if (ftruncate(fd, static_cast<off_t>(layout.file_size)) != 0) {
    *error = std::string("ftruncate: ") + strerror(errno);
    close(fd);
    return false;
  }
  // Sealed before the descriptor leaves this process: the shrink seal the
  // daemon relies on is in place before anyone else can map the file.
  const bool sealed = memfd && SealRing(fd);
  void* p = mmap(nullptr, layout.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *error = std::string("mmap: ") + strerror(errno);
    close(fd);
    return false;
  }
  fd_ = fd;
  owned_ = true;
  sealed_ = sealed;
  Adopt(p, layout, id);
  // A ring file cannot be sealed: its owner or root may still truncate it.
  // The guard answers the SIGBUS that would follow (ring_fault_guard.h).
  if (!memfd) {
    guarded_ = GuardRingMapping(p, layout.file_size, fd);
    if (!guarded_) Count(XPU_CNT_INTERNAL);
  }
  if (memfd && !sealed) Count(XPU_CNT_RING_NOT_SEALED);
  if (!file_refused_.empty()) Count(XPU_CNT_RING_FILE_REFUSED);
  return true;
}

void RingWriter::Adopt(void* base, const RingLayout& layout, const RingIdentity& id) {
  layout_ = layout;
  base_ = static_cast<uint8_t*>(base);
  header_ = reinterpret_cast<xpu_ring_header_v1*>(base_);
  slots_ = reinterpret_cast<xpu_record_v1*>(base_ + layout.ring_offset);
  sigs_ = reinterpret_cast<xpu_signature_v1*>(base_ + layout.sig_offset);
  arena_ = reinterpret_cast<char*>(base_ + layout.str_offset);
  mask_ = uint64_t{layout.ring_capacity} - 1;
  Format(id);
}

void RingWriter::Format(const RingIdentity& id) {
  xpu_ring_header_v1* h = header_;
  h->abi_version = XPU_RECORD_ABI_VERSION;
  h->header_size = XPU_RING_HEADER_SIZE;
  h->record_size = sizeof(xpu_record_v1);
  h->signature_size = sizeof(xpu_signature_v1);
  h->ring_capacity = layout_.ring_capacity;
  h->sig_capacity = layout_.sig_capacity;
  h->ring_offset = layout_.ring_offset;
  h->sig_offset = layout_.sig_offset;
  h->str_offset = layout_.str_offset;
  h->str_capacity = layout_.str_capacity;
  h->file_size = layout_.file_size;
  h->pid = id.pid;
  h->rank = id.rank;
  h->local_rank = id.local_rank;
  h->world_size = id.world_size;
  h->local_world_size = id.local_world_size;
  h->device = -1;
  h->created_ns = id.created_ns;
  h->start_time_ticks = id.start_time_ticks;
  CopyField(h->job, sizeof(h->job), id.job);
  CopyField(h->host, sizeof(h->host), id.host);
  CopyField(h->job_name, sizeof(h->job_name), id.job_name);
  h->timing_policy = id.timing_policy;
  h->producer_state = XPU_PRODUCER_ACTIVE;
  // Magic last: a reader that sees it sees a complete header.
  __atomic_store_n(&h->magic, XPU_RING_MAGIC, __ATOMIC_RELEASE);
}

bool RingWriter::RemoveFileIfUnused() {
  if (path_.empty() || header_ == nullptr) return false;
  if (__atomic_load_n(&header_->write_index, __ATOMIC_ACQUIRE) != 0 ||
      __atomic_load_n(&header_->sig_count, __ATOMIC_ACQUIRE) != 0) {
    return false;
  }
  return unlink(path_.c_str()) == 0;
}

void RingWriter::SetDevice(int32_t device) {
  int32_t expected = -1;
  __atomic_compare_exchange_n(&header_->device, &expected, device, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
}

bool RingWriter::Write(const xpu_record_v1& rec) {
  xpu_ring_header_v1* h = header_;
  uint64_t p = __atomic_load_n(&h->write_index, __ATOMIC_RELAXED);
  for (;;) {
    // Acquire pairs with the consumer's release of read_index: once we see
    // it, the consumer is done copying every slot below it.
    uint64_t r = __atomic_load_n(&h->read_index, __ATOMIC_ACQUIRE);
    if (p - r >= layout_.ring_capacity) {
      // Re-read write_index: if another producer moved it, our view of p is
      // stale and the ring may not be full from our position's standpoint.
      uint64_t now = __atomic_load_n(&h->write_index, __ATOMIC_RELAXED);
      if (now == p) {
        __atomic_fetch_add(&h->counters[XPU_CNT_DROPPED_FULL], 1, __ATOMIC_RELAXED);
        return false;
      }
      p = now;
      continue;
    }
    if (__atomic_compare_exchange_n(&h->write_index, &p, p + 1, true, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
      break;
    }
    // p was reloaded by the failed CAS.
  }
  xpu_record_v1* slot = &slots_[p & mask_];
  // Payload (bytes 4..31) first, then the commit word with release.
  memcpy(reinterpret_cast<uint8_t*>(slot) + 4, reinterpret_cast<const uint8_t*>(&rec) + 4,
         sizeof(xpu_record_v1) - 4);
  __atomic_store_n(&slot->commit, static_cast<uint32_t>(p + 1), __ATOMIC_RELEASE);
  __atomic_fetch_add(&h->counters[XPU_CNT_RECORDS_WRITTEN], 1, __ATOMIC_RELAXED);
  return true;
}

uint32_t RingWriter::AppendString(const char* s, size_t len) {
  xpu_ring_header_v1* h = header_;
  uint64_t used = __atomic_load_n(&h->str_used, __ATOMIC_RELAXED);
  for (;;) {
    if (len > layout_.str_capacity || used > layout_.str_capacity - len ||
        used + len > UINT32_MAX) {
      __atomic_fetch_add(&h->counters[XPU_CNT_STR_ARENA_FULL], 1, __ATOMIC_RELAXED);
      return UINT32_MAX;
    }
    // Reserving and publishing in one CAS would expose bytes before they
    // are written; readers never read the arena except through a published
    // signature's (offset, length), whose commit is release-stored after the
    // bytes, so advancing str_used first is safe for them.
    if (__atomic_compare_exchange_n(&h->str_used, &used, used + len, true, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED)) {
      break;
    }
  }
  memcpy(arena_ + used, s, len);
  return static_cast<uint32_t>(used);
}

void RingWriter::PublishSignature(uint32_t id, const xpu_signature_v1& sig) {
  if (id == 0 || id >= layout_.sig_capacity) return;
  xpu_signature_v1* e = &sigs_[id];
  memcpy(reinterpret_cast<uint8_t*>(e) + 4, reinterpret_cast<const uint8_t*>(&sig) + 4,
         sizeof(xpu_signature_v1) - 4);
  __atomic_store_n(&e->commit, id, __ATOMIC_RELEASE);
  // sig_count is a hint (highest id + 1): raise it monotonically.
  uint64_t want = uint64_t{id} + 1;
  uint64_t cur = __atomic_load_n(&header_->sig_count, __ATOMIC_RELAXED);
  while (cur < want && !__atomic_compare_exchange_n(&header_->sig_count, &cur, want, true,
                                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
  }
}

}  // namespace xpu::hook
