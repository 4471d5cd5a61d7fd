// libFuzzer entry point for the ring reader (built with clang only).
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang ...
//   build-fuzz/common/ring/ring_reader_fuzzer -max_total_time=60
#include <cstddef>
#include <cstdint>

#include "common/ring/ring_reader_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xpu::ring::FuzzRingReaderOnce(data, size);
  return 0;
}
