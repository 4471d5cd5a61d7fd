#include "engine/state/batch_builder.h"

namespace xpu::engine {

xpu::v1::DaemonMessage MakeHello(const std::string& daemon_id, const std::string& host,
                                 uint32_t protocol_version, const std::string& token) {
  xpu::v1::DaemonMessage m;
  xpu::v1::DaemonHello* h = m.mutable_hello();
  h->set_protocol_version(protocol_version);
  h->set_daemon_id(daemon_id);
  h->set_host(host);
  h->set_pid(1);
  h->set_version("test");
  h->set_token(token);
  return m;
}

xpu::v1::Signature MakeGemmSignature(uint32_t id, uint32_t m, uint32_t n, uint32_t k) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(XPU_OP_GEMM);
  s.set_dtype(XPU_DT_BF16);
  s.set_out_dtype(XPU_DT_BF16);
  s.set_name("cublasGemmEx");
  s.set_m(m);
  s.set_n(n);
  s.set_k(k);
  s.set_batch(1);
  s.set_comm_rank(-1);
  s.set_peer(-1);
  return s;
}

xpu::v1::Signature MakeCollectiveSignature(uint32_t id, uint32_t kind, uint64_t count,
                                           uint32_t dtype, uint64_t comm_id, int32_t comm_rank,
                                           int32_t nranks) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(kind);
  s.set_dtype(dtype);
  s.set_name("nccl");
  s.set_count(count);
  s.set_comm_id(comm_id);
  s.set_comm_rank(comm_rank);
  s.set_comm_nranks(nranks);
  s.set_peer(-1);
  return s;
}

xpu::v1::Signature MakeKernelSignature(uint32_t id, const std::string& name) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(XPU_OP_KERNEL);
  s.set_name(name);
  s.set_comm_rank(-1);
  s.set_peer(-1);
  return s;
}

xpu_record_v1 MakeRecord(uint32_t sig_id, uint64_t start_ns, uint32_t duration_ns, uint32_t seq,
                         uint16_t flags) {
  xpu_record_v1 r{};
  r.sig_id = sig_id;
  r.start_ns = start_ns;
  r.duration = duration_ns;
  r.seq = seq;
  r.flags = flags;
  return r;
}

void AppendRecords(xpu::v1::ProcessBatch* pb, const std::vector<xpu_record_v1>& records) {
  pb->mutable_records()->append(reinterpret_cast<const char*>(records.data()),
                                records.size() * sizeof(xpu_record_v1));
}

void SetIdentity(xpu::v1::ProcessBatch* pb, const std::string& job, int32_t rank,
                 const std::string& host, int32_t pid) {
  xpu::v1::ProcessIdentity* id = pb->mutable_identity();
  id->set_job(job);
  id->set_host(host);
  id->set_pid(pid);
  id->set_rank(rank);
  id->set_local_rank(rank >= 0 ? rank % 8 : -1);
  id->set_world_size(0);
  pb->set_process_key(static_cast<uint64_t>(pid));
}

}  // namespace xpu::engine
