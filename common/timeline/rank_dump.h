// rank_dump — what a timeline dump holds per process, between the daemons'
// replies and the trace writers: identity, signatures and the records still
// packed as the wire carried them (32 bytes per op, include/xpu/record.h).
// Records are unpacked one rank at a time, only while a trace, summary or
// flame graph is being produced, so a 1024-rank dump costs 32 bytes per op
// until then.
//
// On disk (`xpu timeline dump --out DIR`), each process is DIR/raw/<name>.xpb:
// one serialized xpu.v1.ProcessBatch (identity, full signature table, packed
// records), exactly as the engine relayed it. `xpu timeline summary --in DIR`
// reads them back.
//
// Thread-safety: plain values; no shared state.
#ifndef XPU_COMMON_TIMELINE_RANK_DUMP_H_
#define XPU_COMMON_TIMELINE_RANK_DUMP_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/analysis/trace.h"
#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::timeline {

struct RankDump {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string job;
  bool exited = false;
  uint64_t process_key = 0;
  std::map<uint32_t, analysis::OpSig> sigs;  // by sig_id
  std::string packed;                        // n * sizeof(xpu_record_v1)
  uint64_t bad_records = 0;                  // sig_id undefined: skipped when unpacked

  size_t size() const { return packed.size() / sizeof(xpu_record_v1); }
  xpu_record_v1 Record(size_t i) const {
    xpu_record_v1 r;
    std::memcpy(&r, packed.data() + i * sizeof(xpu_record_v1), sizeof(r));
    return r;
  }
  // "rank 3" or "pid 1234@host" for rank-less processes.
  std::string Label() const;
};

// Signature from the wire, with the formulas of formulas.h applied.
analysis::OpSig ToOpSig(const xpu::v1::Signature& s);
// Takes the records blob by move when `pb` is an rvalue-like scratch object.
// INVALID_ARGUMENT when the blob is not a multiple of 32 bytes.
absl::StatusOr<RankDump> FromProcessBatch(xpu::v1::ProcessBatch pb);

// Unpacks into the analyses' input (records with an undefined sig_id are
// skipped); `offset_ns` is subtracted from every timestamp (clock alignment).
analysis::RankTrace ToRankTrace(const RankDump& d, int64_t offset_ns = 0);

// DIR/raw/<name>.xpb I/O. WriteRaw returns the bytes written.
absl::StatusOr<uint64_t> WriteRaw(const std::string& dir, const xpu::v1::ProcessBatch& pb);
absl::StatusOr<std::vector<RankDump>> ReadRawDir(const std::string& dir);

// Ranks sorted by (rank, pid); rank-less processes last.
void SortRanks(std::vector<RankDump>* ranks);

// 64-bit mix used for flow ids and stable hashes.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Flow id of the collective instance (comm_id, seq); never 0.
inline uint64_t CollectiveFlowId(uint64_t comm_id, uint32_t seq) {
  uint64_t h = Mix64(comm_id ^ Mix64(seq));
  return h ? h : 1;
}
// Collectives whose end is simultaneous on every member (not send/recv).
inline bool IsGroupCollective(uint16_t kind) {
  return kind >= XPU_OP_ALLREDUCE && kind <= XPU_OP_SCATTER;
}

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_RANK_DUMP_H_
