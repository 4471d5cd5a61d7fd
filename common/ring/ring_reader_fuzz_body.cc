#include "common/ring/ring_reader_fuzz_body.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/ring/ring_reader.h"

namespace xpu::ring {
namespace {

size_t Exercise(int fd, bool read_only) {
  RingReaderOptions options;
  options.read_only = read_only;
  options.abandon_grace_ns = 0;
  options.max_file_size = 1 << 20;
  auto reader_or = RingReader::FromFd(fd, options);
  if (!reader_or.ok()) return 0;
  RingReader& reader = **reader_or;
  size_t accepted = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<SignatureInfo> sigs;
    reader.PollSignatures(&sigs);
    std::vector<RingRecord> recs;
    accepted += reader.Poll(static_cast<uint64_t>(round), 1 << 16, &recs);
    for (const RingRecord& r : recs) {
      // Returned records must have passed validation.
      if (r.rec.sig_id == 0 || r.rec.sig_id >= reader.layout().sig_capacity) abort();
      if ((r.rec.flags & ~kKnownRecordFlags) != 0) abort();
      if (reader.signature(r.rec.sig_id) == nullptr) abort();
    }
    (void)reader.ReadLiveState();
    (void)reader.Drained();
  }
  return accepted;
}

int MakeMemfd(const uint8_t* data, size_t size) {
  const int fd = memfd_create("xpu-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < size) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

size_t FuzzRingReaderOnce(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  size_t accepted = 0;
  // 1. The bytes as they are: mostly rejected by header validation.
  int fd = MakeMemfd(data, size);
  if (fd >= 0) {
    accepted += Exercise(fd, false);
    close(fd);
  }
  // 2. A valid-looking header derived from the input's first bytes, followed
  //    by the input: reaches slots, signatures and names.
  if (size < 16) return accepted;
  uint32_t knobs[4];
  memcpy(knobs, data, sizeof(knobs));
  const uint32_t ring_capacity = 1u << (knobs[0] % 8);  // 1..128
  const uint32_t sig_capacity = 2 + knobs[1] % 64;
  const uint64_t str_capacity = knobs[2] % 2048;
  const uint64_t ring_off = XPU_RING_HEADER_SIZE;
  const uint64_t sig_off = ring_off + uint64_t{ring_capacity} * 32;
  const uint64_t str_off = sig_off + uint64_t{sig_capacity} * 128;
  const uint64_t file_size = str_off + str_capacity;
  std::vector<uint8_t> file(file_size, 0);
  for (uint64_t i = 0; i < file_size - ring_off; ++i) file[ring_off + i] = data[(16 + i) % size];
  xpu_ring_header_v1 h;
  memset(&h, 0, sizeof(h));
  h.magic = XPU_RING_MAGIC;
  h.abi_version = XPU_RECORD_ABI_VERSION;
  h.header_size = XPU_RING_HEADER_SIZE;
  h.record_size = 32;
  h.signature_size = 128;
  h.ring_capacity = ring_capacity;
  h.sig_capacity = sig_capacity;
  h.ring_offset = ring_off;
  h.sig_offset = sig_off;
  h.str_offset = str_off;
  h.str_capacity = str_capacity;
  h.file_size = file_size;
  h.write_index = knobs[3] % 512;
  h.read_index = knobs[3] % 7;
  h.sig_count = knobs[1] % 80;
  h.str_used = knobs[2] % 4096;
  // Let the input overwrite identity bytes and the live fields too.
  memcpy(h.job, data, std::min<size_t>(size, sizeof(h.job)));
  memcpy(file.data(), &h, sizeof(h));
  fd = MakeMemfd(file.data(), file.size());
  if (fd >= 0) {
    accepted += Exercise(fd, (knobs[3] & 0x80000000u) != 0);
    close(fd);
  }
  return accepted;
}

}  // namespace xpu::ring
