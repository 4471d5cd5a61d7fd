#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/timeline/proto_encoder.h"
#include "common/timeline/trace_model.h"
#include "common/timeline/trace_writer.h"
#include "common/timeline/private_output.h"

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
  // 0600, never through a symlink (private_output.h).
  explicit FileOut(const std::string& path) {
    absl::StatusOr<FILE*> f = OpenPrivateFile(path);
    f_ = f.ok() ? *f : nullptr;
  }
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
  FILE* f_ = nullptr;
  bool failed_ = false;
  uint64_t bytes_ = 0;
};

// Writes Trace.packet records to a file in chunks of about 1 MiB. The
// encoders are reused from packet to packet, so that a trace of millions of
// events allocates little: callers fill `pkt` (with `body`, `sub` and `ann`
// as scratch) and call Emit.
class PacketWriter {
 public:
  explicit PacketWriter(const std::string& path) : out_(path) {}
  bool ok() const { return out_.ok(); }
  void Emit() {
    top_.Clear();
    top_.Message(tp::kTracePacket, pkt);
    chunk_ += top_.data();
    if (chunk_.size() > (1 << 20)) {
      out_.Write(chunk_);
      chunk_.clear();
    }
  }
  // Writes what is left; false when the file could not be written.
  bool Close() {
    out_.Write(chunk_);
    return out_.Close();
  }
  uint64_t bytes() const { return out_.bytes(); }

  ProtoEncoder pkt, body, sub, ann;

 private:
  FileOut out_;
  ProtoEncoder top_;
  std::string chunk_;
};

// The rank's process track and its child tracks (streams, host threads).
void WriteTracks(const RankDump& d, size_t ri, const RankLayout& L, PacketWriter& w) {
  const uint64_t seq_id = ri + 1;
  w.sub.Clear();
  w.sub.Varint(td::kPid, static_cast<uint64_t>(DisplayPid(d, ri)));
  w.sub.Bytes(td::kProcessName, absl::StrCat(d.Label(), " (", d.host, " pid ", d.pid,
                                             d.exited ? ", exited" : "", ")"));
  w.body.Clear();
  w.body.Varint(td::kUuid, ProcessTrackUuid(ri));
  w.body.Message(td::kProcess, w.sub);
  w.pkt.Clear();
  w.pkt.Varint(tp::kSequenceId, seq_id);
  w.pkt.Message(tp::kTrackDescriptor, w.body);
  w.Emit();
  for (uint32_t t = 0; t < L.tracks.size(); ++t) {
    w.body.Clear();
    w.body.Varint(td::kUuid, ChildTrackUuid(ri, t));
    w.body.Bytes(td::kName, L.tracks[t]);
    w.body.Varint(td::kParentUuid, ProcessTrackUuid(ri));
    w.pkt.Clear();
    w.pkt.Varint(tp::kSequenceId, seq_id);
    w.pkt.Message(tp::kTrackDescriptor, w.body);
    w.Emit();
  }
}

// The event's arguments as debug annotations of `w.body` (names interned).
void AddAnnotations(const std::vector<Arg>& args, PacketWriter& w) {
  for (const Arg& a : args) {
    w.ann.Clear();
    w.ann.Varint(da::kNameIid, static_cast<uint64_t>(ArgIndex(a.name) + 1));
    switch (a.type) {
      case Arg::kUint:
        w.ann.Varint(da::kUint, a.u);
        break;
      case Arg::kInt:
        w.ann.Int64(da::kInt, a.i);
        break;
      case Arg::kDouble:
        w.ann.Double(da::kDouble, a.d);
        break;
      case Arg::kString:
        w.ann.Bytes(da::kString, a.s);
        break;
    }
    w.body.Message(te::kDebugAnnotations, w.ann);
  }
}

// The interned event and argument names of the rank's sequence, in `w.pkt`
// (written with the sequence's first event, which also resets its state).
void AddInternedData(const RankLayout& L, PacketWriter& w) {
  ProtoEncoder interned;
  for (const auto& [id, os] : L.trace.sigs) {
    w.sub.Clear();
    w.sub.Varint(in::kIid, id);
    w.sub.Bytes(in::kName, EventName(os));
    interned.Message(in::kEventNames, w.sub);
  }
  const auto& names = ArgNames();
  for (size_t i = 0; i < names.size(); ++i) {
    w.sub.Clear();
    w.sub.Varint(in::kIid, i + 1);
    w.sub.Bytes(in::kName, names[i]);
    interned.Message(in::kDebugAnnotationNames, w.sub);
  }
  w.pkt.Message(tp::kInternedData, interned);
  w.pkt.Varint(tp::kSequenceFlags, tp::kSeqIncrementalStateCleared | tp::kSeqNeedsIncrementalState);
}

// One slice (begin and end events) or instant of rank `ri`; a group
// collective carries its flow id so that its members are linked across
// ranks.
void WriteSlice(size_t ri, const RankLayout& L, const TrackSlice& s, const analysis::OpSig& sig,
                const FlowIndex& flows, bool first_event, std::vector<Arg>& args, PacketWriter& w,
                TraceStats& st) {
  const analysis::Op& op = *s.op;
  const uint64_t seq_id = ri + 1;
  w.body.Clear();
  w.body.Varint(te::kType, s.instant ? te::kInstant : te::kSliceBegin);
  w.body.Varint(te::kTrackUuid, ChildTrackUuid(ri, s.track));
  w.body.Varint(te::kNameIid, op.sig_id);
  EventArgs(sig, op, &args, s.callsite_sig != 0 ? L.trace.Sig(s.callsite_sig) : nullptr);
  AddAnnotations(args, w);
  if (IsGroupCollective(op.kind)) {
    const uint64_t fid = CollectiveFlowId(sig.comm_id, op.seq);
    switch (flows.RoleOf(fid, ri, op.start_ns)) {
      case FlowIndex::kNone:
        break;
      case FlowIndex::kLast:
        w.body.Fixed64(te::kTerminatingFlowIds, fid);
        ++st.flow_events;
        break;
      default:
        w.body.Fixed64(te::kFlowIds, fid);
        ++st.flow_events;
        break;
    }
  }
  w.pkt.Clear();
  w.pkt.Varint(tp::kTimestamp, op.start_ns);
  w.pkt.Varint(tp::kSequenceId, seq_id);
  w.pkt.Message(tp::kTrackEvent, w.body);
  if (first_event) {
    AddInternedData(L, w);
  } else {
    w.pkt.Varint(tp::kSequenceFlags, tp::kSeqNeedsIncrementalState);
  }
  w.Emit();
  if (s.instant) {
    ++st.instants;
    return;
  }
  ++st.slices;
  w.body.Clear();
  w.body.Varint(te::kType, te::kSliceEnd);
  w.body.Varint(te::kTrackUuid, ChildTrackUuid(ri, s.track));
  w.pkt.Clear();
  w.pkt.Varint(tp::kTimestamp, op.end_ns());
  w.pkt.Varint(tp::kSequenceId, seq_id);
  w.pkt.Message(tp::kTrackEvent, w.body);
  w.pkt.Varint(tp::kSequenceFlags, tp::kSeqNeedsIncrementalState);
  w.Emit();
}

}  // namespace

int32_t DisplayPid(const RankDump& d, size_t rank_index) {
  return d.rank >= 0 ? d.rank + 1 : 1000000 + static_cast<int32_t>(rank_index);
}

absl::StatusOr<TraceStats> WritePerfettoTrace(const std::vector<RankDump>& ranks,
                                              const ClockAlignment& align,
                                              const std::string& path) {
  PacketWriter w(path);
  if (!w.ok()) return absl::InternalError(absl::StrCat("cannot open ", path));
  FlowIndex flows;
  flows.Build(ranks, align);
  TraceStats st;
  st.ranks = ranks.size();
  std::vector<Arg> args;
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankDump& d = ranks[ri];
    RankLayout L = LayoutRank(d, align.OffsetFor(d.host));
    WriteTracks(d, ri, L, w);
    st.tracks += L.tracks.size();
    bool first_event = true;
    for (const TrackSlice& s : L.slices) {
      const analysis::OpSig* sig = L.trace.Sig(s.op->sig_id);
      if (sig == nullptr) continue;  // cannot happen: ToRankTrace skips them
      WriteSlice(ri, L, s, *sig, flows, first_event, args, w, st);
      first_event = false;
    }
  }
  const bool written = w.Close();
  st.bytes = w.bytes();
  if (!written) return absl::InternalError(absl::StrCat("cannot write ", path));
  return st;
}

}  // namespace xpu::timeline
