// libFuzzer entry point for the Python module's ring parser (clang only;
// `make fuzz` builds and runs it).
#include <cstddef>
#include <cstdint>

#include "ring_snapshot_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xpu::python::FuzzRingSnapshotOnce(data, size);
  return 0;
}
