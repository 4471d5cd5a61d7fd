#include "common/ring/testing/test_ring_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace xpu::ring::testing {
namespace {
constexpr uint64_t kPage = 4096;
uint64_t PageUp(uint64_t v) { return (v + kPage - 1) / kPage * kPage; }
}  // namespace

std::unique_ptr<TestRingWriter> TestRingWriter::Create(const TestRingConfig& c) {
  const uint64_t ring_off = XPU_RING_HEADER_SIZE;
  const uint64_t sig_off = PageUp(ring_off + uint64_t{c.ring_capacity} * sizeof(xpu_record_v1));
  const uint64_t str_off = PageUp(sig_off + uint64_t{c.sig_capacity} * sizeof(xpu_signature_v1));
  const uint64_t size = PageUp(str_off + c.str_capacity);
  const int fd = memfd_create("xpu-test-ring", MFD_CLOEXEC | (c.sealable ? MFD_ALLOW_SEALING : 0));
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return nullptr;
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  std::unique_ptr<TestRingWriter> w(new TestRingWriter());
  w->fd_ = fd;
  w->base_ = static_cast<uint8_t*>(base);
  w->size_ = size;
  xpu_ring_header_v1* h = w->header();
  h->magic = XPU_RING_MAGIC;
  h->abi_version = XPU_RECORD_ABI_VERSION;
  h->header_size = XPU_RING_HEADER_SIZE;
  h->record_size = sizeof(xpu_record_v1);
  h->signature_size = sizeof(xpu_signature_v1);
  h->ring_capacity = c.ring_capacity;
  h->sig_capacity = c.sig_capacity;
  h->ring_offset = ring_off;
  h->sig_offset = sig_off;
  h->str_offset = str_off;
  h->str_capacity = c.str_capacity;
  h->file_size = size;
  h->pid = c.pid;
  h->rank = c.rank;
  h->local_rank = c.rank;
  h->world_size = c.world_size;
  h->local_world_size = c.world_size;
  h->device = 0;
  h->created_ns = 1;
  h->start_time_ticks = c.start_time_ticks;
  strncpy(h->job, c.job.c_str(), sizeof(h->job) - 1);
  strncpy(h->host, c.host.c_str(), sizeof(h->host) - 1);
  strncpy(h->job_name, c.job_name.c_str(), sizeof(h->job_name) - 1);
  h->producer_state = XPU_PRODUCER_ACTIVE;
  return w;
}

TestRingWriter::~TestRingWriter() {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

xpu_record_v1* TestRingWriter::slot(uint64_t position) {
  auto* slots = reinterpret_cast<xpu_record_v1*>(base_ + header()->ring_offset);
  return &slots[position & (header()->ring_capacity - 1)];
}

xpu_signature_v1* TestRingWriter::sig_entry(uint32_t id) {
  return reinterpret_cast<xpu_signature_v1*>(base_ + header()->sig_offset) + id;
}

uint32_t TestRingWriter::AddSignature(uint16_t kind, const std::string& name,
                                      const xpu_signature_v1* shape) {
  xpu_ring_header_v1* h = header();
  if (next_sig_ >= h->sig_capacity) {
    __atomic_fetch_add(&h->counters[XPU_CNT_SIG_TABLE_FULL], 1, __ATOMIC_RELAXED);
    return 0;
  }
  const uint32_t id = next_sig_++;
  xpu_signature_v1* e = sig_entry(id);
  xpu_signature_v1 s;
  if (shape != nullptr) {
    s = *shape;
  } else {
    memset(&s, 0, sizeof(s));
    s.comm_rank = -1;
    s.peer = -1;
    s.device = -1;
  }
  s.commit = 0;
  s.kind = kind;
  s.name_len = static_cast<uint32_t>(name.size());
  memset(s.name, 0, sizeof(s.name));
  memcpy(s.name, name.data(), std::min<size_t>(name.size(), XPU_SIG_NAME_INLINE));
  if (name.size() > XPU_SIG_NAME_INLINE) {
    const uint64_t used = h->str_used;
    if (used + name.size() <= h->str_capacity) {
      memcpy(base_ + h->str_offset + used, name.data(), name.size());
      s.name_off = static_cast<uint32_t>(used);
      __atomic_store_n(&h->str_used, used + name.size(), __ATOMIC_RELEASE);
    } else {
      s.name_len = XPU_SIG_NAME_INLINE;
      __atomic_fetch_add(&h->counters[XPU_CNT_STR_ARENA_FULL], 1, __ATOMIC_RELAXED);
    }
  }
  memcpy(e, &s, sizeof(s));
  __atomic_store_n(&e->commit, id, __ATOMIC_RELEASE);
  uint64_t hint = __atomic_load_n(&h->sig_count, __ATOMIC_RELAXED);
  if (hint < id + 1u) __atomic_store_n(&h->sig_count, uint64_t{id} + 1, __ATOMIC_RELAXED);
  return id;
}

bool TestRingWriter::Write(const xpu_record_v1& rec) {
  xpu_ring_header_v1* h = header();
  uint64_t p = __atomic_load_n(&h->write_index, __ATOMIC_RELAXED);
  do {
    const uint64_t r = __atomic_load_n(&h->read_index, __ATOMIC_ACQUIRE);
    if (p - r >= h->ring_capacity) {
      __atomic_fetch_add(&h->counters[XPU_CNT_DROPPED_FULL], 1, __ATOMIC_RELAXED);
      return false;
    }
  } while (!__atomic_compare_exchange_n(&h->write_index, &p, p + 1, true, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED));
  xpu_record_v1* s = slot(p);
  xpu_record_v1 copy = rec;
  copy.commit = 0;
  memcpy(reinterpret_cast<uint8_t*>(s) + 4, reinterpret_cast<uint8_t*>(&copy) + 4,
         sizeof(copy) - 4);
  __atomic_store_n(&s->commit, static_cast<uint32_t>(p + 1), __ATOMIC_RELEASE);
  __atomic_fetch_add(&h->counters[XPU_CNT_RECORDS_WRITTEN], 1, __ATOMIC_RELAXED);
  return true;
}

void TestRingWriter::WriteOverwriting(const xpu_record_v1& rec) {
  xpu_ring_header_v1* h = header();
  const uint64_t p = __atomic_fetch_add(&h->write_index, 1, __ATOMIC_ACQ_REL);
  xpu_record_v1* s = slot(p);
  xpu_record_v1 copy = rec;
  memcpy(reinterpret_cast<uint8_t*>(s) + 4, reinterpret_cast<uint8_t*>(&copy) + 4,
         sizeof(copy) - 4);
  __atomic_store_n(&s->commit, static_cast<uint32_t>(p + 1), __ATOMIC_RELEASE);
}

uint64_t TestRingWriter::ReserveWithoutCommit() {
  return __atomic_fetch_add(&header()->write_index, 1, __ATOMIC_ACQ_REL);
}

xpu_record_v1 TestRingWriter::MakeRecord(uint32_t sig_id, uint64_t start_ns, uint32_t duration,
                                         uint16_t flags) {
  xpu_record_v1 r;
  memset(&r, 0, sizeof(r));
  r.sig_id = sig_id;
  r.start_ns = start_ns;
  r.duration = duration;
  r.flags = flags;
  return r;
}

}  // namespace xpu::ring::testing
