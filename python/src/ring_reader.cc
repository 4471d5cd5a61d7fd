// python/src/ring_reader.cc — see ring_reader.h.
#include "ring_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "xpu/formulas.h"

namespace xpu::python {
namespace {

// The Python reader hard-codes these offsets; keep both in step with ring.h.
static_assert(offsetof(xpu_ring_header_v1, job) == 112, "ring.py _IDENTITY");
static_assert(offsetof(xpu_ring_header_v1, write_index) == 1024, "ring.py _LIVE");
static_assert(offsetof(xpu_ring_header_v1, read_index) == 1088, "ring.py _READ_INDEX_OFF");
static_assert(offsetof(xpu_ring_header_v1, counters) == 1152, "ring.py _COUNTERS_OFF");
static_assert(offsetof(xpu_signature_v1, name) == 72, "ring.py _SIG");

// a + b <= limit without overflow.
bool FitsIn(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

// a * b, or false on overflow.
bool Mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace

RingSnapshot ParseRing(const uint8_t* data, size_t size) {
  RingSnapshot s;
  if (size < XPU_RING_HEADER_SIZE) {
    s.error = "ring file too small: " + std::to_string(size) + " bytes";
    return s;
  }
  std::memcpy(&s.header, data, sizeof(s.header));
  const xpu_ring_header_v1& h = s.header;
  if (h.magic != XPU_RING_MAGIC) {
    s.error = "bad magic";
    return s;
  }
  if (h.abi_version != XPU_RECORD_ABI_VERSION) {
    s.error = "unsupported ABI version " + std::to_string(h.abi_version);
    return s;
  }
  if (h.header_size != XPU_RING_HEADER_SIZE || h.record_size != sizeof(xpu_record_v1) ||
      h.signature_size != sizeof(xpu_signature_v1)) {
    s.error = "unexpected header/record/signature size";
    return s;
  }
  const uint64_t cap = h.ring_capacity;
  if (cap == 0 || (cap & (cap - 1)) != 0) {
    s.error = "ring capacity not a power of two";
    return s;
  }
  uint64_t ring_bytes = 0, sig_bytes = 0;
  if (!Mul(cap, sizeof(xpu_record_v1), &ring_bytes) || h.ring_offset < XPU_RING_HEADER_SIZE ||
      !FitsIn(h.ring_offset, ring_bytes, size)) {
    s.error = "record slots outside the file";
    return s;
  }
  if (!Mul(h.sig_capacity, sizeof(xpu_signature_v1), &sig_bytes) ||
      h.sig_offset < XPU_RING_HEADER_SIZE || !FitsIn(h.sig_offset, sig_bytes, size)) {
    s.error = "signature table outside the file";
    return s;
  }
  if (h.str_offset < XPU_RING_HEADER_SIZE || !FitsIn(h.str_offset, h.str_capacity, size)) {
    s.error = "string arena outside the file";
    return s;
  }
  const uint64_t arena_end = std::min<uint64_t>(h.str_used, h.str_capacity);
  const uint8_t* arena = data + h.str_offset;

  for (uint32_t i = 1; i < h.sig_capacity; ++i) {
    SignatureEntry e;
    std::memcpy(&e.raw, data + h.sig_offset + uint64_t{i} * sizeof(xpu_signature_v1),
                sizeof(e.raw));
    if (e.raw.commit == 0) continue;
    if (e.raw.commit != i) {
      ++s.errors.bad_sig_entry;
      continue;
    }
    if (e.raw.name_len <= XPU_SIG_NAME_INLINE) {
      e.name.assign(e.raw.name, e.raw.name_len);
    } else if (FitsIn(e.raw.name_off, e.raw.name_len, arena_end)) {
      e.name.assign(reinterpret_cast<const char*>(arena + e.raw.name_off), e.raw.name_len);
    } else {
      ++s.errors.bad_name;
      e.name.assign(e.raw.name, XPU_SIG_NAME_INLINE);
    }
    s.signatures.emplace(i, std::move(e));
  }

  const uint64_t w = h.write_index;
  const uint64_t first = w > cap ? w - cap : 0;
  const uint8_t* slots = data + h.ring_offset;
  s.records.reserve(static_cast<size_t>(w - first));
  for (uint64_t p = first; p < w; ++p) {
    RecordEntry r;
    r.pos = p;
    std::memcpy(&r.raw, slots + (p & (cap - 1)) * sizeof(xpu_record_v1), sizeof(r.raw));
    if (r.raw.commit != static_cast<uint32_t>(p + 1)) {
      ++s.errors.uncommitted;
      continue;
    }
    if (s.signatures.find(r.raw.sig_id) == s.signatures.end()) {
      ++s.errors.bad_sig_id;
      continue;
    }
    r.duration_ns = xpu_record_duration_ns(&r.raw);
    s.records.push_back(r);
  }
  s.ok = true;
  return s;
}

RingSnapshot ReadRingFile(const std::string& path) {
  RingSnapshot fail;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail.error = "cannot open " + path + ": " + std::strerror(errno);
    return fail;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0 ||
      static_cast<uint64_t>(st.st_size) > kMaxRingFileSize) {
    close(fd);
    fail.error = "cannot size " + path + " (or larger than 4 GiB)";
    return fail;
  }
  // Snapshot by copy: a live producer cannot change bytes while we parse.
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  return ParseRing(buf.data(), got);  // a file that shrank is parsed as read
}

std::vector<SignatureStats> ComputeStats(const RingSnapshot& snap) {
  std::map<uint32_t, std::vector<uint64_t>> durations;
  for (const RecordEntry& r : snap.records) durations[r.raw.sig_id].push_back(r.duration_ns);
  std::vector<SignatureStats> out;
  for (auto& [sig_id, d] : durations) {
    const SignatureEntry& sig = snap.signatures.at(sig_id);  // readers keep only valid ids
    std::sort(d.begin(), d.end());
    const size_t n = d.size();
    const double median =
        (n % 2) ? static_cast<double>(d[n / 2])
                : (static_cast<double>(d[n / 2 - 1]) + static_cast<double>(d[n / 2])) / 2.0;
    SignatureStats st{};
    st.sig_id = sig_id;
    st.name = sig.name;
    st.kind = sig.raw.kind;
    st.count = n;
    st.median_ns = median;
    for (uint64_t v : d) st.total_ns += v;
    if (median > 0 && sig.raw.kind == XPU_OP_GEMM) {
      st.has_tflops = true;
      st.tflops = xpu_sig_flops(&sig.raw) / median / 1e3;
    }
    if (median > 0 && xpu_op_is_collective(sig.raw.kind)) {
      st.has_busbw = true;
      st.busbw_gbps = static_cast<double>(xpu_sig_bytes(&sig.raw)) / median *
                      xpu_busbw_factor(sig.raw.kind, sig.raw.comm_nranks);
    }
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace xpu::python
