// tests/e2e_hook/ring_file.h — an independent reader of a finished ring file
// (XPU_RING_DIR), written from include/xpu/ring.h alone so that the
// end-to-end tests do not share code with the producer (hook/) or with the
// daemon's reader they might otherwise confirm by construction.
//
// It reads a snapshot of a file whose producer has exited: records at
// positions [max(read_index, write_index - ring_capacity), write_index) whose
// commit word equals position + 1, and signatures whose commit equals their
// index. Anything else is reported in the counts, never trusted.
//
// Thread-safety: a RingFile is an immutable value after Load.
#ifndef XPU_TESTS_E2E_HOOK_RING_FILE_H_
#define XPU_TESTS_E2E_HOOK_RING_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::e2e {

struct Signature {
  xpu_signature_v1 sig;
  std::string name;  // resolved through the string arena when long
};

struct RingFile {
  xpu_ring_header_v1 header{};
  std::map<uint32_t, Signature> sigs;  // by sig_id
  std::vector<xpu_record_v1> records;  // ring order
  uint64_t uncommitted = 0;            // positions whose commit word did not match
  uint64_t bad_sig_id = 0;             // records naming an unpublished signature

  // Loads `path`; false with `*error` set when the file is not a valid ring.
  bool Load(const std::string& path, std::string* error);

  uint64_t counter(xpu_counter c) const { return header.counters[c]; }
  const Signature* sig(uint32_t id) const {
    auto it = sigs.find(id);
    return it == sigs.end() ? nullptr : &it->second;
  }
  // Records whose signature satisfies `pred`.
  template <typename Pred>
  std::vector<xpu_record_v1> Select(Pred pred) const {
    std::vector<xpu_record_v1> out;
    for (const auto& r : records) {
      const Signature* s = sig(r.sig_id);
      if (s != nullptr && pred(*s)) out.push_back(r);
    }
    return out;
  }
};

}  // namespace xpu::e2e

#endif  // XPU_TESTS_E2E_HOOK_RING_FILE_H_
