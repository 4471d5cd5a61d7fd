// trace_validator — test-only checks of the trace files, independent of the
// writers: the Perfetto file is decoded with protoc-generated code from
// perfetto_trace_subset.proto; the Chrome JSON file with Protobuf's JSON parser into
// google.protobuf.Struct (a complete JSON parser we already link; numbers become doubles).
//
// Perfetto checks: every packet parses; track descriptors have unique uuids
// and child tracks name an existing parent; every TrackEvent names a
// declared track and (for BEGIN/INSTANT) an interned event name of its
// sequence, interned before use after an incremental-state reset; after a
// stable sort by timestamp (what trace processors do), BEGIN/END balance per
// track and END never precedes its BEGIN; every flow id occurs on >= 2 events
// and exactly one of them terminates it.
// JSON checks: the Trace Event Format fields (name, ph, ts, pid, tid; dur for
// "X"), "M" metadata, and flows with one "s" and one "f" per id.
#ifndef XPU_COMMON_TIMELINE_TESTING_TRACE_VALIDATOR_H_
#define XPU_COMMON_TIMELINE_TESTING_TRACE_VALIDATOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xpu::timeline::testing {

struct ValidatedTrace {
  std::vector<std::string> errors;  // empty = valid
  uint64_t packets = 0, tracks = 0, processes = 0;
  uint64_t slices = 0, instants = 0;
  uint64_t flows = 0;                              // distinct flow ids
  std::map<std::string, uint64_t> slices_by_name;  // BEGIN + INSTANT by event name
  std::map<int32_t, std::string> process_names;    // pid -> name
  std::map<int32_t, uint64_t> events_by_pid;       // BEGIN + INSTANT per process
  // "event name|stack" -> events carrying that "callsite" string argument.
  std::map<std::string, uint64_t> callsites;
  uint64_t min_ts = UINT64_MAX, max_ts = 0;
  bool ok() const { return errors.empty(); }
  std::string ErrorText(size_t max = 10) const;
};

ValidatedTrace ValidatePerfettoFile(const std::string& path);
ValidatedTrace ValidateChromeJsonFile(const std::string& path);

}  // namespace xpu::timeline::testing

#endif  // XPU_COMMON_TIMELINE_TESTING_TRACE_VALIDATOR_H_
