#include "engine/state/batch_decoder_fuzz_body.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/wire/record_codec.h"
#include "engine/state/batch_decoder.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::engine {
namespace {
void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "batch decoder invariant broken: %s\n", what);
    std::abort();
  }
}
}  // namespace

size_t FuzzDecodeOne(const uint8_t* data, size_t size) {
  xpu::v1::DaemonMessage msg;
  if (!msg.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!msg.has_batch()) return 0;
  size_t decoded = 0;
  for (const xpu::v1::ProcessBatch& pb : msg.batch().processes()) {
    SignatureTable table;
    std::vector<xpu_record_v1> out;
    DecodeStats stats;
    absl::Status st = DecodeProcessBatch(pb, table, &out, &stats);
    ++decoded;
    const bool framing_ok = pb.has_identity() &&
                            pb.records().size() % sizeof(xpu_record_v1) == 0 &&
                            (pb.records().empty() || pb.compact_records().empty());
    Check(st.ok() == framing_ok, "status matches framing");
    if (!st.ok()) {
      Check(out.empty(), "nothing appended on error");
      continue;
    }
    size_t n = pb.records().size() / sizeof(xpu_record_v1);
    if (!pb.compact_records().empty()) {
      std::vector<xpu_record_v1> plain;
      const bool decodes = wire::DecodeCompactRecords(pb.compact_records(), &plain).ok();
      n = plain.size();
      Check(n <= pb.compact_records().size() / 2, "compact output bounded by its input");
      Check(stats.undecodable == (decodes ? 0 : wire::CompactRecordCount(pb.compact_records())),
            "an undecodable blob counts its declared records");
    }
    Check(stats.records + stats.unknown_sig == n, "accepted + skipped == records in blob");
    Check(out.size() == stats.records, "output size == accepted");
    Check(stats.signatures + stats.bad_signatures == static_cast<uint64_t>(pb.signatures_size()),
          "signature accounting");
    for (const xpu_record_v1& r : out)
      Check(table.Find(r.sig_id) != nullptr, "accepted record has a signature");
  }
  return decoded;
}

std::string FuzzSeedMessage(uint32_t seed) {
  xpu::v1::DaemonMessage msg;
  xpu::v1::Batch* b = msg.mutable_batch();
  b->set_batch_seq(seed);
  xpu::v1::ProcessBatch* pb = b->add_processes();
  pb->set_process_key(7);
  pb->mutable_identity()->set_job("fuzz");
  pb->mutable_identity()->set_rank(static_cast<int32_t>(seed % 8));
  for (uint32_t id = 1; id <= 3; ++id) {
    xpu::v1::Signature* s = pb->add_signatures();
    s->set_id(id);
    s->set_kind(id == 1 ? 2 : id == 2 ? 16 : 1);
    s->set_dtype(3);
    s->set_name(id == 1 ? "cublasGemmEx" : id == 2 ? "ncclAllReduce" : "kernel");
    s->set_m(1024);
    s->set_n(1024);
    s->set_k(1024);
    s->set_count(1 << 20);
    s->set_comm_id(0xabc);
    s->set_comm_nranks(8);
  }
  std::vector<xpu_record_v1> recs(16);
  for (uint32_t i = 0; i < 16; ++i) {
    xpu_record_v1& r = recs[i];
    r.sig_id = 1 + (i + seed) % 4;  // 4 is undefined on purpose
    r.start_ns = 1000000ull * i;
    r.duration = 1000 + i;
    r.seq = i;
    r.flags = 1;
  }
  if (seed % 2) {  // every other seed in the compact form
    std::string compact;
    wire::EncodeCompactRecords(recs.data(), recs.size(), &compact);
    pb->set_compact_records(compact);
  } else {
    pb->set_records(reinterpret_cast<const char*>(recs.data()), recs.size() * sizeof(recs[0]));
  }
  return msg.SerializeAsString();
}

}  // namespace xpu::engine
