// batch_decoder — turns one ProcessBatch from the wire into validated records
// and signatures.
//
// Everything in a ProcessBatch is untrusted network data: the blob length,
// every sig_id and every signature field. Nothing here CHECKs on input; each
// problem is either a Status for the whole batch (malformed framing) or a
// counter (a record that refers to a signature we were never sent is skipped
// and counted).
//
// Thread-safety: SignatureTable is not synchronized; its owner (the process
// state, guarded by the job lock) serializes access. The free functions are
// pure apart from their output arguments.
#ifndef XPU_ENGINE_STATE_BATCH_DECODER_H_
#define XPU_ENGINE_STATE_BATCH_DECODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::engine {

// Protocol version this engine speaks (DaemonHello.protocol_version).
inline constexpr uint32_t kProtocolVersion = 1;
// Largest sig_id accepted: the table is a dense vector indexed by sig_id, so
// the bound also bounds memory per process (a hostile id cannot make us
// allocate gigabytes).
inline constexpr uint32_t kMaxSigId = 1u << 20;

// What the engine keeps per signature: the ABI struct (so formulas.h applies
// unchanged), the full name, and figures precomputed once.
struct SignatureInfo {
  xpu_signature_v1 abi{};  // abi.commit == 0 means "slot empty"
  std::string name;
  double flops = 0;         // xpu_sig_flops
  uint64_t bytes = 0;       // xpu_sig_bytes
  double busbw_factor = 0;  // xpu_busbw_factor
  bool collective = false;
};

// The signatures of a job's processes, held once: the ranks of a job define
// the same signatures (same ABI fields, same names), and each rank's table
// points into the pool instead of holding its own copy. An entry lives as
// long as a table uses it; forgotten entries are swept as the pool grows, so
// it holds at most about twice the signatures in use.
// Thread-safety: as SignatureTable (the job lock).
class SignaturePool {
 public:
  // The shared entry equal to `info` (ABI bytes, name and figures).
  std::shared_ptr<const SignatureInfo> Intern(SignatureInfo info);
  size_t size() const { return by_hash_.size(); }  // entries, used or not yet swept

 private:
  // By a hash of the ABI bytes and the name; equal hashes are compared in full.
  std::unordered_multimap<uint64_t, std::weak_ptr<const SignatureInfo>> by_hash_;
  static constexpr size_t kMaxSameHash = 8;
  size_t sweep_at_ = 64;
};

// Signatures of one process, indexed by sig_id.
class SignatureTable {
 public:
  SignatureTable() = default;
  // Entries come from `pool` (shared with the job's other processes).
  explicit SignatureTable(std::shared_ptr<SignaturePool> pool) : pool_(std::move(pool)) {}
  // nullptr when sig_id was never defined.
  const SignatureInfo* Find(uint32_t sig_id) const {
    if (sig_id == 0 || sig_id >= entries_.size()) return nullptr;
    return entries_[sig_id].get();
  }
  // Inserts or replaces; returns false (and changes nothing) when the id is
  // out of range.
  bool Define(uint32_t sig_id, SignatureInfo info);
  size_t size() const { return defined_; }
  void Clear() {
    entries_.clear();
    entries_.shrink_to_fit();
    defined_ = 0;
  }

 private:
  std::vector<std::shared_ptr<const SignatureInfo>> entries_;
  size_t defined_ = 0;
  std::shared_ptr<SignaturePool> pool_;  // null: entries of this table alone
};

// Figures from decoding one ProcessBatch.
struct DecodeStats {
  uint64_t records = 0;         // accepted
  uint64_t unknown_sig = 0;     // skipped: sig_id not in the table
  uint64_t signatures = 0;      // accepted definitions
  uint64_t bad_signatures = 0;  // skipped: id 0 or >= kMaxSigId
  uint64_t duplicates = 0;      // skipped: a position below *next_position (sent again)
  uint64_t undecodable = 0;     // declared by a compact blob that failed to decode
};

// The records a ProcessBatch carries (raw or compact; for a compact blob the
// count it declares, bounded by its size). What a refusal counts as lost.
uint64_t BatchRecordCount(const xpu::v1::ProcessBatch& pb);

// Of the records the daemon shed without knowing whether an engine had
// stored them (ProcessBatch.unconfirmed_shed), those the process's state
// already holds: the ones at a ring position below `next_position` (before
// this message's records are decoded). A daemon sends records in position
// order, so a shed record below it reached this engine, or the one whose
// history it resumed. Saturating.
uint64_t HeldShedRecords(const xpu::v1::ProcessBatch& pb, uint64_t next_position);

// Framing checks that can be made before touching any state: identity
// present, blob a multiple of 32 bytes, not both a raw and a compact blob,
// at most wire::kMaxShedRuns unconfirmed shed runs, each within its range.
// Returns INVALID_ARGUMENT with a message that names the offending field.
// (Whether a compact blob decodes is only known by decoding it.)
absl::Status ValidateProcessBatch(const xpu::v1::ProcessBatch& pb);

// Converts a wire signature into the ABI struct plus derived figures.
SignatureInfo ToSignatureInfo(const xpu::v1::Signature& s);

// Defines pb.signatures in `table`, then appends every record of pb.records
// (or of pb.compact_records, decoded) whose sig_id is defined to `out`
// (copied out of the blob: the blob has no alignment guarantee). Fails only
// when ValidateProcessBatch fails; nothing is appended then. A compact blob
// that does not decode adds no record: its declared count goes to
// stats->undecodable and *decode_error (when given) says why.
//
// With `next_position`: records whose ring position (pb.first_position and
// the commit word, common.proto) is below *next_position were received
// before and are skipped (stats->duplicates) before anything else looks at
// them; *next_position then moves past the last record. Records without a
// position (commit 0) are taken as they are.
absl::Status DecodeProcessBatch(const xpu::v1::ProcessBatch& pb, SignatureTable& table,
                                std::vector<xpu_record_v1>* out, DecodeStats* stats,
                                uint64_t* next_position = nullptr,
                                std::string* decode_error = nullptr);

// The ring position of a record from its commit word (low 32 bits of
// position + 1) and a position at or below it less than 2^32 behind.
inline uint64_t RecordPosition(uint64_t base, uint32_t commit) {
  return base + static_cast<uint32_t>(commit - 1u - static_cast<uint32_t>(base));
}

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_BATCH_DECODER_H_
