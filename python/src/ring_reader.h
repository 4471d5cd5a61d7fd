// python/src/ring_reader.h — parses a snapshot of a ring file
// (include/xpu/ring.h) into plain C++ values for the _xputimer_native module.
//
// The bytes are untrusted: every offset/size is checked against the snapshot
// size with overflow-safe arithmetic, every sig_id against the table, every
// name against the arena. Malformed entries are counted in RingErrors; only
// an unusable header fails the parse (ok == false, error set). The output
// matches xputimer/ring.py field for field (the tests compare them).
//
// Why not the shared reader (common/ring/ring_reader.h) that xpu-daemon and
// xpu-ring-dump use: this module is imported into the training process,
// where nothing of ours may link Abseil or install signal handlers, and the
// shared reader reports through absl::Status and guards its mapping with a
// process-wide SIGBUS handler. It also answers another question: it
// consumes a live ring (read index, abandoned slots, stricter layout
// checks), while this parser reads a snapshot copy and must accept and
// reject exactly what ring.py does (test_ring.py compares them on
// corrupted files). Both follow include/xpu/ring.h.
//
// Thread-safety: pure functions over caller-owned memory.
#ifndef XPU_PYTHON_RING_READER_H_
#define XPU_PYTHON_RING_READER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::python {

struct RingErrors {
  uint64_t uncommitted = 0;    // slot not committed for its position (in flight, lapped, torn)
  uint64_t bad_sig_id = 0;     // record names a signature that is not published
  uint64_t bad_sig_entry = 0;  // signature entry with a commit word that is not its index
  uint64_t bad_name = 0;       // arena name out of bounds: inline prefix used
};

struct SignatureEntry {
  xpu_signature_v1 raw;  // copied out; name fields as stored
  std::string name;      // resolved name bytes (inline or arena), not yet UTF-8 checked
};

struct RecordEntry {
  uint64_t pos;
  xpu_record_v1 raw;
  uint64_t duration_ns;  // honours XPU_REC_DUR_US
};

struct RingSnapshot {
  bool ok = false;
  std::string error;
  xpu_ring_header_v1 header{};  // copied out (identity, indices, counters)
  std::map<uint32_t, SignatureEntry> signatures;
  std::vector<RecordEntry> records;  // in ring order
  RingErrors errors;
};

// Parses `size` bytes of a ring file.
RingSnapshot ParseRing(const uint8_t* data, size_t size);

// Reads the file at `path` (at most kMaxRingFileSize bytes) and parses it.
constexpr uint64_t kMaxRingFileSize = 1ull << 32;
RingSnapshot ReadRingFile(const std::string& path);

struct SignatureStats {
  uint32_t sig_id;
  std::string name;
  uint32_t kind;
  uint64_t count;
  double median_ns;
  uint64_t total_ns;
  bool has_tflops;
  double tflops;
  bool has_busbw;
  double busbw_gbps;
};

// Per-signature stats sorted by sig_id (see ring.py stats()).
std::vector<SignatureStats> ComputeStats(const RingSnapshot& snap);

}  // namespace xpu::python

#endif  // XPU_PYTHON_RING_READER_H_
