// libFuzzer entry point for the batch decoder (built only with clang).
//   batch_decoder_fuzzer -max_total_time=60 corpus/
//   batch_decoder_fuzzer --write-seeds=corpus/   (well-formed messages to
//                                                 start from, then exits)
// Protobuf's parser is not instrumented, so from nothing libFuzzer rarely
// finds a message that parses into a batch; from seeds, its mutations do,
// and coverage comes from the decoder itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/state/batch_decoder_fuzz_body.h"
#include "google/protobuf/stubs/logging.h"

namespace {

constexpr char kWriteSeeds[] = "--write-seeds=";
constexpr uint32_t kSeeds = 16;

int WriteSeeds(const std::string& dir) {
  for (uint32_t i = 0; i < kSeeds; ++i) {
    const std::string path = dir + "/seed-" + std::to_string(i);
    const std::string msg = xpu::engine::FuzzSeedMessage(i);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(msg.data(), 1, msg.size(), f) != msg.size()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      if (f != nullptr) std::fclose(f);
      return 1;
    }
    std::fclose(f);
  }
  std::printf("wrote %u seeds to %s\n", kSeeds, dir.c_str());
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is an expected input
  // libFuzzer leaves arguments that start with "--" to the target.
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp((*argv)[i], kWriteSeeds, sizeof(kWriteSeeds) - 1) == 0)
      std::exit(WriteSeeds((*argv)[i] + sizeof(kWriteSeeds) - 1));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)xpu::engine::FuzzDecodeOne(data, size);
  return 0;
}
