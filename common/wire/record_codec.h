// record_codec — the compact, lossless encoding of a run of xpu_record_v1
// (include/xpu/record.h) on the daemon -> engine stream
// (ProcessBatch.compact_records, proto/xpu/v1/common.proto).
//
// A record is 32 bytes, but within one process's batch most of it is
// predictable from what came before: the commit word (stream position + 1)
// grows by one, a training loop issues its ops in the same order every step
// (the signature that followed this one last time follows it again, on the
// stream it used last time), a collective's seq is the previous seq of the
// same signature plus one, flags repeat, issue latency and duration are often
// zero, and an op starts shortly after the previous one started or ended.
// The encoding writes one header byte per record saying which fields are as
// predicted, then only the fields that are not, as LEB128 varints (zigzag
// for signed differences). Records of simulated training jobs take 11 to 13
// bytes (bench/wire/record_codec_bench: the timestamps are most of it); the
// worst case (every field unpredictable) is 42.
//
// Blob layout (all integers LEB128, at most 10 bytes, canonical form):
//
//   version (1 byte, kCompactVersion) | record count n | n records
//
//   record:  header byte, then in this order the fields its bits call for
//     bit 0 kCommitNext     clear: zigzag(int32(commit - next)), next =
//                           prev.commit + 1, or 0 when prev.commit is 0
//                           (records without a ring position stay at 0)
//     bit 1 kSigPredicted   clear: sig_id; set: next_sig[slot(prev.sig_id)]
//     bit 2 kFlagsSame      clear: flags (< 2^16); set: prev.flags
//     bit 3 kStreamPredicted clear: stream (< 2^16); set: stream_of[slot(sig_id)]
//     bit 4 kSeqNext        clear: zigzag(int32(seq - (last_seq[slot(sig_id)] + 1)))
//     bit 5 kLatZero        clear: zigzag(issue_latency_ns)
//     bit 6 kDurZero        clear: duration
//     (always)              zigzag(int64(start_ns - base)), base =
//     bit 7 kStartFromEnd     prev.start_ns + prev.duration when set,
//                             prev.start_ns when clear
//   "prev" is the previous record of the blob (all zero before the first).
//   slot(id) is the low kSlotBits bits of a sig_id; next_sig[], stream_of[]
//   and last_seq[] hold, per slot, the sig_id that followed, the stream and
//   the seq of the last record seen there (0 before any). Both sides keep
//   them alike, so collisions cost bytes, never correctness.
//
// Decoding treats the blob as hostile: it never reads past the end, never
// accepts a count above kMaxCompactRecords or above half the blob's bytes
// (a record takes at least two: header and start delta), and
// fails with a reason on any malformed field, non-canonical varint, bad
// version or trailing bytes. Output then holds nothing new.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_WIRE_RECORD_CODEC_H_
#define XPU_COMMON_WIRE_RECORD_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::wire {

inline constexpr uint8_t kCompactVersion = 1;
// Largest record count a blob may declare (a daemon sends at most a few
// hundred thousand records per process per batch).
inline constexpr uint64_t kMaxCompactRecords = 1u << 24;
// Most unconfirmed shed runs one ProcessBatch may name (the daemon folds
// the newest ones together beyond it; the engine refuses more).
inline constexpr int kMaxShedRuns = 64;

// Appends the compact form of records[0, n) to *out.
void EncodeCompactRecords(const xpu_record_v1* records, size_t n, std::string* out);

// The record count the blob declares (0 when its header is unreadable):
// what a refused blob is counted as. Bounded like the decoder bounds it.
uint64_t CompactRecordCount(std::string_view blob);

// Appends the records of `blob` to *out. On error *out is left as it was and
// the status (INVALID_ARGUMENT / DATA_LOSS) says what was wrong and where.
absl::Status DecodeCompactRecords(std::string_view blob, std::vector<xpu_record_v1>* out);

// Moves pb->records (packed xpu_record_v1) into pb->compact_records when the
// compact form is smaller (it nearly always is; random bytes are not).
// Returns whether it did. A blob that is not a multiple of 32 bytes stays.
bool CompactProcessBatchRecords(xpu::v1::ProcessBatch* pb);

}  // namespace xpu::wire

#endif  // XPU_COMMON_WIRE_RECORD_CODEC_H_
