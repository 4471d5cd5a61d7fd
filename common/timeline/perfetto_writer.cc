#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/timeline/proto_encoder.h"
#include "common/timeline/trace_model.h"
#include "common/timeline/trace_writer.h"

namespace xpu::timeline {
namespace {

// Field numbers from Perfetto's published protos (see trace_writer.h).
namespace tp {
constexpr uint32_t kTracePacket = 1;  // Trace.packet
constexpr uint32_t kTimestamp = 8;
constexpr uint32_t kSequenceId = 10;
constexpr uint32_t kTrackEvent = 11;
constexpr uint32_t kInternedData = 12;
constexpr uint32_t kSequenceFlags = 13;
constexpr uint32_t kTrackDescriptor = 60;
constexpr uint64_t kSeqIncrementalStateCleared = 1;
constexpr uint64_t kSeqNeedsIncrementalState = 2;
}  // namespace tp
namespace td {
constexpr uint32_t kUuid = 1, kName = 2, kProcess = 3, kParentUuid = 5;
constexpr uint32_t kPid = 1, kProcessName = 6;  // ProcessDescriptor
}  // namespace td
namespace te {
constexpr uint32_t kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11, kFlowIds = 47,
                   kTerminatingFlowIds = 48;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3;
}  // namespace te
namespace da {
constexpr uint32_t kNameIid = 1, kUint = 3, kInt = 4, kDouble = 5, kString = 6;
}
namespace in {
constexpr uint32_t kEventNames = 2, kDebugAnnotationNames = 3, kIid = 1, kName = 2;
}

class FileOut {
 public:
  explicit FileOut(const std::string& path) : f_(std::fopen(path.c_str(), "wb")) {}
  ~FileOut() {
    if (f_) std::fclose(f_);
  }
  bool ok() const { return f_ != nullptr && !failed_; }
  void Write(const std::string& s) {
    if (f_ && std::fwrite(s.data(), 1, s.size(), f_) != s.size()) failed_ = true;
    bytes_ += s.size();
  }
  bool Close() {
    bool good = f_ != nullptr && std::fclose(f_) == 0 && !failed_;
    f_ = nullptr;
    return good;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  FILE* f_;
  bool failed_ = false;
  uint64_t bytes_ = 0;
};

}  // namespace

int32_t DisplayPid(const RankDump& d, size_t rank_index) {
  return d.rank >= 0 ? d.rank + 1 : 1000000 + static_cast<int32_t>(rank_index);
}

absl::StatusOr<TraceStats> WritePerfettoTrace(const std::vector<RankDump>& ranks,
                                              const ClockAlignment& align,
                                              const std::string& path) {
  FileOut out(path);
  if (!out.ok()) return absl::InternalError(absl::StrCat("cannot open ", path));
  FlowIndex flows;
  flows.Build(ranks, align);
  TraceStats st;
  st.ranks = ranks.size();
  ProtoEncoder pkt, body, sub, top, ann;
  std::string chunk;
  auto emit_packet = [&]() {
    top.Clear();
    top.Message(tp::kTracePacket, pkt);
    chunk += top.data();
    if (chunk.size() > (1 << 20)) {
      out.Write(chunk);
      chunk.clear();
    }
  };
  std::vector<Arg> args;
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankDump& d = ranks[ri];
    const uint64_t seq_id = ri + 1;
    RankLayout L = LayoutRank(d, align.OffsetFor(d.host));

    // Process track.
    sub.Clear();
    sub.Varint(td::kPid, static_cast<uint64_t>(DisplayPid(d, ri)));
    sub.Bytes(td::kProcessName, absl::StrCat(d.Label(), " (", d.host, " pid ", d.pid,
                                             d.exited ? ", exited" : "", ")"));
    body.Clear();
    body.Varint(td::kUuid, ProcessTrackUuid(ri));
    body.Message(td::kProcess, sub);
    pkt.Clear();
    pkt.Varint(tp::kSequenceId, seq_id);
    pkt.Message(tp::kTrackDescriptor, body);
    emit_packet();
    // Child tracks.
    for (uint32_t t = 0; t < L.tracks.size(); ++t) {
      body.Clear();
      body.Varint(td::kUuid, ChildTrackUuid(ri, t));
      body.Bytes(td::kName, L.tracks[t]);
      body.Varint(td::kParentUuid, ProcessTrackUuid(ri));
      pkt.Clear();
      pkt.Varint(tp::kSequenceId, seq_id);
      pkt.Message(tp::kTrackDescriptor, body);
      emit_packet();
    }
    st.tracks += L.tracks.size();

    bool first_event = true;
    for (const TrackSlice& s : L.slices) {
      const analysis::Op& op = *s.op;
      const analysis::OpSig* sig = L.trace.Sig(op.sig_id);
      if (sig == nullptr) continue;  // cannot happen: ToRankTrace skips them
      body.Clear();
      body.Varint(te::kType, s.instant ? te::kInstant : te::kSliceBegin);
      body.Varint(te::kTrackUuid, ChildTrackUuid(ri, s.track));
      body.Varint(te::kNameIid, op.sig_id);
      EventArgs(*sig, op, &args, s.callsite_sig != 0 ? L.trace.Sig(s.callsite_sig) : nullptr);
      for (const Arg& a : args) {
        ann.Clear();
        ann.Varint(da::kNameIid, static_cast<uint64_t>(ArgIndex(a.name) + 1));
        switch (a.type) {
          case Arg::kUint:
            ann.Varint(da::kUint, a.u);
            break;
          case Arg::kInt:
            ann.Int64(da::kInt, a.i);
            break;
          case Arg::kDouble:
            ann.Double(da::kDouble, a.d);
            break;
          case Arg::kString:
            ann.Bytes(da::kString, a.s);
            break;
        }
        body.Message(te::kDebugAnnotations, ann);
      }
      if (IsGroupCollective(op.kind)) {
        const uint64_t fid = CollectiveFlowId(sig->comm_id, op.seq);
        switch (flows.RoleOf(fid, ri, op.start_ns)) {
          case FlowIndex::kNone:
            break;
          case FlowIndex::kLast:
            body.Fixed64(te::kTerminatingFlowIds, fid);
            ++st.flow_events;
            break;
          default:
            body.Fixed64(te::kFlowIds, fid);
            ++st.flow_events;
            break;
        }
      }
      pkt.Clear();
      pkt.Varint(tp::kTimestamp, op.start_ns);
      pkt.Varint(tp::kSequenceId, seq_id);
      pkt.Message(tp::kTrackEvent, body);
      if (first_event) {
        // Interned names for the whole sequence, with the state reset.
        ProtoEncoder interned;
        for (const auto& [id, os] : L.trace.sigs) {
          sub.Clear();
          sub.Varint(in::kIid, id);
          sub.Bytes(in::kName, EventName(os));
          interned.Message(in::kEventNames, sub);
        }
        const auto& names = ArgNames();
        for (size_t i = 0; i < names.size(); ++i) {
          sub.Clear();
          sub.Varint(in::kIid, i + 1);
          sub.Bytes(in::kName, names[i]);
          interned.Message(in::kDebugAnnotationNames, sub);
        }
        pkt.Message(tp::kInternedData, interned);
        pkt.Varint(tp::kSequenceFlags,
                   tp::kSeqIncrementalStateCleared | tp::kSeqNeedsIncrementalState);
        first_event = false;
      } else {
        pkt.Varint(tp::kSequenceFlags, tp::kSeqNeedsIncrementalState);
      }
      emit_packet();
      if (s.instant) {
        ++st.instants;
        continue;
      }
      ++st.slices;
      body.Clear();
      body.Varint(te::kType, te::kSliceEnd);
      body.Varint(te::kTrackUuid, ChildTrackUuid(ri, s.track));
      pkt.Clear();
      pkt.Varint(tp::kTimestamp, op.end_ns());
      pkt.Varint(tp::kSequenceId, seq_id);
      pkt.Message(tp::kTrackEvent, body);
      pkt.Varint(tp::kSequenceFlags, tp::kSeqNeedsIncrementalState);
      emit_packet();
    }
  }
  out.Write(chunk);
  st.bytes = out.bytes();
  if (!out.Close()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return st;
}

}  // namespace xpu::timeline
