#include "common/analysis/trace.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "xpu/formulas.h"

namespace xpu::analysis {

OpSig OpSigFromAbi(const xpu_signature_v1& s, std::string name) {
  OpSig o;
  o.kind = s.kind;
  o.dtype = s.dtype;
  o.m = s.m;
  o.n = s.n;
  o.k = s.k;
  o.batch = s.batch ? s.batch : 1;
  o.gemm_flags = s.gemm_flags;
  o.name = std::move(name);
  o.flops = xpu_sig_flops(&s);
  o.bytes = xpu_sig_bytes(&s);
  o.busbw_factor = xpu_busbw_factor(s.kind, s.comm_nranks);
  o.comm_id = s.comm_id;
  o.comm_rank = s.comm_rank;
  o.comm_nranks = s.comm_nranks;
  o.peer = s.peer;
  return o;
}

Op OpFromRecord(const xpu_record_v1& r, uint16_t kind, int64_t offset_ns) {
  Op op;
  op.sig_id = r.sig_id;
  op.kind = kind;
  op.flags = r.flags;
  op.stream = r.stream;
  op.seq = r.seq;
  op.start_ns = static_cast<uint64_t>(static_cast<int64_t>(r.start_ns) - offset_ns);
  op.dur_ns = xpu_record_duration_ns(&r);
  op.issue_latency_ns = r.issue_latency_ns;
  return op;
}

SigTable& SigTable::operator=(const std::map<uint32_t, OpSig>& m) {
  entries_.clear();
  entries_.reserve(m.size());
  for (const auto& [id, sig] : m) entries_.push_back({id, std::make_shared<OpSig>(sig)});
  return *this;
}

OpSig& SigTable::operator[](uint32_t id) {
  auto it = entries_.begin() + (Lower(id) - entries_.cbegin());
  if (it == entries_.end() || it->id != id) {
    it = entries_.insert(it, {id, std::make_shared<OpSig>()});
  } else if (it->sig.use_count() > 1) {
    it->sig = std::make_shared<OpSig>(*it->sig);  // shared: this table's own copy
  }
  return *it->sig;
}

void SigTable::Share(uint32_t id, std::shared_ptr<const OpSig> sig) {
  // Held as non-const so that operator[] can hand out a copy's reference;
  // a shared entry is never written through (operator[] copies it first).
  std::shared_ptr<OpSig> s = std::const_pointer_cast<OpSig>(std::move(sig));
  auto it = entries_.begin() + (Lower(id) - entries_.cbegin());
  if (it == entries_.end() || it->id != id) {
    entries_.insert(it, {id, std::move(s)});
  } else {
    it->sig = std::move(s);
  }
}

const OpSig& SigTable::at(uint32_t id) const {
  const OpSig* s = Find(id);
  if (s == nullptr) throw std::out_of_range("SigTable::at: no signature " + std::to_string(id));
  return *s;
}

void RankTrace::Sort() {
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Op& a, const Op& b) { return a.start_ns < b.start_ns; });
}

}  // namespace xpu::analysis
