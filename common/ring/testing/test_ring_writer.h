// test_ring_writer.h — a producer written from ring.h alone, for tests.
//
// It creates a ring memfd exactly as ring.h describes (page-aligned sections,
// identity written before hand-over, CAS reservation against read_index,
// payload then release-store of commit) so that the daemon's reader is tested
// against the specification rather than against the hook's implementation.
// Also exposes raw access so tests can corrupt any byte. Test-only.
#ifndef XPU_COMMON_RING_TESTING_TEST_RING_WRITER_H_
#define XPU_COMMON_RING_TESTING_TEST_RING_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::ring::testing {

struct TestRingConfig {
  uint32_t ring_capacity = 1024;
  uint32_t sig_capacity = 64;
  uint64_t str_capacity = 4096;
  std::string job = "job-1";
  std::string job_name = "unit";
  std::string host = "node0";
  int32_t pid = 4242;
  int32_t rank = 0;
  int32_t world_size = 1;
  uint64_t start_time_ticks = 777;
  bool sealable = true;  // MFD_ALLOW_SEALING
};

class TestRingWriter {
 public:
  // Creates a sealable memfd holding an initialised ring.
  static std::unique_ptr<TestRingWriter> Create(const TestRingConfig& config);
  ~TestRingWriter();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  uint8_t* base() { return base_; }
  xpu_ring_header_v1* header() { return reinterpret_cast<xpu_ring_header_v1*>(base_); }
  xpu_record_v1* slot(uint64_t position);
  xpu_signature_v1* sig_entry(uint32_t id);

  // Publishes a signature; long names go to the string arena. Returns its id
  // (0 when the table is full).
  uint32_t AddSignature(uint16_t kind, const std::string& name,
                        const xpu_signature_v1* shape = nullptr);
  // Produces one record per ring.h; returns false (and counts dropped_full)
  // when the ring is full.
  bool Write(const xpu_record_v1& rec);
  // Produces ignoring read_index, as a producer that laps the reader would.
  void WriteOverwriting(const xpu_record_v1& rec);
  // Reserves a position and never commits it (a producer that crashed
  // mid-write). Returns the position.
  uint64_t ReserveWithoutCommit();

  static xpu_record_v1 MakeRecord(uint32_t sig_id, uint64_t start_ns, uint32_t duration,
                                  uint16_t flags);

 private:
  TestRingWriter() = default;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t next_sig_ = 1;
};

}  // namespace xpu::ring::testing

#endif  // XPU_COMMON_RING_TESTING_TEST_RING_WRITER_H_
