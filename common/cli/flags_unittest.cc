#include "common/cli/flags.h"

#include <gtest/gtest.h>

#include <sstream>

namespace xpu::flags {
namespace {

struct Options {
  std::string name = "default-name";
  uint64_t count = 7;
  double seconds = 1.5;
  bool verbose = false;
};

void AddOptions(CLI::App& app, Options* o) {
  app.add_option("--name", o->name, "a name")->type_name("NAME");
  app.add_option("--count", o->count, "how many")->type_name("N")->transform(UnsignedAtLeast(1));
  app.add_option("--seconds", o->seconds, "how long")
      ->type_name("S")
      ->check(PositiveNumberUpTo(60));
  app.add_flag("--verbose", o->verbose, "say more");
}

TEST(FlagsTest, BothValueSyntaxesAndLastWins) {
  CLI::App app;
  Configure(app, "prog");
  Options o;
  AddOptions(app, &o);
  ParseResult r =
      Parse(app, {"--name", "a", "--count=3", "--name=b", "--verbose", "--seconds", "2.5"});
  ASSERT_EQ(r.outcome, Outcome::kRun) << r.text;
  EXPECT_EQ(o.name, "b");
  EXPECT_EQ(o.count, 3u);
  EXPECT_EQ(o.seconds, 2.5);
  EXPECT_TRUE(o.verbose);
}

TEST(FlagsTest, HelpExplainsEveryOptionWithItsDefault) {
  CLI::App app("prog: does things.");
  Configure(app, "prog");
  Options o;
  AddOptions(app, &o);
  ParseResult r = Parse(app, {"--help"});
  ASSERT_EQ(r.outcome, Outcome::kHelp);
  EXPECT_NE(r.text.find("prog: does things."), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("Usage: prog [OPTIONS]"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("--name NAME"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("a name [default-name]"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("how many [7]"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("--version"), std::string::npos) << r.text;
  EXPECT_EQ(r.text.find("say more ["), std::string::npos) << "flags show no default\n" << r.text;
  EXPECT_EQ(Parse(app, {"-h"}).outcome, Outcome::kHelp);
}

TEST(FlagsTest, VersionIsTheProjectVersion) {
  CLI::App app;
  Configure(app, "prog");
  ParseResult r = Parse(app, {"--version"});
  ASSERT_EQ(r.outcome, Outcome::kVersion);
  EXPECT_EQ(r.text, std::string("prog ") + Version() + "\n");
  EXPECT_FALSE(std::string(Version()).empty());
}

TEST(FlagsTest, UsageErrorsNameTheProgramAndTheHelp) {
  CLI::App app;
  Configure(app, "prog");
  Options o;
  AddOptions(app, &o);
  for (std::vector<std::string> bad : {std::vector<std::string>{"--bogus"},
                                       {"--name"},
                                       {"positional"},
                                       {"--verbose=yes"},
                                       {"--count", "0"},
                                       {"--count=-1"},
                                       {"--count", "0x10"},
                                       {"--count", "lots"},
                                       {"--seconds", "61"},
                                       {"--seconds", "-1"},
                                       {"--seconds", "nan"}}) {
    ParseResult r = Parse(app, bad);
    EXPECT_EQ(r.outcome, Outcome::kError) << bad.front();
    EXPECT_EQ(r.text.rfind("prog: ", 0), 0u) << r.text;
    EXPECT_NE(r.text.find("(see prog --help)"), std::string::npos) << r.text;
  }
  // Decimal only: a leading zero is not octal.
  ASSERT_EQ(Parse(app, {"--count", "010"}).outcome, Outcome::kRun);
  EXPECT_EQ(o.count, 10u);
}

TEST(FlagsTest, SubcommandHelpAndErrorsNameTheSubcommand) {
  CLI::App app("top");
  Configure(app, "prog");
  CLI::App* sub = app.add_subcommand("sub", "a subcommand");
  std::string job;
  sub->add_option("--job", job, "the job")->type_name("JOB");
  ParseResult r = Parse(app, {"sub", "--help"});
  ASSERT_EQ(r.outcome, Outcome::kHelp);
  EXPECT_NE(r.text.find("--job JOB"), std::string::npos) << r.text;
  r = Parse(app, {"sub", "--bogus"});
  ASSERT_EQ(r.outcome, Outcome::kError);
  EXPECT_NE(r.text.find("(see prog sub --help)"), std::string::npos) << r.text;
  r = Parse(app, {"--help"});
  EXPECT_NE(r.text.find("a subcommand"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("[COMMAND]"), std::string::npos) << r.text;
}

TEST(FlagsTest, ParseMainPrintsAndReturnsTheExitCode) {
  CLI::App app;
  Configure(app, "prog");
  Options o;
  AddOptions(app, &o);
  std::ostringstream out, err;
  const char* help[] = {"prog", "--help"};
  EXPECT_EQ(ParseMain(app, 2, help, 64, out, err), 0);
  EXPECT_NE(out.str().find("--count"), std::string::npos);
  const char* bad[] = {"prog", "--bogus"};
  EXPECT_EQ(ParseMain(app, 2, bad, 64, out, err), 64);
  EXPECT_NE(err.str().find("--bogus"), std::string::npos);
  const char* ok[] = {"prog", "--count", "2"};
  EXPECT_EQ(ParseMain(app, 3, ok, 64, out, err), -1);
}

}  // namespace
}  // namespace xpu::flags
