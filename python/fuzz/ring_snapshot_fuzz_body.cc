// python/fuzz/ring_snapshot_fuzz_body.cc — see ring_snapshot_fuzz_body.h.
#include "ring_snapshot_fuzz_body.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ring_reader.h"

namespace xpu::python {
namespace {

size_t Check(const uint8_t* data, size_t size) {
  const RingSnapshot snap = ParseRing(data, size);
  if (!snap.ok) {
    if (!snap.records.empty() || !snap.signatures.empty()) abort();
    return 0;
  }
  if (snap.records.size() > snap.header.ring_capacity) abort();
  if (snap.records.size() * sizeof(xpu_record_v1) > size) abort();
  uint64_t counted = 0;
  for (const SignatureStats& s : ComputeStats(snap)) {
    if (snap.signatures.count(s.sig_id) == 0) abort();
    counted += s.count;
  }
  if (counted > snap.records.size()) abort();
  return snap.records.size();
}

}  // namespace

size_t FuzzRingSnapshotOnce(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  // 1. The bytes as they are: mostly refused by the header checks.
  size_t accepted = Check(data, size);
  // 2. A valid header shaped by the input's first bytes, the input behind it:
  //    reaches slots, signatures, names and the statistics.
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
  xpu_ring_header_v1 h{};
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
  memcpy(h.job, data, std::min<size_t>(size, sizeof(h.job)));
  memcpy(file.data(), &h, sizeof(h));
  // The parser reads a snapshot: a truncated copy is as likely as a whole one.
  const size_t cut = (knobs[3] & 0x40000000u) ? file.size() - (knobs[0] >> 8) % file.size()
                                               : file.size();
  accepted += Check(file.data(), cut);
  return accepted;
}

}  // namespace xpu::python
