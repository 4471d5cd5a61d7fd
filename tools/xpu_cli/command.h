// tools/xpu_cli/command.h — how the `xpu` commands plug into one CLI11 app
// (common/cli/flags.h). Each command file adds its (sub)commands and their
// options to the app and registers what runs when one of them was parsed;
// RunCli (cli.cc) parses once and runs the one the user named.
//
// The options every command shares (connection, --json, --job) are accepted
// before and after the command word: each command declares them again,
// bound to the same CommonFlags, so that its --help lists them.
// Thread-safety: built and used by one thread per RunCli call.
#ifndef XPU_TOOLS_XPU_CLI_COMMAND_H_
#define XPU_TOOLS_XPU_CLI_COMMAND_H_

#include <functional>
#include <map>
#include <ostream>
#include <string>

#include "common/cli/flags.h"
#include "tools/xpu_cli/connection.h"

namespace xpu::cli {

struct CommonFlags {
  ConnectionFlags connection;
  bool json = false;
  std::string job;
};

// What a command runs with once the line is parsed.
struct Invocation {
  const CommonFlags& common;
  const std::string& env_engine;  // $XPU_ENGINE (may be empty)
  std::ostream& out;
  std::ostream& err;
};
using CommandRunner = std::function<int(const Invocation&)>;
using CommandTable = std::map<const CLI::App*, CommandRunner>;

// Adds the connection options and --json to `cmd`, and --job JOB when
// `with_job`, bound to `common`.
void AddCommonOptions(CLI::App* cmd, CommonFlags* common, bool with_job);

// The commands of each file (hang_cli.cc, profile_cli.cc, timeline_cli.cc,
// calibrate_cli.cc); the core ones are in cli.cc.
void AddHangCommands(CLI::App& xpu, CommonFlags* common, CommandTable* table);
void AddProfileCommand(CLI::App& xpu, CommonFlags* common, CommandTable* table);
void AddTimelineCommands(CLI::App& xpu, CommonFlags* common, CommandTable* table);
void AddCalibrateCommand(CLI::App& xpu, CommonFlags* common, CommandTable* table);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_COMMAND_H_
