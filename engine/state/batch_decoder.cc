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

namespace {

bool SameSignature(const SignatureInfo& a, const SignatureInfo& b) {
  return std::memcmp(&a.abi, &b.abi, sizeof(a.abi)) == 0 && a.name == b.name &&
         a.flops == b.flops && a.bytes == b.bytes && a.busbw_factor == b.busbw_factor &&
         a.collective == b.collective;
}

uint64_t HashSignature(const SignatureInfo& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  mix(&s.abi, sizeof(s.abi));
  mix(s.name.data(), s.name.size());
  return h;
}

}  // namespace

std::shared_ptr<const SignatureInfo> SignaturePool::Intern(SignatureInfo info) {
  const uint64_t hash = HashSignature(info);
  auto [first, last] = by_hash_.equal_range(hash);
  size_t same_hash = 0;
  for (auto it = first; it != last; ++it, ++same_hash) {
    std::shared_ptr<const SignatureInfo> held = it->second.lock();
    if (held && SameSignature(*held, info)) return held;
  }
  auto made = std::make_shared<const SignatureInfo>(std::move(info));
  // Many signatures of one hash (crafted collisions): not shared, so that a
  // definition never costs more than a few comparisons.
  if (same_hash >= kMaxSameHash) return made;
  by_hash_.emplace(hash, made);
  if (by_hash_.size() >= sweep_at_) {  // forget entries no table uses
    for (auto it = by_hash_.begin(); it != by_hash_.end();) {
      it = it->second.expired() ? by_hash_.erase(it) : std::next(it);
    }
    sweep_at_ = std::max<size_t>(64, 2 * by_hash_.size());
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
  if (pb.unconfirmed_shed_size() > wire::kMaxShedRuns) {
    return absl::InvalidArgumentError(
        absl::StrCat("process_key ", pb.process_key(), ": ", pb.unconfirmed_shed_size(),
                     " unconfirmed shed runs (at most ", wire::kMaxShedRuns, ")"));
  }
  for (const xpu::v1::ShedRun& r : pb.unconfirmed_shed()) {
    if (r.end_position() < r.first_position() ||
        r.records() > r.end_position() - r.first_position()) {
      return absl::InvalidArgumentError(
          absl::StrCat("process_key ", pb.process_key(), ": unconfirmed shed run of ", r.records(),
                       " records at positions [", r.first_position(), ", ", r.end_position(), ")"));
    }
  }
  return absl::OkStatus();
}

uint64_t HeldShedRecords(const xpu::v1::ProcessBatch& pb, uint64_t next_position) {
  uint64_t held = 0;
  for (const xpu::v1::ShedRun& r : pb.unconfirmed_shed()) {
    uint64_t n = 0;
    if (next_position >= r.end_position()) {
      n = r.records();
    } else if (next_position > r.first_position()) {
      n = std::min(r.records(), next_position - r.first_position());
    }
    held = held + n < held ? UINT64_MAX : held + n;
  }
  return held;
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
