// batch_builder — builds wire messages the way a daemon does: signatures as
// deltas, records packed 32 bytes each. Used by tests, the ingest benchmark
// and the fuzz seeds (the engine itself only decodes).
#ifndef XPU_ENGINE_STATE_BATCH_BUILDER_H_
#define XPU_ENGINE_STATE_BATCH_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "xpu/record.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::engine {

xpu::v1::DaemonMessage MakeHello(const std::string& daemon_id, const std::string& host,
                                 uint32_t protocol_version = 1, const std::string& token = "");
xpu::v1::Signature MakeGemmSignature(uint32_t id, uint32_t m, uint32_t n, uint32_t k);
xpu::v1::Signature MakeCollectiveSignature(uint32_t id, uint32_t kind, uint64_t count,
                                           uint32_t dtype, uint64_t comm_id, int32_t comm_rank,
                                           int32_t nranks);
xpu::v1::Signature MakeKernelSignature(uint32_t id, const std::string& name);
xpu_record_v1 MakeRecord(uint32_t sig_id, uint64_t start_ns, uint32_t duration_ns, uint32_t seq,
                         uint16_t flags = XPU_REC_TIMED);
// Appends packed records to pb.records.
void AppendRecords(xpu::v1::ProcessBatch* pb, const std::vector<xpu_record_v1>& records);
void SetIdentity(xpu::v1::ProcessBatch* pb, const std::string& job, int32_t rank,
                 const std::string& host, int32_t pid);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_BATCH_BUILDER_H_
