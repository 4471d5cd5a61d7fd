// common/cli/flags.cc — see flags.h.
#include "common/cli/flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

#ifndef XPU_VERSION
#error "XPU_VERSION must be defined (the CMake project version)"
#endif

namespace xpu::flags {
namespace {

constexpr size_t kColumn = 30;      // option names and their arguments
constexpr size_t kLineWidth = 100;  // whole help lines

// Word-wraps `text` to `width` columns; existing line breaks are kept.
std::string Wrap(const std::string& text, size_t width) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  bool first_line = true;
  while (std::getline(lines, line)) {
    if (!first_line) out += '\n';
    first_line = false;
    // A line that fits stays as written (aligned examples); longer ones wrap
    // and their continuation lines keep the line's indentation (lists).
    if (line.size() <= width) {
      out += line;
      continue;
    }
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) continue;
    // A bullet ("* ") continues under its text.
    const std::string lead =
        line.substr(0, indent) + (line.compare(indent, 2, "* ") == 0 ? "  " : "");
    std::istringstream words(line);
    std::string word, current = line.substr(0, indent);
    while (words >> word) {
      const bool line_has_words = current.find_first_not_of(' ') != std::string::npos;
      if (line_has_words && current.size() + 1 + word.size() > width) {
        out += current + '\n';
        current = lead;
      }
      if (current.find_first_not_of(' ') != std::string::npos) current += ' ';
      current += word;
    }
    out += current;
  }
  return out;
}

// CLI11's formatter with the project's layout: "--flag ARG   explanation
// [default]", descriptions wrapped to the line width, COMMAND for
// subcommands.
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() {
    column_width(kColumn);
    label("SUBCOMMAND", "COMMAND");
    label("SUBCOMMANDS", "COMMANDS");
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_type_size() != 0 && !opt->get_positional()) {
      if (!opt->get_type_name().empty()) out += " " + opt->get_type_name();
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    }
    return out;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    if (opt->get_required()) desc += " (required)";
    const std::string& def = opt->get_default_str();
    if (opt->get_type_size() != 0 && !def.empty() && def != "[]" && def != "{}") {
      desc += " [" + def + "]";
    }
    return Wrap(desc, kLineWidth - kColumn);
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(),
                             Wrap(sub->get_description(), kLineWidth - kColumn), kColumn);
    return out.str();
  }

  std::string make_description(const CLI::App* app) const override {
    const std::string d = app->get_description();
    return d.empty() ? "" : Wrap(d, kLineWidth) + "\n\n";
  }

  std::string make_footer(const CLI::App* app) const override {
    const std::string f = app->get_footer();
    return f.empty() ? "" : Wrap(f, kLineWidth) + "\n";
  }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string out = "Usage: " + name;
    if (!app->get_options([](const CLI::Option* o) { return o->nonpositional(); }).empty()) {
      out += " [OPTIONS]";
    }
    for (const CLI::Option* p : app->get_options(
             [](const CLI::Option* o) { return o->get_positional() && !o->get_group().empty(); })) {
      out += " " + make_option_usage(p);
    }
    const bool has_commands =
        !app->get_subcommands([](const CLI::App* s) {
              return !s->get_disabled() && !s->get_name().empty() && !s->get_group().empty();
            })
             .empty();
    if (has_commands) out += app->get_require_subcommand_min() == 0 ? " [COMMAND]" : " COMMAND";
    return out + "\n";
  }
};

// The chain of (sub)commands that were parsed, e.g. "xpu timeline dump".
std::string CommandChain(const CLI::App& app) {
  std::string chain = app.get_name();
  const CLI::App* a = &app;
  while (true) {
    std::vector<const CLI::App*> subs =
        a->get_subcommands([](const CLI::App* s) { return s->parsed() && !s->get_name().empty(); });
    if (subs.empty()) break;
    a = subs.front();
    chain += " " + a->get_name();
  }
  return chain;
}

// CLI11 messages start with a capital ("The following argument..."); ours
// continue a "program: " prefix.
std::string Lowercased(std::string s) {
  if (s.size() > 1 && std::isupper(static_cast<unsigned char>(s[0])) &&
      !std::isupper(static_cast<unsigned char>(s[1]))) {
    s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  }
  return s;
}

bool ParseDecimal(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  errno = 0;
  char* end = nullptr;
  *out = std::strtoull(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

}  // namespace

const char* Version() { return XPU_VERSION; }

std::string VersionLine(const std::string& program) { return program + " " + Version(); }

void ConfigureSubcommand(CLI::App& sub) {
  sub.formatter(std::make_shared<HelpFormatter>());
  sub.option_defaults()->always_capture_default()->disable_flag_override()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
}

void Configure(CLI::App& app, const std::string& program) {
  app.name(program);
  ConfigureSubcommand(app);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("--version", VersionLine(program), "print the version and exit");
}

ParseResult Parse(CLI::App& app, const std::vector<std::string>& args) {
  // CLI11 takes the arguments in reverse order.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return {Outcome::kHelp, app.help()};
  } catch (const CLI::CallForAllHelp&) {
    return {Outcome::kHelp, app.help("", CLI::AppFormatMode::All)};
  } catch (const CLI::CallForVersion& v) {
    return {Outcome::kVersion, std::string(v.what()) + "\n"};
  } catch (const CLI::ParseError& e) {
    return {Outcome::kError, app.get_name() + ": " + Lowercased(e.what()) + " (see " +
                                 CommandChain(app) + " --help)\n"};
  }
  return {Outcome::kRun, ""};
}

int ParseMain(CLI::App& app, int argc, const char* const* argv, int usage_exit_code,
              std::ostream& out, std::ostream& err) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  ParseResult r = Parse(app, args);
  switch (r.outcome) {
    case Outcome::kRun:
      return -1;
    case Outcome::kHelp:
    case Outcome::kVersion:
      out << r.text << std::flush;
      return 0;
    case Outcome::kError:
      err << r.text << std::flush;
      return usage_exit_code;
  }
  return usage_exit_code;
}

int ParseMain(CLI::App& app, int argc, const char* const* argv, int usage_exit_code) {
  return ParseMain(app, argc, argv, usage_exit_code, std::cout, std::cerr);
}

CLI::Validator UnsignedAtLeast(uint64_t min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        uint64_t v = 0;
        if (!ParseDecimal(s, &v) || v < min) {
          return "needs an integer >= " + std::to_string(min) + ", got '" + s + "'";
        }
        s = std::to_string(v);
        return "";
      },
      "");
}

CLI::Validator PositiveNumber() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        if (!ParseDouble(s, &v) || v <= 0) return "'" + s + "' is not a positive number";
        return "";
      },
      "");
}

CLI::Validator PositiveNumberUpTo(double max) {
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        double v = 0;
        if (!ParseDouble(s, &v) || v <= 0 || v > max) {
          std::ostringstream m;
          m << "needs a number in (0, " << max << "], got '" << s << "'";
          return m.str();
        }
        return "";
      },
      "");
}

}  // namespace xpu::flags
