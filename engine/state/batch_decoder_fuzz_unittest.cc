// Runs the fuzz body over a few thousand deterministic mutations of valid
// messages, so the decoder's invariants are exercised with any compiler.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/state/batch_decoder_fuzz_body.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::engine {
namespace {

std::string Mutate(std::string s, std::mt19937& rng) {
  const int ops = 1 + rng() % 8;
  for (int i = 0; i < ops && !s.empty(); ++i) {
    size_t pos = rng() % s.size();
    switch (rng() % 5) {
      case 0:
        s[pos] = static_cast<char>(rng());
        break;  // byte flip
      case 1:
        s[pos] ^= static_cast<char>(1u << (rng() % 8));
        break;  // bit flip
      case 2:
        s.resize(pos);
        break;  // truncate
      case 3:
        s.insert(pos, std::string(1 + rng() % 40, static_cast<char>(rng())));
        break;
      case 4:
        s.erase(pos, 1 + rng() % 16);
        break;
    }
  }
  return s;
}

// Structure-aware mutation: byte-level changes mostly break the protobuf
// framing, so half the inputs change fields of a parsed seed instead (blob
// length, sig ids, signature ids, identity).
std::string MutateFields(const std::string& seed, std::mt19937& rng) {
  xpu::v1::DaemonMessage m;
  m.ParseFromString(seed);
  xpu::v1::ProcessBatch* pb = m.mutable_batch()->mutable_processes(0);
  switch (rng() % 6) {
    case 0:
      pb->mutable_records()->resize(rng() % (pb->records().size() + 64));
      break;
    case 1: {
      std::string* blob = pb->mutable_records();
      if (blob->size() >= 32) {
        uint32_t id = rng() % 3 == 0 ? static_cast<uint32_t>(rng()) : rng() % 8;
        size_t at = (rng() % (blob->size() / 32)) * 32 + 4;
        std::memcpy(&(*blob)[at], &id, 4);
      }
      break;
    }
    case 2:
      pb->mutable_signatures(rng() % pb->signatures_size())->set_id(static_cast<uint32_t>(rng()));
      break;
    case 3:
      pb->clear_identity();
      break;
    case 4:
      *m.mutable_batch()->add_processes() = *pb;
      break;
    case 5: {
      std::string* blob = pb->mutable_compact_records();
      if (!blob->empty()) (*blob)[rng() % blob->size()] ^= static_cast<char>(1u << (rng() % 8));
      break;
    }
  }
  return m.SerializeAsString();
}

TEST(BatchDecoderFuzzTest, MutatedInputsKeepInvariants) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in mutated strings is expected
  std::mt19937 rng(12345);
  size_t decoded = 0, rejected_framing = 0, compact = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string seed = FuzzSeedMessage(static_cast<uint32_t>(i));
    std::string in = i % 2 ? Mutate(seed, rng) : Mutate(MutateFields(seed, rng), rng);
    if (i % 4 == 0) in = MutateFields(seed, rng);
    decoded += FuzzDecodeOne(reinterpret_cast<const uint8_t*>(in.data()), in.size());
    xpu::v1::DaemonMessage m;
    if (m.ParseFromString(in) && m.has_batch() && m.batch().processes_size() > 0 &&
        m.batch().processes(0).records().size() % 32 != 0) {
      ++rejected_framing;
    }
    if (m.ParseFromString(in) && m.has_batch() && m.batch().processes_size() > 0 &&
        !m.batch().processes(0).compact_records().empty()) {
      ++compact;
    }
  }
  EXPECT_GT(compact, 50u);
  // The mutations must reach the decoder often, on both of its paths, or
  // this test exercises nothing.
  EXPECT_GT(decoded, 400u);
  EXPECT_GT(rejected_framing, 10u);
  // Also the unmutated seeds and the empty input.
  for (uint32_t i = 0; i < 8; ++i) {
    std::string in = FuzzSeedMessage(i);
    FuzzDecodeOne(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
  FuzzDecodeOne(nullptr, 0);
}

}  // namespace
}  // namespace xpu::engine
