#include "common/wire/record_codec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xpu::wire {
namespace {

enum HeaderBit : uint8_t {
  kCommitNext = 1u << 0,
  kSigPredicted = 1u << 1,
  kFlagsSame = 1u << 2,
  kStreamPredicted = 1u << 3,
  kSeqNext = 1u << 4,
  kLatZero = 1u << 5,
  kDurZero = 1u << 6,
  kStartFromEnd = 1u << 7,
};

constexpr int kSlotBits = 8;
constexpr uint32_t kSlots = 1u << kSlotBits;

inline uint32_t Slot(uint32_t sig_id) { return sig_id & (kSlots - 1); }

// What both sides predict from: the previous record and, per slot of sig_id,
// the sig_id that followed it, its stream and its seq.
struct Context {
  xpu_record_v1 prev{};
  uint32_t next_sig[kSlots] = {};
  uint16_t stream_of[kSlots] = {};
  uint32_t last_seq[kSlots] = {};

  void Remember(const xpu_record_v1& r) {
    next_sig[Slot(prev.sig_id)] = r.sig_id;
    const uint32_t s = Slot(r.sig_id);
    stream_of[s] = r.stream;
    last_seq[s] = r.seq;
    prev = r;
  }
};

// Positioned records (Ingest) count up by one; records without a position
// (commit 0: timeline dumps, tools) stay at 0.
inline uint32_t NextCommit(uint32_t prev) { return prev == 0 ? 0 : prev + 1u; }

inline uint64_t ZigZag64(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag64(uint64_t v) {
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}
inline uint32_t ZigZag32(int32_t v) {
  return (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31);
}
inline int32_t UnZigZag32(uint32_t v) { return static_cast<int32_t>((v >> 1) ^ (~(v & 1) + 1)); }

// Writes v as LEB128 at p (room for 10 bytes); returns the end.
inline char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// Reads a canonical LEB128 value of at most `max_bits` bits. Returns false on
// a truncated, overlong, non-canonical or too-large value.
inline bool GetVarint(const uint8_t*& p, const uint8_t* end, int max_bits, uint64_t* v) {
  if (p != end && *p < 0x80) {  // the common one-byte case
    *v = *p++;
    return true;
  }
  uint64_t out = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    const uint64_t part = b & 0x7f;
    if (shift == 63 && part > 1) return false;  // more than 64 bits
    out |= part << shift;
    if (b < 0x80) {
      if (b == 0 && shift > 0) return false;  // non-canonical trailing zero byte
      if (max_bits < 64 && (out >> max_bits) != 0) return false;
      *v = out;
      return true;
    }
  }
  return false;
}

constexpr size_t kMaxRecordBytes = 1 + 5 + 5 + 3 + 3 + 5 + 5 + 5 + 10;

}  // namespace

void EncodeCompactRecords(const xpu_record_v1* records, size_t n, std::string* out) {
  const size_t base = out->size();
  out->resize(base + 1 + 10 + n * kMaxRecordBytes);
  char* p = out->data() + base;
  *p++ = static_cast<char>(kCompactVersion);
  p = PutVarint(p, n);
  Context ctx;
  const xpu_record_v1& prev = ctx.prev;
  for (size_t i = 0; i < n; ++i) {
    const xpu_record_v1& r = records[i];
    char* head = p++;
    uint8_t h = 0;
    const uint32_t commit = NextCommit(prev.commit);
    if (r.commit == commit) {
      h |= kCommitNext;
    } else {
      p = PutVarint(p, ZigZag32(static_cast<int32_t>(r.commit - commit)));
    }
    if (r.sig_id == ctx.next_sig[Slot(prev.sig_id)]) {
      h |= kSigPredicted;
    } else {
      p = PutVarint(p, r.sig_id);
    }
    if (r.flags == prev.flags) {
      h |= kFlagsSame;
    } else {
      p = PutVarint(p, r.flags);
    }
    const uint32_t slot = Slot(r.sig_id);
    if (r.stream == ctx.stream_of[slot]) {
      h |= kStreamPredicted;
    } else {
      p = PutVarint(p, r.stream);
    }
    if (r.seq == ctx.last_seq[slot] + 1u) {
      h |= kSeqNext;
    } else {
      p = PutVarint(p, ZigZag32(static_cast<int32_t>(r.seq - (ctx.last_seq[slot] + 1u))));
    }
    if (r.issue_latency_ns == 0) {
      h |= kLatZero;
    } else {
      p = PutVarint(p, ZigZag32(r.issue_latency_ns));
    }
    if (r.duration == 0) {
      h |= kDurZero;
    } else {
      p = PutVarint(p, r.duration);
    }
    // The smaller of the two deltas; ties go to the start.
    const uint64_t from_start = ZigZag64(static_cast<int64_t>(r.start_ns - prev.start_ns));
    const uint64_t from_end =
        ZigZag64(static_cast<int64_t>(r.start_ns - (prev.start_ns + prev.duration)));
    if (from_end < from_start) {
      h |= kStartFromEnd;
      p = PutVarint(p, from_end);
    } else {
      p = PutVarint(p, from_start);
    }
    *head = static_cast<char>(h);
    ctx.Remember(r);
  }
  out->resize(static_cast<size_t>(p - out->data()));
}

bool CompactProcessBatchRecords(xpu::v1::ProcessBatch* pb) {
  const std::string& raw = pb->records();
  if (raw.empty() || raw.size() % sizeof(xpu_record_v1) != 0) return false;
  // The blob has no alignment guarantee: copy the records out first.
  thread_local std::vector<xpu_record_v1> records;
  records.resize(raw.size() / sizeof(xpu_record_v1));
  std::memcpy(records.data(), raw.data(), raw.size());
  std::string compact;
  EncodeCompactRecords(records.data(), records.size(), &compact);
  if (compact.size() >= raw.size()) return false;
  pb->set_compact_records(std::move(compact));
  pb->clear_records();
  return true;
}

uint64_t CompactRecordCount(std::string_view blob) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(blob.data());
  const uint8_t* end = p + blob.size();
  if (p == end || *p != kCompactVersion) return 0;
  ++p;
  uint64_t n = 0;
  if (!GetVarint(p, end, 64, &n)) return 0;
  const uint64_t bound = std::min<uint64_t>(kMaxCompactRecords, static_cast<uint64_t>(end - p) / 2);
  return std::min(n, bound);
}

absl::Status DecodeCompactRecords(std::string_view blob, std::vector<xpu_record_v1>* out) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(blob.data());
  const uint8_t* const begin = p;
  const uint8_t* const end = p + blob.size();
  if (p == end) return absl::InvalidArgumentError("compact records: empty blob");
  if (*p != kCompactVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("compact records: version ", *p, ", this side speaks ", kCompactVersion));
  }
  ++p;
  uint64_t n = 0;
  if (!GetVarint(p, end, 64, &n)) return absl::InvalidArgumentError("compact records: bad count");
  if (n > kMaxCompactRecords || n > static_cast<uint64_t>(end - p) / 2) {
    return absl::InvalidArgumentError(absl::StrCat("compact records: count ", n, " for ",
                                                   end - p, " bytes"));
  }
  const size_t base = out->size();
  out->resize(base + n);
  xpu_record_v1* w = out->data() + base;
  Context ctx;
  const xpu_record_v1& prev = ctx.prev;
  uint64_t v = 0;
  size_t i = 0;
  auto fail = [&](const char* what) {
    out->resize(base);
    return absl::DataLossError(absl::StrCat("compact records: record ", i, " of ", n, ": bad ",
                                            what, " at byte ", p - begin));
  };
  for (; i < n; ++i) {
    if (p == end) return fail("header");
    const uint8_t h = *p++;
    xpu_record_v1 r;
    r.commit = NextCommit(prev.commit);
    if (!(h & kCommitNext)) {
      if (!GetVarint(p, end, 32, &v)) return fail("commit");
      r.commit += static_cast<uint32_t>(UnZigZag32(static_cast<uint32_t>(v)));
    }
    if (h & kSigPredicted) {
      r.sig_id = ctx.next_sig[Slot(prev.sig_id)];
    } else {
      if (!GetVarint(p, end, 32, &v)) return fail("sig_id");
      r.sig_id = static_cast<uint32_t>(v);
    }
    if (h & kFlagsSame) {
      r.flags = prev.flags;
    } else {
      if (!GetVarint(p, end, 16, &v)) return fail("flags");
      r.flags = static_cast<uint16_t>(v);
    }
    const uint32_t slot = Slot(r.sig_id);
    if (h & kStreamPredicted) {
      r.stream = ctx.stream_of[slot];
    } else {
      if (!GetVarint(p, end, 16, &v)) return fail("stream");
      r.stream = static_cast<uint16_t>(v);
    }
    r.seq = ctx.last_seq[slot] + 1u;
    if (!(h & kSeqNext)) {
      if (!GetVarint(p, end, 32, &v)) return fail("seq");
      r.seq += static_cast<uint32_t>(UnZigZag32(static_cast<uint32_t>(v)));
    }
    if (h & kLatZero) {
      r.issue_latency_ns = 0;
    } else {
      if (!GetVarint(p, end, 32, &v)) return fail("issue_latency_ns");
      r.issue_latency_ns = UnZigZag32(static_cast<uint32_t>(v));
    }
    if (h & kDurZero) {
      r.duration = 0;
    } else {
      if (!GetVarint(p, end, 32, &v)) return fail("duration");
      r.duration = static_cast<uint32_t>(v);
    }
    if (!GetVarint(p, end, 64, &v)) return fail("start_ns");
    const uint64_t start_base =
        (h & kStartFromEnd) ? prev.start_ns + prev.duration : prev.start_ns;
    r.start_ns = start_base + static_cast<uint64_t>(UnZigZag64(v));
    w[i] = r;
    ctx.Remember(r);
  }
  if (p != end) {
    out->resize(base);
    return absl::DataLossError(
        absl::StrCat("compact records: ", end - p, " bytes after the last of ", n, " records"));
  }
  return absl::OkStatus();
}

}  // namespace xpu::wire
