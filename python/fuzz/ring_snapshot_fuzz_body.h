// python/fuzz/ring_snapshot_fuzz_body.h — one fuzz input through the Python
// module's ring parser (python/src/ring_reader.h): ParseRing and
// ComputeStats on untrusted bytes, with the invariants every answer must
// keep. Shared by the libFuzzer target (clang) and the CTest that replays
// random and mutated rings in every build.
#ifndef XPU_PYTHON_FUZZ_RING_SNAPSHOT_FUZZ_BODY_H_
#define XPU_PYTHON_FUZZ_RING_SNAPSHOT_FUZZ_BODY_H_

#include <cstddef>
#include <cstdint>

namespace xpu::python {

// Returns the number of records the parser accepted; aborts on a broken
// invariant (more records than the ring holds, a record naming no signature
// counted as good, statistics over more records than were accepted).
size_t FuzzRingSnapshotOnce(const uint8_t* data, size_t size);

}  // namespace xpu::python

#endif  // XPU_PYTHON_FUZZ_RING_SNAPSHOT_FUZZ_BODY_H_
