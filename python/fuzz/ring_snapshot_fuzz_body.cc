// python/fuzz/ring_snapshot_fuzz_body.cc — see ring_snapshot_fuzz_body.h.
#include "ring_snapshot_fuzz_body.h"

#include <cstdlib>

#include "ring_reader.h"

namespace xpu::python {

size_t FuzzRingSnapshotOnce(const uint8_t* data, size_t size) {
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

}  // namespace xpu::python
