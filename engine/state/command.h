// engine/state/command.h — a command to one daemon and its pending reply.
//
// The engine sends commands (history dumps, hang evidence, profiling
// windows) to a daemon over the daemon's Ingest stream; the reply arrives
// later on the same stream. The hang monitor, the profile monitor and the
// timeline fan-out all send through a CommandSender (in production
// IngestService::SendCommand, in tests a fake) and wait on its future, so
// they depend on this header only, not on the ingest service.
#ifndef XPU_ENGINE_STATE_COMMAND_H_
#define XPU_ENGINE_STATE_COMMAND_H_

#include <functional>
#include <future>
#include <string>

#include "absl/status/statusor.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::engine {

// Resolves with the daemon's CommandReply, or an error when the daemon is
// not connected (NOT_FOUND), its stream ended (UNAVAILABLE) or the command's
// deadline passed (DEADLINE_EXCEEDED).
using CommandFuture = std::future<absl::StatusOr<xpu::v1::CommandReply>>;

// Sends `cmd` to the daemon `daemon_id`; command_id is assigned when 0.
using CommandSender = std::function<CommandFuture(const std::string& daemon_id, xpu::v1::Command)>;

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_COMMAND_H_
