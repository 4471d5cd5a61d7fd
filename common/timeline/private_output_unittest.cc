#include "common/timeline/private_output.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace xpu::timeline {
namespace {

class PrivateOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/xpu-private-output-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    old_umask_ = umask(0);  // modes must not depend on the caller's umask
  }
  void TearDown() override {
    umask(old_umask_);
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  static mode_t Mode(const std::string& p) {
    struct stat st;
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  static std::string Read(const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string dir_;
  mode_t old_umask_ = 0;
};

TEST_F(PrivateOutputTest, NewDirectoryAndFilesArePrivate) {
  const std::string d = dir_ + "/out";
  ASSERT_TRUE(MakePrivateDir(d).ok());
  EXPECT_EQ(Mode(d), 0700u);
  ASSERT_TRUE(WritePrivateFile(d + "/trace.json", "{}").ok());
  EXPECT_EQ(Mode(d + "/trace.json"), 0600u);
  EXPECT_EQ(Read(d + "/trace.json"), "{}");
  // Written again: truncated, still 0600.
  ASSERT_TRUE(WritePrivateFile(d + "/trace.json", "x").ok());
  EXPECT_EQ(Read(d + "/trace.json"), "x");
}

TEST_F(PrivateOutputTest, ExistingDirectoryOfOursIsUsed) {
  const std::string d = dir_ + "/mine";
  ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
  EXPECT_TRUE(MakePrivateDir(d).ok());
  EXPECT_TRUE(MakePrivateDir(d).ok());  // again
}

TEST_F(PrivateOutputTest, SharedOrPlantedDirectoriesAreRefused) {
  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  absl::Status st = MakePrivateDir(shared);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), link.c_str()), 0);
  EXPECT_EQ(MakePrivateDir(link).code(), absl::StatusCode::kFailedPrecondition);
  const std::string file = dir_ + "/file";
  ASSERT_TRUE(WritePrivateFile(file, "").ok());
  EXPECT_EQ(MakePrivateDir(file).code(), absl::StatusCode::kFailedPrecondition);
  if (geteuid() == 0) {  // a directory another user made where ours would go
    const std::string theirs = dir_ + "/theirs";
    ASSERT_EQ(mkdir(theirs.c_str(), 0700), 0);
    ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
    st = MakePrivateDir(theirs);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(st.message().find("another user"), std::string::npos) << st;
  }
}

TEST_F(PrivateOutputTest, PlantedSymlinkIsNotFollowed) {
  const std::string victim = dir_ + "/victim";
  ASSERT_TRUE(WritePrivateFile(victim, "precious").ok());
  const std::string planted = dir_ + "/trace.json";
  ASSERT_EQ(symlink(victim.c_str(), planted.c_str()), 0);
  absl::Status st = WritePrivateFile(planted, "overwritten");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_FALSE(OpenPrivateFile(planted).ok());
}

}  // namespace
}  // namespace xpu::timeline
