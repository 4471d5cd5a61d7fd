// trace_writer — writes a timeline dump as a Perfetto protobuf trace
// (perfetto_writer.cc) or a Chrome trace-event JSON file
// (chrome_json_writer.cc). Both draw the model of trace_model.h with the
// clock offsets of clock_align.h applied.
//
// Perfetto (https://perfetto.dev/docs/reference/synthetic-track-event):
// a Trace is `repeated TracePacket packet = 1`; every packet is written as
// soon as it is built, so memory stays at one rank's ops. Each rank is one
// packet sequence (trusted_packet_sequence_id = position + 1) whose first
// event clears the incremental state and interns the event names
// (iid = sig_id) and the argument names (iid = ArgNames() index + 1).
// Field numbers (perfetto/protos/perfetto/trace/...): TracePacket
// timestamp 8, trusted_packet_sequence_id 10, track_event 11, interned_data
// 12, sequence_flags 13, track_descriptor 60; TrackDescriptor uuid 1, name 2,
// process 3, parent_uuid 5; ProcessDescriptor pid 1, process_name 6;
// TrackEvent debug_annotations 4, type 9, name_iid 10, track_uuid 11,
// flow_ids 47 (fixed64); DebugAnnotation name_iid 1, uint_value 3, int_value 4,
// double_value 5, string_value 6; InternedData event_names 2,
// debug_annotation_names 3; EventName / DebugAnnotationName iid 1, name 2.
//
// Chrome JSON (Trace Event Format): {"traceEvents": [...]} with "X"
// complete events, "i" instants, "M" process/thread names and "s"/"t"/"f"
// flow events; ts and dur in microseconds relative to otherData.base_ns
// (absolute epoch microseconds do not fit a double at ns resolution).
//
// Thread-safety: pure functions; one call writes one file.
#ifndef XPU_COMMON_TIMELINE_TRACE_WRITER_H_
#define XPU_COMMON_TIMELINE_TRACE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/timeline/clock_align.h"
#include "common/timeline/rank_dump.h"

namespace xpu::timeline {

struct TraceStats {
  uint64_t ranks = 0;
  uint64_t tracks = 0;  // child tracks (not counting process tracks)
  uint64_t slices = 0;
  uint64_t instants = 0;
  uint64_t flow_events = 0;  // events carrying a flow id
  uint64_t bytes = 0;        // file size
};

// Perfetto track uuids: process track of rank position i, and its tracks.
inline uint64_t ProcessTrackUuid(size_t rank_index) {
  return (static_cast<uint64_t>(rank_index) + 1) << 20;
}
inline uint64_t ChildTrackUuid(size_t rank_index, uint32_t track) {
  return ProcessTrackUuid(rank_index) + track + 1;
}
// Synthetic pid shown for a process: rank + 1 (pid 0 is special in
// trace viewers), 1000000 + position for rank-less processes.
int32_t DisplayPid(const RankDump& d, size_t rank_index);

absl::StatusOr<TraceStats> WritePerfettoTrace(const std::vector<RankDump>& ranks,
                                              const ClockAlignment& align, const std::string& path);
absl::StatusOr<TraceStats> WriteChromeJson(const std::vector<RankDump>& ranks,
                                           const ClockAlignment& align, const std::string& path);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_TRACE_WRITER_H_
