// hook/ring/ring_writer.h — the producer side of the shared-memory ring file
// (include/xpu/ring.h is the specification).
//
// Thread-safety: Write(), AppendString(), PublishSignature() and Count() are
// lock-free and safe from any thread, any number at once (multi-producer).
// Create()/Adopt() run once, single-threaded, before any of them. All access
// to shared words goes through __atomic builtins because the other side of
// the mapping is another process.
#ifndef XPU_HOOK_RING_RING_WRITER_H_
#define XPU_HOOK_RING_RING_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::hook {

struct RingLayout {
  uint32_t ring_capacity = 0;  // records, power of two
  uint32_t sig_capacity = 0;   // entries, entry 0 unused
  uint64_t str_capacity = 0;   // bytes
  uint64_t ring_offset = 0;
  uint64_t sig_offset = 0;
  uint64_t str_offset = 0;
  uint64_t file_size = 0;
};

// Page-aligned sections as drawn in ring.h. `ring_capacity` must be a power of two.
RingLayout ComputeLayout(uint32_t ring_capacity, uint32_t sig_capacity, uint64_t str_capacity);

// Identity written once into the header before hand-over.
struct RingIdentity {
  int32_t pid = 0;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;
  int32_t local_world_size = 0;
  uint64_t created_ns = 0;
  uint64_t start_time_ticks = 0;
  uint32_t timing_policy = 0;
  std::string job;
  std::string host;
  std::string job_name;
};

// True when `path` is a formatted ring file of `pid` that never received a
// record or a signature (safe to replace).
bool IsEmptyRingFile(const std::string& path, int32_t pid);

class RingWriter {
 public:
  RingWriter() = default;
  ~RingWriter();  // unmaps and closes only what Create() made
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // Creates the ring file: a memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING, sealed
  // against shrinking and growing before it is mapped or handed over) when
  // `dir` is empty, else the regular file <dir>/xpu-ring-<pid>.bin created
  // O_EXCL | O_NOFOLLOW, 0600 (so a tool can read it after the process
  // exits). A file cannot be sealed, so `dir` must be a directory of this
  // user that nobody else can write; otherwise the ring is a sealed memfd
  // after all (file_refused() says why; counted as XPU_CNT_RING_FILE_REFUSED).
  // A ring file that its owner or root truncates anyway costs records, not
  // the process: its mapping is guarded (ring_fault_guard.h).
  // Returns false with *error set.
  bool Create(const RingLayout& layout, const RingIdentity& id, const std::string& dir,
              std::string* error);

  // Formats caller-provided zeroed memory of layout.file_size bytes (tests,
  // and readers that want to check the format). Not owned.
  void Adopt(void* base, const RingLayout& layout, const RingIdentity& id);

  bool valid() const { return base_ != nullptr; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  bool sealed() const { return sealed_; }
  // A ring file's mapping is registered with the SIGBUS guard
  // (ring_fault_guard.h): a truncation costs records, never the process.
  bool guarded() const { return guarded_; }
  const std::string& file_refused() const { return file_refused_; }
  uint64_t file_size() const { return layout_.file_size; }
  const RingLayout& layout() const { return layout_; }
  xpu_ring_header_v1* header() const { return header_; }
  xpu_record_v1* slots() const { return slots_; }
  xpu_signature_v1* signatures() const { return sigs_; }
  char* arena() const { return arena_; }

  // Reserves a position, writes `rec` (its commit field is ignored) and
  // commits it. Returns false when the ring is full (counted as
  // XPU_CNT_DROPPED_FULL, the record is lost).
  bool Write(const xpu_record_v1& rec);

  // Appends `len` bytes to the string arena; returns the offset, or
  // UINT32_MAX when the arena is full (counted as XPU_CNT_STR_ARENA_FULL).
  uint32_t AppendString(const char* s, size_t len);

  // Publishes signature entry `id` (1 <= id < sig_capacity): all fields but
  // commit first, commit = id last (release).
  void PublishSignature(uint32_t id, const xpu_signature_v1& sig);

  void Count(xpu_counter c, uint64_t n = 1) {
    if (header_ != nullptr) __atomic_fetch_add(&header_->counters[c], n, __ATOMIC_RELAXED);
  }
  uint64_t Counter(xpu_counter c) const {
    return header_ != nullptr ? __atomic_load_n(&header_->counters[c], __ATOMIC_RELAXED) : 0;
  }
  void SetProducerState(xpu_producer_state s) {
    if (header_ != nullptr) __atomic_store_n(&header_->producer_state, s, __ATOMIC_RELEASE);
  }
  void SetHeartbeat(uint64_t ns) {
    if (header_ != nullptr) __atomic_store_n(&header_->heartbeat_ns, ns, __ATOMIC_RELEASE);
  }
  void SetDevice(int32_t device);  // first traced device only
  // XPU_RING_DIR rings: removes the file when it never received a record or
  // a signature (every preloaded helper process, e.g. a shell, makes one).
  // Returns true if removed. Exit path only.
  bool RemoveFileIfUnused();

 private:
  void Format(const RingIdentity& id);

  RingLayout layout_;
  uint8_t* base_ = nullptr;
  bool owned_ = false;
  int fd_ = -1;
  std::string path_;
  xpu_ring_header_v1* header_ = nullptr;
  xpu_record_v1* slots_ = nullptr;
  xpu_signature_v1* sigs_ = nullptr;
  char* arena_ = nullptr;
  uint64_t mask_ = 0;
  int replaced_ = 0;
  bool sealed_ = false;
  bool guarded_ = false;
  std::string file_refused_;  // why XPU_RING_DIR was not used ("" = it was, or unset)
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_RING_RING_WRITER_H_
