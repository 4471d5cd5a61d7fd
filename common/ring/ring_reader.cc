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
    RestoreConsumerState(cursor_, w);
  }
}

uint64_t RingReaderCounters::LostTotal() const {
  uint64_t total = 0;
  for (uint64_t v : {records_corrupt, records_lapped, records_abandoned, records_resync,
                     records_restart, records_buffer, records_rejected, records_truncated}) {
    total = total + v < total ? UINT64_MAX : total + v;  // saturating: never wraps
  }
  return total;
}

xpu_ring_consumer_v1* RingReader::consumer() const {
  return reinterpret_cast<xpu_ring_consumer_v1*>(base_ + XPU_RING_CONSUMER_OFFSET);
}

// Losses persisted by earlier readers of this ring are the starting point;
// the acknowledged position, if it fits the indices, is where reading
// resumes. A block that does not fit (scribbled over) is ignored as a whole.
void RingReader::RestoreConsumerState(uint64_t read_index, uint64_t write_index) {
  acked_ = read_index;
  xpu_ring_consumer_v1 c;
  if (Load32(&consumer()->magic, true) == XPU_RING_CONSUMER_MAGIC &&
      Copy(&c, consumer(), sizeof(c)) && c.acked_index <= read_index &&
      read_index <= write_index && c.unsettled_lost <= read_index - c.acked_index) {
    counters_.records_corrupt = c.lost[XPU_LOSS_CORRUPT];
    counters_.records_lapped = c.lost[XPU_LOSS_LAPPED];
    counters_.records_abandoned = c.lost[XPU_LOSS_ABANDONED];
    counters_.records_resync = c.lost[XPU_LOSS_RESYNC];
    counters_.records_restart = c.lost[XPU_LOSS_RESTART];
    counters_.records_buffer = c.lost[XPU_LOSS_BUFFER];
    counters_.records_rejected = c.lost[XPU_LOSS_REJECTED];
    counters_.records_truncated = c.lost[XPU_LOSS_TRUNCATED];
    counters_.resyncs = c.resyncs;
    bias_ = c.position_bias;
    acked_ = c.acked_index;
    // Read again what the previous reader had read but the engine had not
    // acknowledged.
    replay_end_ = read_index;
    replay_known_lost_ = c.unsettled_lost;
    cursor_ = c.acked_index;
  }
  PersistConsumerState();
}

void RingReader::PersistConsumerState() {
  if (options_.read_only || faulted_) return;
  xpu_ring_consumer_v1* c = consumer();
  const uint64_t lost[XPU_LOSS_MAX] = {counters_.records_corrupt, counters_.records_lapped,
                                       counters_.records_abandoned, counters_.records_resync,
                                       counters_.records_restart, counters_.records_buffer,
                                       counters_.records_rejected,
                                       counters_.records_truncated};
  bool ok = ShmStoreRelaxed32(&c->resyncs, static_cast<uint32_t>(counters_.resyncs)) &&
            ShmStoreRelaxed64(&c->acked_index, acked_) &&
            ShmStoreRelaxed64(&c->position_bias, bias_) &&
            ShmStoreRelaxed64(&c->unsettled_lost, unsettled_total_ + replay_known_lost_);
  for (int i = 0; ok && i < XPU_LOSS_MAX; ++i) ok = ShmStoreRelaxed64(&c->lost[i], lost[i]);
  if (ok) ok = ShmStoreRelease32(&c->magic, XPU_RING_CONSUMER_MAGIC);
  if (!ok) faulted_ = true;
}

void RingReader::Lose(xpu_consumer_loss reason, uint64_t position, uint64_t n) {
  if (n == 0) return;
  if (position < replay_end_) {
    // The previous reader read these positions; whether they are lost now
    // is settled when the replay ends (FinishReplay).
    const uint64_t in_replay = std::min(n, replay_end_ - position);
    replay_failed_ += in_replay;
    position += in_replay;
    n -= in_replay;
    if (n == 0) return;
  }
  uint64_t* counter = nullptr;
  switch (reason) {
    case XPU_LOSS_CORRUPT:
      counter = &counters_.records_corrupt;
      break;
    case XPU_LOSS_LAPPED:
      counter = &counters_.records_lapped;
      break;
    case XPU_LOSS_ABANDONED:
      counter = &counters_.records_abandoned;
      break;
    case XPU_LOSS_RESYNC:
      counter = &counters_.records_resync;
      break;
    case XPU_LOSS_RESTART:
      counter = &counters_.records_restart;
      break;
    case XPU_LOSS_BUFFER:
      counter = &counters_.records_buffer;
      break;
    case XPU_LOSS_TRUNCATED:
      counter = &counters_.records_truncated;
      break;
    default:
      counter = &counters_.records_rejected;
      break;
  }
  *counter = *counter + n < *counter ? UINT64_MAX : *counter + n;
  if (position >= acked_) {
    if (!unsettled_.empty() && unsettled_.back().first + unsettled_.back().second == position) {
      unsettled_.back().second += n;
    } else if (unsettled_.size() < 65536) {
      unsettled_.emplace_back(position, n);
    } else {
      unsettled_.back().second += n;  // bounded: the last run absorbs the rest
    }
    unsettled_total_ += n;
  }
}

void RingReader::FinishReplay() {
  const uint64_t restart_lost =
      replay_failed_ > replay_known_lost_ ? replay_failed_ - replay_known_lost_ : 0;
  replay_end_ = 0;
  replay_failed_ = 0;
  replay_known_lost_ = 0;
  Lose(XPU_LOSS_RESTART, cursor_, restart_lost);
}

void RingReader::Acknowledge(uint64_t position) {
  if (options_.read_only) return;
  position = std::min(position, cursor_);
  if (position <= acked_) return;
  acked_ = position;
  while (!unsettled_.empty() && unsettled_.front().first < acked_) {
    auto& run = unsettled_.front();
    const uint64_t settled = std::min(run.second, acked_ - run.first);
    run.first += settled;
    run.second -= settled;
    unsettled_total_ -= settled;
    if (run.second > 0) break;
    unsettled_.erase(unsettled_.begin());
  }
  PersistConsumerState();
}

void RingReader::AddLoss(xpu_consumer_loss reason, uint64_t position, uint64_t n) {
  if (options_.read_only || n == 0) return;
  if (reason != XPU_LOSS_BUFFER && reason != XPU_LOSS_REJECTED) reason = XPU_LOSS_REJECTED;
  // These records were read (and are not replayed): never the replay range.
  const uint64_t end = replay_end_;
  replay_end_ = 0;
  Lose(reason, position, n);
  replay_end_ = end;
  PersistConsumerState();
}

// The hook counts every record it committed (XPU_CNT_RECORDS_WRITTEN); the
// reader has accounted for cursor - bias of them. Records committed but not
// yet accounted for are what the corrupted indices hid: at most one ring.
void RingReader::Resync(uint64_t w) {
  const uint64_t written = Load64(&header_->counters[XPU_CNT_RECORDS_WRITTEN], false);
  const uint64_t accounted = cursor_ - bias_;
  uint64_t lost = written > accounted ? written - accounted : 0;
  lost = std::min<uint64_t>(lost, layout_.ring_capacity);
  if (cursor_ < replay_end_) FinishReplay();
  ++counters_.resyncs;
  Lose(XPU_LOSS_RESYNC, cursor_, lost);
  // From here on, positions from w stand for records again.
  bias_ += (w - cursor_) - lost;
  cursor_ = w;
  stalled_ = false;
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
  // A ring that lost its header page answers zeros: keep what it said last.
  if (faulted_) return last_live_;
  last_live_ = s;
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
  if (truncated_) {
    CountTruncated();
    return 0;
  }
  const uint64_t cap = layout_.ring_capacity;
  const uint64_t w = LoadWriteIndex();
  size_t appended = 0;
  if (faulted_) {
    OnFault();
    if (truncated_) CountTruncated();
    return 0;
  }
  if (w < cursor_) {
    // write_index only grows; one that moved back was corrupted (or the
    // producer is broken). An owning reader resynchronizes so that the
    // producer, which checks write_index against read_index, can write
    // again; an inspecting one only counts.
    ++counters_.index_regressions;
    if (options_.read_only) return 0;
    Resync(w);
  } else if (w - cursor_ > cap) {
    // How many records the positions we would skip can stand for: those the
    // hook counts as written and no reader has accounted for yet.
    const uint64_t written = Load64(&header_->counters[XPU_CNT_RECORDS_WRITTEN], false);
    const uint64_t accounted = cursor_ - bias_;
    const uint64_t unread = written > accounted ? written - accounted : 0;
    const bool plausible = (w - cursor_) - cap <= unread + options_.max_in_flight;
    if (options_.read_only || cursor_ < replay_end_ || plausible) {
      // The producer is more than one lap ahead of us (it does not wait
      // for this reader, or it ran on while no daemon was there): those
      // slots were overwritten. Jump to the oldest position still there.
      Lose(XPU_LOSS_LAPPED, cursor_, (w - cap) - cursor_);
      cursor_ = w - cap;
      stalled_ = false;
    } else {
      // More positions skipped than records written: the index was
      // corrupted, not lapped.
      Resync(w);
    }
  }
  const auto* slots = reinterpret_cast<const xpu_record_v1*>(base_ + layout_.ring_offset);
  while (cursor_ < w && appended < max_records) {
    if (replay_end_ != 0 && cursor_ >= replay_end_) FinishReplay();
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
        Lose(XPU_LOSS_LAPPED, cursor_, 1);  // rewritten while we copied
      } else {
        copy.commit = 0;
        const bool valid = ValidateRecord(copy);
        if (faulted_) break;  // its signature's page is gone: counted below
        if (valid) {
          out->push_back(RingRecord{cursor_, copy, cursor_ - bias_});
          ++appended;
          ++counters_.records_read;
          if (cursor_ < replay_end_) ++counters_.records_replayed;
        } else {
          Lose(XPU_LOSS_CORRUPT, cursor_, 1);
        }
      }
      ++cursor_;
      stalled_ = false;
      continue;
    }
    // A later lap of the producer already reused this slot.
    const int32_t ahead = static_cast<int32_t>(commit - expected);
    if (commit != 0 && ahead > 0 && static_cast<uint64_t>(ahead) % cap == 0) {
      Lose(XPU_LOSS_LAPPED, cursor_, 1);
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
      const uint64_t written = Load64(&header_->counters[XPU_CNT_RECORDS_WRITTEN], false);
      const uint64_t reserved = w - bias_;  // positions standing for records
      if (!options_.read_only && cursor_ >= replay_end_ && reserved > written &&
          reserved - written > options_.max_in_flight) {
        // Far more positions than records and nothing committed here: the
        // index jumped forward (corruption), these slots never held records.
        Resync(w);
        break;
      }
      Lose(XPU_LOSS_ABANDONED, cursor_, 1);
      ++cursor_;
      continue;
    }
    break;
  }
  last_write_index_ = std::max(last_write_index_, w);
  if (faulted_) {
    OnFault();
    if (truncated_) CountTruncated();
    return appended;
  }
  if (replay_end_ != 0 && cursor_ >= replay_end_) FinishReplay();
  if (!options_.read_only && !faulted_ && !ShmStoreRelease64(&header_->read_index, cursor_))
    faulted_ = true;
  if (!options_.read_only) PersistConsumerState();
  return appended;
}

void RingReader::OnFault() {
  if (options_.read_only || truncated_) return;
  uint64_t probe = 0;
  uint32_t magic = 0;
  // Probed past faulted_: the fault may have been in a slot, a signature or
  // a name, the header page may still be there.
  if (ShmLoadAcquire64(&header_->write_index, &probe) &&
      ShmLoadRelaxed32(&consumer()->magic, &magic)) {
    faulted_ = false;
    truncated_ = true;
    return;
  }
  // The header page is gone: the hook's counters with it. What this reader
  // saw written and had not read is lost.
  if (last_write_index_ > cursor_ &&
      last_write_index_ - cursor_ <= uint64_t{layout_.ring_capacity} + options_.max_in_flight) {
    Lose(XPU_LOSS_TRUNCATED, cursor_, last_write_index_ - cursor_);
    cursor_ = last_write_index_;
  }
  // From now on the live state is the last one read, raised to what this
  // reader saw written: the positions it read or counted lost.
  uint64_t& written = last_live_.counters[XPU_CNT_RECORDS_WRITTEN];
  written = std::max(written, cursor_ - bias_);
  last_live_.write_index = std::max(last_live_.write_index, cursor_);
}

void RingReader::CountTruncated() {
  const uint64_t w = LoadWriteIndex();
  if (faulted_) {
    truncated_ = false;  // the header page went too
    OnFault();
    return;
  }
  if (w > cursor_) {
    // Positions stand for records unless the index was corrupted: never
    // more than the hook counts as written and nobody accounted for.
    const uint64_t written = Load64(&header_->counters[XPU_CNT_RECORDS_WRITTEN], false);
    const uint64_t accounted = cursor_ - bias_;
    const uint64_t unread = written > accounted ? written - accounted : 0;
    uint64_t lost = w - cursor_;
    if (lost > unread + options_.max_in_flight) {
      bias_ += lost - unread;
      lost = unread;
    }
    Lose(XPU_LOSS_TRUNCATED, cursor_, lost);
    cursor_ = w;
  }
  last_write_index_ = std::max(last_write_index_, w);
  if (replay_end_ != 0 && cursor_ >= replay_end_) FinishReplay();
  if (!faulted_ && !ShmStoreRelease64(&header_->read_index, cursor_)) faulted_ = true;
  PersistConsumerState();
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
  // A truncated ring's table may be gone; no record needs it any more.
  const uint64_t hint = truncated_ ? 0 : Load64(&header_->sig_count, false);
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
