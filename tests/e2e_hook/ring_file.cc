// tests/e2e_hook/ring_file.cc — see ring_file.h.
#include "ring_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

namespace xpu::e2e {

bool RingFile::Load(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < XPU_RING_HEADER_SIZE) {
    *error = "shorter than a header";
    return false;
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  const xpu_ring_header_v1& h = header;
  if (h.magic != XPU_RING_MAGIC || h.abi_version != XPU_RECORD_ABI_VERSION ||
      h.record_size != sizeof(xpu_record_v1) || h.signature_size != sizeof(xpu_signature_v1) ||
      h.file_size != bytes.size() || h.ring_capacity == 0 ||
      (h.ring_capacity & (h.ring_capacity - 1)) != 0) {
    *error = "bad header identity or layout";
    return false;
  }
  const uint64_t size = bytes.size();
  if (h.ring_offset + uint64_t{h.ring_capacity} * sizeof(xpu_record_v1) > size ||
      h.sig_offset + uint64_t{h.sig_capacity} * sizeof(xpu_signature_v1) > size ||
      h.str_offset + h.str_capacity > size || h.str_used > h.str_capacity) {
    *error = "sections exceed the file";
    return false;
  }
  for (uint32_t i = 1; i < h.sig_capacity; ++i) {
    xpu_signature_v1 s;
    std::memcpy(&s, bytes.data() + h.sig_offset + uint64_t{i} * sizeof(s), sizeof(s));
    if (s.commit != i) continue;
    Signature out{s, {}};
    if (s.name_len <= XPU_SIG_NAME_INLINE) {
      out.name.assign(s.name, strnlen(s.name, std::min<size_t>(s.name_len, XPU_SIG_NAME_INLINE)));
    } else if (uint64_t{s.name_off} + s.name_len <= h.str_used) {
      out.name.assign(bytes.data() + h.str_offset + s.name_off, s.name_len);
    } else {
      out.name = "<bad name>";
    }
    sigs.emplace(i, out);
  }
  const uint64_t end = h.write_index;
  uint64_t begin = h.read_index;
  if (end - begin > h.ring_capacity) begin = end - h.ring_capacity;
  for (uint64_t p = begin; p < end; ++p) {
    xpu_record_v1 r;
    std::memcpy(&r, bytes.data() + h.ring_offset + (p % h.ring_capacity) * sizeof(r), sizeof(r));
    if (r.commit != static_cast<uint32_t>(p + 1)) {
      ++uncommitted;
      continue;
    }
    if (sigs.count(r.sig_id) == 0) ++bad_sig_id;
    records.push_back(r);
  }
  return true;
}

}  // namespace xpu::e2e
