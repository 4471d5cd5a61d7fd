// libFuzzer entry point for the batch decoder (built only with clang).
//   batch_decoder_fuzzer -max_total_time=60 corpus/
#include <cstddef>
#include <cstdint>

#include "engine/state/batch_decoder_fuzz_body.h"
#include "google/protobuf/stubs/logging.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is an expected input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)xpu::engine::FuzzDecodeOne(data, size);
  return 0;
}
