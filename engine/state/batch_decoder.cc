#include "engine/state/batch_decoder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/wire/record_codec.h"
#include "common/wire/signature.h"
#include "xpu/formulas.h"

namespace xpu::engine {

bool SignatureTable::Define(uint32_t sig_id, SignatureInfo info) {
  if (sig_id == 0 || sig_id >= kMaxSigId) return false;
  if (sig_id >= entries_.size()) {
    // Grow geometrically but never past the bound.
    size_t n = std::max<size_t>(sig_id + 1, std::min<size_t>(entries_.size() * 2, kMaxSigId));
    entries_.resize(n);
  }
  if (entries_[sig_id] == nullptr) ++defined_;
  info.abi.commit = sig_id;
  entries_[sig_id] = pool_ ? pool_->Intern(std::move(info))
                           : std::make_shared<const SignatureInfo>(std::move(info));
  return true;
}

std::shared_ptr<const SignatureInfo> SignaturePool::Intern(SignatureInfo info) {
  std::string key(reinterpret_cast<const char*>(&info.abi), sizeof(info.abi));
  const char collective = info.collective ? 1 : 0;
  key.append(reinterpret_cast<const char*>(&info.flops), sizeof(info.flops));
  key.append(reinterpret_cast<const char*>(&info.bytes), sizeof(info.bytes));
  key.append(reinterpret_cast<const char*>(&info.busbw_factor), sizeof(info.busbw_factor));
  key.push_back(collective);
  key += info.name;
  std::weak_ptr<const SignatureInfo>& slot = by_key_[key];
  if (std::shared_ptr<const SignatureInfo> held = slot.lock()) return held;
  auto made = std::make_shared<const SignatureInfo>(std::move(info));
  slot = made;
  if (by_key_.size() >= sweep_at_) {  // forget entries no table uses
    for (auto it = by_key_.begin(); it != by_key_.end();) {
      it = it->second.expired() ? by_key_.erase(it) : std::next(it);
    }
    sweep_at_ = std::max<size_t>(64, 2 * by_key_.size());
  }
  return made;
}

absl::Status ValidateProcessBatch(const xpu::v1::ProcessBatch& pb) {
  if (!pb.has_identity()) {
    return absl::InvalidArgumentError(
        absl::StrCat("process_key ", pb.process_key(), ": ProcessBatch without identity"));
  }
  if (pb.records().size() % sizeof(xpu_record_v1) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("process_key ", pb.process_key(), ": records blob of ", pb.records().size(),
                     " bytes is not a multiple of ", sizeof(xpu_record_v1), " (xpu_record_v1)"));
  }
  if (!pb.records().empty() && !pb.compact_records().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "process_key ", pb.process_key(), ": both records and compact_records are set"));
  }
  return absl::OkStatus();
}

uint64_t BatchRecordCount(const xpu::v1::ProcessBatch& pb) {
  if (!pb.compact_records().empty()) return wire::CompactRecordCount(pb.compact_records());
  return pb.records().size() / sizeof(xpu_record_v1);
}

SignatureInfo ToSignatureInfo(const xpu::v1::Signature& s) {
  SignatureInfo info;
  info.abi = wire::SignatureFromWire(s);
  const xpu_signature_v1& a = info.abi;
  // Names are bounded so that a hostile peer cannot pin memory through them.
  info.name = s.name().substr(0, 4096);
  info.flops = xpu_sig_flops(&a);
  info.bytes = xpu_sig_bytes(&a);
  info.collective = xpu_op_is_collective(a.kind) != 0;
  info.busbw_factor = xpu_busbw_factor(a.kind, a.comm_nranks);
  return info;
}

absl::Status DecodeProcessBatch(const xpu::v1::ProcessBatch& pb, SignatureTable& table,
                                std::vector<xpu_record_v1>* out, DecodeStats* stats,
                                uint64_t* next_position, std::string* decode_error) {
  XPU_RETURN_IF_ERROR(ValidateProcessBatch(pb));
  for (const xpu::v1::Signature& s : pb.signatures()) {
    if (table.Define(s.id(), ToSignatureInfo(s))) {
      ++stats->signatures;
    } else {
      ++stats->bad_signatures;
    }
  }
  const size_t base = out->size();
  if (!pb.compact_records().empty()) {
    absl::Status st = wire::DecodeCompactRecords(pb.compact_records(), out);
    if (!st.ok()) {
      stats->undecodable += wire::CompactRecordCount(pb.compact_records());
      if (decode_error != nullptr) *decode_error = std::string(st.message());
    }
  } else {
    const std::string& blob = pb.records();
    const size_t raw = blob.size() / sizeof(xpu_record_v1);
    out->resize(base + raw);
    // One bulk copy, then compact in place: unknown ids are rare, so this is
    // one memcpy and one pass.
    if (raw > 0) {  // memcpy's pointers must be valid even for zero bytes
      std::memcpy(out->data() + base, blob.data(), raw * sizeof(xpu_record_v1));
    }
  }
  const size_t n = out->size() - base;
  xpu_record_v1* w = out->data() + base;
  const xpu_record_v1* r = w;
  const xpu_record_v1* end = w + n;
  uint64_t unknown = 0;
  uint64_t duplicates = 0;
  const uint64_t first_position = pb.first_position();
  for (; r != end; ++r) {
    if (next_position != nullptr && r->commit != 0) {
      const uint64_t pos = RecordPosition(first_position, r->commit);
      if (pos < *next_position) {
        ++duplicates;
        continue;
      }
      *next_position = pos + 1;
    }
    if (table.Find(r->sig_id) == nullptr) {
      ++unknown;
      continue;
    }
    if (w != r) *w = *r;
    ++w;
  }
  out->resize(static_cast<size_t>(w - out->data()));
  stats->records += n - unknown - duplicates;
  stats->unknown_sig += unknown;
  stats->duplicates += duplicates;
  return absl::OkStatus();
}

}  // namespace xpu::engine
