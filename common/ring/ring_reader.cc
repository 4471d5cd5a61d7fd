#include "common/ring/ring_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/record/op_kind.h"
#include "common/ring/shm_guard.h"

namespace xpu::ring {
namespace {

constexpr uint32_t kMaxSignatureScanPerCall = 65536;
constexpr uint64_t kMaxNameLen = 64 * 1024;

// True when [off, off+len) lies inside [0, size) without overflow.
bool RangeInside(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

// True when the ranges [a, a+alen) and [b, b+blen) intersect.
bool Overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  if (alen == 0 || blen == 0) return false;
  return a < b + blen && b < a + alen;
}

std::string FixedString(const char* p, size_t max) { return SanitizeName(p, strnlen(p, max)); }

}  // namespace

std::string SanitizeName(const char* data, size_t len) {
  std::string out(data, len);
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) c = '?';
  }
  return out;
}

absl::Status ValidateRingHeader(const xpu_ring_header_v1& h, uint64_t actual_size,
                                uint64_t max_file_size, RingLayout* layout) {
  if (actual_size < XPU_RING_HEADER_SIZE) {
    return absl::InvalidArgumentError(
        absl::StrCat("file of ", actual_size, " bytes is smaller than a ring header"));
  }
  if (h.magic != XPU_RING_MAGIC) return absl::InvalidArgumentError("bad ring magic");
  if (h.abi_version != XPU_RECORD_ABI_VERSION) {
    return absl::FailedPreconditionError(
        absl::StrCat("unsupported ring ABI version ", h.abi_version));
  }
  if (h.header_size != XPU_RING_HEADER_SIZE) return absl::InvalidArgumentError("bad header_size");
  if (h.record_size != sizeof(xpu_record_v1)) return absl::InvalidArgumentError("bad record_size");
  if (h.signature_size != sizeof(xpu_signature_v1))
    return absl::InvalidArgumentError("bad signature_size");
  if (h.ring_capacity == 0 || (h.ring_capacity & (h.ring_capacity - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring_capacity ", h.ring_capacity, " is not a power of two"));
  }
  if (h.sig_capacity < 2) return absl::InvalidArgumentError("sig_capacity < 2");
  if (h.file_size > actual_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("header file_size ", h.file_size, " exceeds the real size ", actual_size));
  }
  if (h.file_size > max_file_size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ring of ", h.file_size, " bytes exceeds the limit ", max_file_size));
  }
  const uint64_t ring_bytes = static_cast<uint64_t>(h.ring_capacity) * sizeof(xpu_record_v1);
  const uint64_t sig_bytes = static_cast<uint64_t>(h.sig_capacity) * sizeof(xpu_signature_v1);
  const uint64_t fs = h.file_size;
  if (!RangeInside(h.ring_offset, ring_bytes, fs))
    return absl::InvalidArgumentError("record slots outside the file");
  if (!RangeInside(h.sig_offset, sig_bytes, fs))
    return absl::InvalidArgumentError("signature table outside the file");
  if (!RangeInside(h.str_offset, h.str_capacity, fs))
    return absl::InvalidArgumentError("string arena outside the file");
  // Atomics need natural alignment; ring.h promises page alignment.
  if (h.ring_offset % 64 != 0 || h.sig_offset % 64 != 0)
    return absl::InvalidArgumentError("misaligned section");
  if (h.ring_offset < XPU_RING_HEADER_SIZE || h.sig_offset < XPU_RING_HEADER_SIZE ||
      (h.str_capacity > 0 && h.str_offset < XPU_RING_HEADER_SIZE)) {
    return absl::InvalidArgumentError("section overlaps the header");
  }
  if (Overlaps(h.ring_offset, ring_bytes, h.sig_offset, sig_bytes) ||
      Overlaps(h.ring_offset, ring_bytes, h.str_offset, h.str_capacity) ||
      Overlaps(h.sig_offset, sig_bytes, h.str_offset, h.str_capacity)) {
    return absl::InvalidArgumentError("sections overlap");
  }
  if (layout != nullptr) {
    layout->ring_capacity = h.ring_capacity;
    layout->sig_capacity = h.sig_capacity;
    layout->ring_offset = h.ring_offset;
    layout->sig_offset = h.sig_offset;
    layout->str_offset = h.str_offset;
    layout->str_capacity = h.str_capacity;
    layout->file_size = h.file_size;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::FromPath(const std::string& path,
                                                                 const RingReaderOptions& options) {
  const int fd = open(path.c_str(), (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("open ", path, ": ", strerror(errno)));
  auto reader = FromFd(fd, options);
  close(fd);
  return reader;
}

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::FromFd(int fd,
                                                               const RingReaderOptions& options) {
  InstallShmFaultHandler();
  // Seal first so the size validated below cannot shrink under the mapping.
  bool sealed = false;
  if (!options.read_only) {
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) sealed = true;
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals >= 0 && (seals & F_SEAL_SHRINK)) sealed = true;
  }
  struct stat st;
  if (fstat(fd, &st) != 0)
    return absl::InvalidArgumentError(absl::StrCat("fstat: ", strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError("ring is not a regular file or memfd");
  const uint64_t actual_size = static_cast<uint64_t>(st.st_size);
  if (actual_size < XPU_RING_HEADER_SIZE) {
    return absl::InvalidArgumentError(
        absl::StrCat("file of ", actual_size, " bytes is smaller than a ring header"));
  }
  // Copy the header out of the file and validate the copy: the producer may
  // change the shared bytes at any time.
  xpu_ring_header_v1 h;
  const ssize_t n = pread(fd, &h, sizeof(h), 0);
  if (n != static_cast<ssize_t>(sizeof(h)))
    return absl::InvalidArgumentError("short read of the ring header");
  RingLayout layout;
  absl::Status st_valid = ValidateRingHeader(h, actual_size, options.max_file_size, &layout);
  if (!st_valid.ok()) return st_valid;
  const int prot = options.read_only ? PROT_READ : (PROT_READ | PROT_WRITE);
  void* base = mmap(nullptr, layout.file_size, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return absl::InternalError(absl::StrCat("mmap: ", strerror(errno)));
  RingIdentity id;
  id.job = FixedString(h.job, sizeof(h.job));
  id.job_name = FixedString(h.job_name, sizeof(h.job_name));
  id.host = FixedString(h.host, sizeof(h.host));
  id.pid = h.pid;
  id.rank = h.rank;
  id.local_rank = h.local_rank;
  id.world_size = h.world_size;
  id.local_world_size = h.local_world_size;
  id.device = h.device;
  id.created_ns = h.created_ns;
  id.start_time_ticks = h.start_time_ticks;
  std::unique_ptr<RingReader> reader(
      new RingReader(static_cast<uint8_t*>(base), layout.file_size, layout, id, options));
  reader->shrink_sealed_ = sealed;
  return reader;
}

RingReader::RingReader(uint8_t* base, uint64_t map_size, const RingLayout& layout,
                       const RingIdentity& identity, const RingReaderOptions& options)
    : base_(base),
      map_size_(map_size),
      layout_(layout),
      identity_(identity),
      options_(options),
      header_(reinterpret_cast<xpu_ring_header_v1*>(base)) {
  const uint64_t w = LoadWriteIndex();
  if (options_.read_only) {
    cursor_ = w > layout_.ring_capacity ? w - layout_.ring_capacity : 0;
  } else {
    const uint64_t r = Load64(&header_->read_index, false);
    // A read_index beyond write_index is garbage; start from what is there.
    cursor_ = r <= w ? r : w;
  }
}

RingReader::~RingReader() { munmap(base_, map_size_); }

uint64_t RingReader::Load64(const uint64_t* p, bool acquire) const {
  uint64_t v = 0;
  if (faulted_ || !(acquire ? ShmLoadAcquire64(p, &v) : ShmLoadRelaxed64(p, &v))) {
    faulted_ = true;
    return 0;
  }
  return v;
}

uint32_t RingReader::Load32(const uint32_t* p, bool acquire) const {
  uint32_t v = 0;
  if (faulted_ || !(acquire ? ShmLoadAcquire32(p, &v) : ShmLoadRelaxed32(p, &v))) {
    faulted_ = true;
    return 0;
  }
  return v;
}

bool RingReader::Copy(void* dst, const void* src, size_t n) const {
  if (faulted_ || !ShmCopy(dst, src, n)) {
    faulted_ = true;
    return false;
  }
  return true;
}

uint64_t RingReader::LoadWriteIndex() const { return Load64(&header_->write_index, true); }

bool RingReader::Drained() const {
  const uint64_t w = LoadWriteIndex();
  return faulted_ || cursor_ >= w;  // a faulted ring has nothing more to give
}

bool RingReader::CopyHeaderPage(void* dst, size_t n) const {
  return Copy(dst, base_, n < XPU_RING_HEADER_SIZE ? n : XPU_RING_HEADER_SIZE);
}

bool RingReader::ReadProfileControl(xpu_ring_profile_ctl_v1* out) const {
  auto* ctl = reinterpret_cast<xpu_ring_profile_ctl_v1*>(base_ + XPU_RING_PROFILE_OFFSET);
  const uint64_t ack = Load64(&ctl->ack, true);
  if (!Copy(out, ctl, sizeof(*out))) return false;
  out->ack = ack;
  return !faulted_;
}

bool RingReader::WriteProfileRequest(uint32_t req_id, uint32_t duration_ms, uint32_t max_records,
                                     uint64_t now_ns) {
  if (options_.read_only || faulted_) return false;
  auto* ctl = reinterpret_cast<xpu_ring_profile_ctl_v1*>(base_ + XPU_RING_PROFILE_OFFSET);
  const bool ok = ShmStoreRelaxed32(&ctl->req_duration_ms, duration_ms) &&
                  ShmStoreRelaxed32(&ctl->req_max_records, max_records) &&
                  ShmStoreRelaxed64(&ctl->req_ns, now_ns) &&
                  ShmStoreRelease32(&ctl->req_id, req_id);
  if (!ok) faulted_ = true;
  return ok;
}

RingLiveState RingReader::ReadLiveState() const {
  RingLiveState s;
  s.write_index = Load64(&header_->write_index, true);
  s.read_index = Load64(&header_->read_index, false);
  s.sig_count = Load64(&header_->sig_count, false);
  s.str_used = Load64(&header_->str_used, true);
  s.heartbeat_ns = Load64(&header_->heartbeat_ns, false);
  s.producer_state = Load32(&header_->producer_state, false);
  s.timing_policy = Load32(&header_->timing_policy, false);
  for (int i = 0; i < XPU_CNT_MAX; ++i) s.counters[i] = Load64(&header_->counters[i], false);
  return s;
}

bool RingReader::ValidateRecord(const xpu_record_v1& rec) {
  if (rec.sig_id == 0 || rec.sig_id >= layout_.sig_capacity) return false;
  if ((rec.flags & ~kKnownRecordFlags) != 0) return false;
  if ((rec.flags & XPU_REC_TIMED) && (rec.flags & XPU_REC_NOT_TIMED)) return false;
  if (bad_sigs_.count(rec.sig_id)) return false;
  if (sigs_.count(rec.sig_id) == 0) {
    // The hook publishes a signature before any record that uses it, and the
    // acquire load of the record's commit makes it visible: read it now.
    if (!TryReadSignature(rec.sig_id)) return false;
  }
  return true;
}

size_t RingReader::Poll(uint64_t now_ns, size_t max_records, std::vector<RingRecord>* out) {
  const uint64_t cap = layout_.ring_capacity;
  const uint64_t w = LoadWriteIndex();
  size_t appended = 0;
  if (faulted_) return 0;
  if (w < cursor_) {
    // write_index only grows; a producer that moves it back is broken.
    ++counters_.index_regressions;
    return 0;
  }
  if (w - cursor_ > cap) {
    // The producer reserved positions more than one lap ahead of us: those
    // slots were overwritten. Jump to the oldest position still in the ring.
    counters_.records_lapped += (w - cap) - cursor_;
    cursor_ = w - cap;
    stalled_ = false;
  }
  const auto* slots = reinterpret_cast<const xpu_record_v1*>(base_ + layout_.ring_offset);
  while (cursor_ < w && appended < max_records) {
    const xpu_record_v1* slot = &slots[cursor_ & (cap - 1)];
    const uint32_t expected = static_cast<uint32_t>(cursor_ + 1);
    const uint32_t commit = Load32(&slot->commit, true);
    if (faulted_) break;
    if (commit == expected) {
      xpu_record_v1 copy;
      if (!Copy(&copy, slot, sizeof(copy))) break;
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint32_t recheck = Load32(&slot->commit, false);
      if (faulted_) break;
      if (recheck != expected) {
        ++counters_.records_lapped;  // rewritten while we copied
      } else {
        copy.commit = 0;
        if (ValidateRecord(copy)) {
          out->push_back(RingRecord{cursor_, copy});
          ++appended;
          ++counters_.records_read;
        } else {
          ++counters_.records_corrupt;
        }
      }
      ++cursor_;
      stalled_ = false;
      continue;
    }
    // A later lap of the producer already reused this slot.
    const int32_t ahead = static_cast<int32_t>(commit - expected);
    if (commit != 0 && ahead > 0 && static_cast<uint64_t>(ahead) % cap == 0) {
      ++counters_.records_lapped;
      ++cursor_;
      stalled_ = false;
      continue;
    }
    // In flight, or abandoned by a crashed producer. A stall that began
    // while write_index was already past this position keeps its clock, so a
    // run of abandoned slots costs one grace period, not one per slot.
    if (!stalled_ || cursor_ >= stall_write_index_) {
      stalled_ = true;
      stall_since_ns_ = now_ns;
      stall_write_index_ = w;
    }
    const uint64_t waited = now_ns >= stall_since_ns_ ? now_ns - stall_since_ns_ : 0;
    if (waited >= options_.abandon_grace_ns) {
      ++counters_.records_abandoned;
      ++cursor_;
      continue;
    }
    break;
  }
  if (!options_.read_only && !faulted_ && !ShmStoreRelease64(&header_->read_index, cursor_))
    faulted_ = true;
  return appended;
}

bool RingReader::TryReadSignature(uint32_t id) {
  if (id == 0 || id >= layout_.sig_capacity) return false;
  if (sigs_.count(id)) return true;
  if (bad_sigs_.count(id)) return false;
  const auto* table = reinterpret_cast<const xpu_signature_v1*>(base_ + layout_.sig_offset);
  const xpu_signature_v1* entry = &table[id];
  const uint32_t commit = Load32(&entry->commit, true);
  if (commit == 0) return false;  // not published yet (or faulted)
  SignatureInfo info;
  if (!Copy(&info.sig, entry, sizeof(info.sig))) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint32_t recheck = Load32(&entry->commit, false);
  if (faulted_) return false;
  if (info.sig.commit != id || recheck != id || !record::IsKnownOpKind(info.sig.kind)) {
    bad_sigs_.insert(id);
    ++counters_.signatures_corrupt;
    return false;
  }
  const uint64_t len = info.sig.name_len;
  if (len <= XPU_SIG_NAME_INLINE) {
    info.name = SanitizeName(info.sig.name, strnlen(info.sig.name, len));
  } else {
    const uint64_t used =
        std::min<uint64_t>(Load64(&header_->str_used, true), layout_.str_capacity);
    std::string raw;
    if (len <= kMaxNameLen && RangeInside(info.sig.name_off, len, used)) {
      raw.resize(len);
      if (!Copy(&raw[0], base_ + layout_.str_offset + info.sig.name_off, len)) return false;
      info.name = SanitizeName(raw.data(), raw.size());
    } else {
      ++counters_.names_bad;
      info.name = SanitizeName(info.sig.name, strnlen(info.sig.name, XPU_SIG_NAME_INLINE));
    }
  }
  ++counters_.signatures_read;
  known_ids_.push_back(id);
  pending_new_.push_back(id);
  sigs_.emplace(id, std::move(info));
  return true;
}

void RingReader::PollSignatures(std::vector<SignatureInfo>* out) {
  const uint64_t hint = Load64(&header_->sig_count, false);
  const uint32_t end = static_cast<uint32_t>(std::min<uint64_t>(hint, layout_.sig_capacity));
  uint32_t scanned = 0;
  bool contiguous = true;
  for (uint32_t id = lowest_unknown_sig_;
       id < end && scanned < kMaxSignatureScanPerCall && !faulted_; ++id, ++scanned) {
    if (!sigs_.count(id) && !bad_sigs_.count(id)) TryReadSignature(id);
    const bool settled = sigs_.count(id) || bad_sigs_.count(id);
    if (contiguous && settled) {
      lowest_unknown_sig_ = id + 1;
    } else {
      contiguous = false;
    }
  }
  // Also reports signatures read on demand while validating records.
  for (uint32_t id : pending_new_) {
    auto it = sigs_.find(id);
    if (it != sigs_.end()) out->push_back(it->second);
  }
  pending_new_.clear();
}

const SignatureInfo* RingReader::signature(uint32_t id) const {
  auto it = sigs_.find(id);
  return it == sigs_.end() ? nullptr : &it->second;
}

}  // namespace xpu::ring
