// dump_fanout — the engine side of `xpu timeline dump`: asks every daemon
// holding one of the requested ranks for its history (Command kind
// "history"), waits for the replies up to a deadline and hands the caller a
// stream of TimelineDumpMessage: progress (at the start and after each daemon
// answer), one `rank` message per process returned, and a final `done` that
// names every rank that did not answer and why.
//
// Records stay packed (32 bytes per op, as the daemon sent them): the engine
// relays the daemon's ProcessBatch without decoding it.
//
// Ranks that have exited are asked for like any other: their daemon keeps
// their history for its retention time (daemon --retain-exited-s).
//
// Fallback: a rank whose daemon does not answer (not connected, error,
// deadline, history expired) is served from the engine's own recent-record
// ring (--ring-records per rank, rebuilt into a ProcessBatch) unless the
// request sets no_engine_fallback; `done.from_engine` lists those ranks with
// the reason their daemon did not answer.
//
// Threading: RunTimelineDump blocks the calling thread (a gRPC handler
// thread) until every daemon answered or the deadline passed. It takes the
// job lock only to read the rank → daemon map, never while waiting.
#ifndef XPU_ENGINE_TIMELINE_DUMP_FANOUT_H_
#define XPU_ENGINE_TIMELINE_DUMP_FANOUT_H_

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/auth/caller.h"
#include "engine/state/command.h"
#include "engine/state/registry.h"
#include "xpu/v1/ingest.pb.h"
#include "xpu/v1/query.pb.h"

namespace xpu::engine::timeline {

// Writes one message to the client; false when the client is gone.
using DumpWriter = std::function<bool(const xpu::v1::TimelineDumpMessage&)>;

inline constexpr std::chrono::milliseconds kDefaultDumpDeadline{30000};

// NOT_FOUND when the engine does not know the job; CANCELLED when the writer
// failed; OK otherwise (missing ranks are data, reported in `done`).
// `caller` goes with the history commands; the daemons leave out processes
// the caller may not act on.
absl::Status RunTimelineDump(Registry& registry, const CommandSender& send,
                             const xpu::v1::TimelineDumpRequest& request, const DumpWriter& write,
                             const xpu::v1::CommandCaller& caller = auth::EngineCaller());

}  // namespace xpu::engine::timeline

#endif  // XPU_ENGINE_TIMELINE_DUMP_FANOUT_H_
