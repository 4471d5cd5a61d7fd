// daemon/evidence/ring_progress.cc — see ring_progress.h.
#include "daemon/evidence/ring_progress.h"

#include <cstring>
#include <vector>

#include "common/ring/ring_reader.h"
#include "xpu/ring.h"

namespace xpu::daemon {
namespace {

bool Stable(const void* a, const void* b, size_t n, uint32_t gen) {
  return (gen & 1u) == 0 && memcmp(a, b, n) == 0;
}

}  // namespace

bool ParseProgress(const uint8_t* copy1, const uint8_t* copy2, size_t n,
                   const std::function<std::string(uint32_t)>& name_of,
                   xpu::v1::HangProgress* out) {
  if (n < XPU_RING_PROGRESS_OFFSET + sizeof(xpu_ring_progress_v1)) return false;
  xpu_ring_progress_v1 a, b;
  memcpy(&a, copy1 + XPU_RING_PROGRESS_OFFSET, sizeof(a));
  memcpy(&b, copy2 + XPU_RING_PROGRESS_OFFSET, sizeof(b));
  if (a.magic != XPU_RING_PROGRESS_MAGIC || b.magic != XPU_RING_PROGRESS_MAGIC) return false;
  out->Clear();
  const size_t suspect_bytes = offsetof(xpu_ring_progress_v1, comms);
  if (Stable(&a, &b, suspect_bytes, a.suspect_gen) && a.suspect_sig_id != 0) {
    out->set_suspect(true);
    out->set_suspect_kind(a.suspect_kind);
    out->set_suspect_seq(a.suspect_seq);
    out->set_suspect_stream(a.suspect_stream);
    out->set_suspect_since_ns(a.suspect_since_ns);
    out->set_suspect_detected_ns(a.suspect_detected_ns);
    out->set_suspect_threshold_ns(a.suspect_threshold_ns);
    out->set_suspect_comm_id(a.suspect_comm_id);
    if (name_of) out->set_suspect_name(name_of(a.suspect_sig_id));
  }
  out->set_suspects_total(a.suspects_total);
  for (uint32_t i = 0; i < XPU_RING_PROGRESS_COMMS; ++i) {
    const xpu_comm_progress_v1& c = a.comms[i];
    if (!Stable(&c, &b.comms[i], sizeof(c), c.gen)) continue;  // torn: skip this round
    if (c.comm_id == 0) continue;
    if (c.last_completed_seq > c.last_issued_seq) continue;  // inconsistent: ignore
    if (c.pending_kind != 0 && !xpu_op_is_collective(c.pending_kind)) continue;
    xpu::v1::CommProgress* p = out->add_comms();
    p->set_comm_id(c.comm_id);
    p->set_last_issued_seq(c.last_issued_seq);
    p->set_last_completed_seq(c.last_completed_seq);
    p->set_pending_seq(c.pending_seq);
    p->set_pending_kind(c.pending_kind);
    p->set_pending_bytes(c.pending_bytes);
    p->set_pending_since_ns(c.pending_since_ns);
    p->set_comm_rank(c.comm_rank);
    p->set_comm_nranks(c.comm_nranks);
    p->set_suspect((c.flags & XPU_PROGRESS_SUSPECT) != 0);
    p->set_updated_ns(c.updated_ns);
    if (name_of && c.pending_sig_id != 0) p->set_pending_name(name_of(c.pending_sig_id));
  }
  return true;
}

bool ReadProgress(const ring::RingReader& reader, xpu::v1::HangProgress* out) {
  constexpr size_t kN = XPU_RING_PROGRESS_OFFSET + sizeof(xpu_ring_progress_v1);
  uint8_t a[kN], b[kN];
  auto name_of = [&reader](uint32_t id) -> std::string {
    const ring::SignatureInfo* s = reader.signature(id);
    return s != nullptr ? s->name : std::string();
  };
  // A few rounds: an entry torn in one round is normally stable in the next.
  for (int round = 0; round < 3; ++round) {
    if (!reader.CopyHeaderPage(a, kN) || !reader.CopyHeaderPage(b, kN)) return false;
    if (!ParseProgress(a, b, kN, name_of, out)) return false;
    const xpu_ring_progress_v1* t =
        reinterpret_cast<const xpu_ring_progress_v1*>(a + XPU_RING_PROGRESS_OFFSET);
    int used = 0;
    for (uint32_t i = 0; i < XPU_RING_PROGRESS_COMMS; ++i) used += t->comms[i].comm_id != 0;
    if (out->comms_size() >= used) return true;
  }
  return true;
}

}  // namespace xpu::daemon
