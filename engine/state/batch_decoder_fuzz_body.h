// The body shared by the libFuzzer target (batch_decoder_fuzzer.cc) and the
// CTest that runs it over mutated inputs with any compiler.
#ifndef XPU_ENGINE_STATE_BATCH_DECODER_FUZZ_BODY_H_
#define XPU_ENGINE_STATE_BATCH_DECODER_FUZZ_BODY_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace xpu::engine {

// Parses `data` as a serialized DaemonMessage and decodes every ProcessBatch
// through a fresh SignatureTable, checking the decoder's invariants (every
// accepted record names a defined signature; counts add up). Aborts on a
// broken invariant, which is what a fuzzer reports. Returns how many
// ProcessBatches reached the decoder (for coverage checks in tests).
size_t FuzzDecodeOne(const uint8_t* data, size_t size);

// A valid serialized DaemonMessage (batch with signatures and records), the
// seed for mutation.
std::string FuzzSeedMessage(uint32_t seed);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_BATCH_DECODER_FUZZ_BODY_H_
