// common/cli/flags.h — the command-line conventions every XPUTimer program
// shares, on top of CLI11 (one flag library for every binary):
//
//   * -h/--help prints the help (every option with its argument, explanation
//     and default, as "[value]") and exits 0;
//   * --version prints "<program> <version>" (the CMake project version) and
//     exits 0;
//   * --flag VALUE and --flag=VALUE are the same; an option given twice keeps
//     the last value; boolean flags take no value (--foreground=yes is an
//     error);
//   * a usage error prints "<program>: <what> (see <program> --help)" on
//     stderr and exits with the program's usage code.
//
// Typical main():
//   CLI::App app = ...; xpu::flags::Configure(app, "xpu-thing");
//   ...add options...
//   if (int rc = xpu::flags::ParseMain(app, argc, argv, 2); rc >= 0) return rc;
//
// Thread-safety: plain functions over the App they are given.
#ifndef XPU_COMMON_CLI_FLAGS_H_
#define XPU_COMMON_CLI_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace xpu::flags {

// The project version, e.g. "0.1.0".
const char* Version();
// "<program> <version>", what --version prints.
std::string VersionLine(const std::string& program);

// Applies the shared conventions to `app` (named `program` in messages):
// --version, the help formatter, option defaults. Call before adding options.
void Configure(CLI::App& app, const std::string& program);

// The same conventions for a subcommand (help formatter, option defaults);
// CLI11 copies them from the parent when the subcommand is created after
// Configure, so this is only needed for apps built separately.
void ConfigureSubcommand(CLI::App& sub);

enum class Outcome {
  kRun,      // parsed: go on
  kHelp,     // --help: `text` is the help of the (sub)command asked about
  kVersion,  // --version: `text` is the version line
  kError,    // usage error: `text` is "<program>: <what> (see <program> --help)"
};
struct ParseResult {
  Outcome outcome = Outcome::kRun;
  std::string text;
};

// Parses `args` (argv without argv[0], in order).
ParseResult Parse(CLI::App& app, const std::vector<std::string>& args);

// For main(): parses argv. Prints the help or the version on `out` and
// returns 0, prints a usage error on `err` and returns `usage_exit_code`, or
// returns -1 when the program should go on.
int ParseMain(CLI::App& app, int argc, const char* const* argv, int usage_exit_code,
              std::ostream& out, std::ostream& err);
int ParseMain(CLI::App& app, int argc, const char* const* argv, int usage_exit_code);

// Validators with the project's wording; they run before CLI11 converts the
// text.
// A decimal integer >= `min` (no sign, no hex or octal). It rewrites the text
// in plain decimal so that "010" is ten, not eight: add it with
// ->transform(), not ->check() (which discards the rewrite).
CLI::Validator UnsignedAtLeast(uint64_t min);
// ... a number > 0 ...
CLI::Validator PositiveNumber();
// ... a number in (0, max].
CLI::Validator PositiveNumberUpTo(double max);

}  // namespace xpu::flags

#endif  // XPU_COMMON_CLI_FLAGS_H_
