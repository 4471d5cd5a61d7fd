#include "daemon/process_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/wire/signature.h"
#include "daemon/evidence/ring_progress.h"
#include "daemon/gpu_model.h"

namespace xpu::daemon {

HistoryBuffer::HistoryBuffer(size_t capacity) : records_(capacity == 0 ? 1 : capacity) {}

void HistoryBuffer::Push(const ring::RingRecord& r) {
  records_[head_] = r;
  head_ = (head_ + 1) % records_.size();
  if (size_ < records_.size()) ++size_;
}

std::vector<ring::RingRecord> HistoryBuffer::Snapshot(uint64_t last_n, uint64_t since_ns,
                                                      uint64_t until_ns) const {
  std::vector<ring::RingRecord> out;
  const size_t cap = records_.size();
  const size_t oldest = (head_ + cap - size_) % cap;
  // Walk newest to oldest so that last_n bounds the work.
  for (size_t i = 0; i < size_; ++i) {
    const ring::RingRecord& r = records_[(oldest + size_ - 1 - i) % cap];
    if (r.rec.start_ns < since_ns || (until_ns != 0 && r.rec.start_ns >= until_ns)) continue;
    out.push_back(r);
    if (last_n != 0 && out.size() >= last_n) break;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

size_t HistoryBuffer::Count(uint64_t last_n, uint64_t since_ns, uint64_t until_ns) const {
  const size_t cap = records_.size();
  const size_t oldest = (head_ + cap - size_) % cap;
  size_t n = 0;
  for (size_t i = 0; i < size_; ++i) {
    const uint64_t start = records_[(oldest + size_ - 1 - i) % cap].rec.start_ns;
    if (start < since_ns || (until_ns != 0 && start >= until_ns)) continue;
    if (++n == last_n) break;
  }
  return n;
}

ProcessState::ProcessState(uint64_t k, std::unique_ptr<ring::RingReader> r, const PeerInfo& p,
                           size_t history_records)
    : key(k),
      identity(r->identity()),
      peer(p),
      reader(std::move(r)),
      history(history_records) {}

// The pid is the kernel's (SO_PEERCRED) when there is a peer: the header's
// pid is only what the producer claims (and lives in its pid namespace).
ProcessTable::NaturalKey ProcessTable::KeyOf(const ProcessState& s) {
  return NaturalKey(s.identity.job, s.peer.pid > 0 ? s.peer.pid : s.identity.pid,
                    s.identity.start_time_ticks);
}

absl::StatusOr<uint64_t> ProcessTable::Add(std::unique_ptr<ring::RingReader> reader,
                                           const PeerInfo& peer, uint64_t now_ns) {
  const NaturalKey natural(reader->identity().job, peer.pid > 0 ? peer.pid : reader->identity().pid,
                           reader->identity().start_time_ticks);
  size_t live = 0;
  for (auto& [key, s] : entries_) {
    if (s->reader == nullptr) continue;
    ++live;
    if (KeyOf(*s) != natural) continue;
    if (!s->disconnected && !s->exited) {
      return absl::AlreadyExistsError(absl::StrCat("process ", s->identity.job, "/",
                                                   s->identity.pid, " is already registered"));
    }
    // Same process reconnecting: its ring continues under the new entry
    // (which resumes at the read_index the old reader stored).
    if (!s->exited) {
      s->exited = true;
      s->exited_at_ns = now_ns;
    }
    s->reader.reset();
    --live;
  }
  if (live >= options_.max_processes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("process table full (", options_.max_processes, ")"));
  }
  const uint64_t key = next_key_++;
  entries_.emplace(
      key, std::make_unique<ProcessState>(key, std::move(reader), peer, options_.history_records));
  return key;
}

ProcessState* ProcessTable::Find(uint64_t key) {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.get();
}

void ProcessTable::ForEach(const std::function<void(ProcessState&)>& fn) {
  for (auto& [key, s] : entries_) fn(*s);
}

size_t ProcessTable::RemoveExited(uint64_t now_ns, uint64_t retain_ns) {
  size_t removed = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const ProcessState& s = *it->second;
    if (s.exited && now_ns - s.exited_at_ns >= retain_ns) {
      it = entries_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

void FillIdentity(const ProcessState& s, xpu::v1::ProcessIdentity* out) {
  const ring::RingIdentity& id = s.identity;
  out->set_job(id.job);
  out->set_job_name(id.job_name);
  out->set_host(id.host);
  out->set_pid(id.pid);
  out->set_rank(id.rank);
  out->set_local_rank(id.local_rank);
  out->set_world_size(id.world_size);
  out->set_local_world_size(id.local_world_size);
  out->set_device(id.device);
  out->set_start_time_ticks(id.start_time_ticks);
  out->set_created_ns(id.created_ns);
  out->set_uid(s.peer.uid);
  // Published by the hook after hand-over, so read live (gpu_model.h); the
  // engine keeps the first non-empty value, so an exited process (no reader)
  // does not clear it.
  if (s.reader != nullptr) {
    const GpuIdentity gpu = ReadGpuIdentity(*s.reader);
    out->set_gpu_model(gpu.model);
    out->set_gpu_uuid(gpu.uuid);
    out->set_gpu_pci_bus_id(gpu.pci_bus_id);
    if (const int index = GpuIndexOfPciBusId(gpu.pci_bus_id); index >= 0) out->set_gpu_index(index);
  }
}

void FillSignature(const ring::SignatureInfo& info, xpu::v1::Signature* out) {
  wire::SignatureToWire(info.sig.commit, info.sig, info.name, out);
}

void FillCounters(const ProcessState& s, xpu::v1::ProcessCounters* out) {
  if (s.reader == nullptr) return;
  const ring::RingLiveState live = s.reader->ReadLiveState();
  for (int i = 0; i < XPU_CNT_MAX; ++i) out->add_hook(live.counters[i]);
  // Losses are the ring's (xpu_ring_consumer_v1): cumulative over every
  // daemon that read this process.
  const ring::RingReaderCounters& c = s.reader->counters();
  out->set_records_read(c.records_read);
  out->set_records_corrupt(c.records_corrupt);
  out->set_records_abandoned(c.records_abandoned);
  out->set_records_lapped(c.records_lapped);
  out->set_records_resync(c.records_resync);
  out->set_records_restart(c.records_restart);
  out->set_records_dropped_daemon(c.records_buffer);
  out->set_records_rejected(c.records_rejected);
  out->set_records_truncated(c.records_truncated);
  out->set_resyncs(c.resyncs);
  out->set_records_replayed(c.records_replayed);
  out->set_heartbeat_ns(live.heartbeat_ns);
  out->set_producer_state(live.producer_state);
  // Hang-watch table (ring.h): only when the hook keeps one.
  if (!ReadProgress(*s.reader, out->mutable_progress())) out->clear_progress();
}

uint64_t PositionFromCommit(uint64_t base, uint32_t commit) {
  return base + static_cast<uint32_t>(commit - 1u - static_cast<uint32_t>(base));
}

uint64_t ReadProcStartTicks(int32_t pid) {
  if (pid <= 0) return 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // comm (field 2) may contain spaces and parentheses: parse after the last ')'.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  // Fields 3..22 follow; starttime is the 20th of them.
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p != ' ' && *p != '\0') ++p;
  }
  while (*p == ' ') ++p;
  return strtoull(p, nullptr, 10);
}

}  // namespace xpu::daemon
