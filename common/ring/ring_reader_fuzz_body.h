// ring_reader_fuzz_body.h — one fuzz iteration of the ring reader.
//
// The input becomes the whole ring file (written into a memfd): first as-is,
// and then with a valid header patched over its first bytes so that the
// record, signature and string sections are reached too. Every reader API is
// exercised; the only expectation is "no crash, no sanitizer report, and
// returned records pass validation".
#ifndef XPU_COMMON_RING_RING_READER_FUZZ_BODY_H_
#define XPU_COMMON_RING_RING_READER_FUZZ_BODY_H_

#include <cstddef>
#include <cstdint>

namespace xpu::ring {

// Returns the number of records the reader accepted (for tests).
size_t FuzzRingReaderOnce(const uint8_t* data, size_t size);

}  // namespace xpu::ring

#endif  // XPU_COMMON_RING_RING_READER_FUZZ_BODY_H_
