// hook/process/config_unittest.cc — environment parsing, including bad values.
// Thread-safety: single-threaded; the environment is injected, never set.
#include "hook/process/config.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace xpu::hook {
namespace {

Config Load(const std::map<std::string, std::string>& env, uid_t uid = 1000) {
  return LoadConfig(
      [&env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      4321, uid, "node7");
}

TEST(ConfigTest, Defaults) {
  Config c = Load({});
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.timing, TimingPolicy::kSampled);
  EXPECT_EQ(c.sample_first, 32u);
  EXPECT_EQ(c.sample_every, 16u);
  EXPECT_EQ(c.kernel_sample_every, 0u);
  EXPECT_EQ(c.ring_capacity, XPU_RING_DEFAULT_CAPACITY);
  EXPECT_EQ(c.sig_capacity, XPU_RING_DEFAULT_SIG_CAPACITY);
  EXPECT_EQ(c.event_pool, 4096u);
  EXPECT_TRUE(c.daemon);
  EXPECT_TRUE(c.ring_dir.empty());
  EXPECT_EQ(c.daemon_socket, "/tmp/xpu-1000/daemon.sock");
  EXPECT_EQ(c.job, "pid-4321@node7");
  EXPECT_EQ(c.host, "node7");
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.local_rank, -1);
  EXPECT_EQ(c.world_size, 0);
  EXPECT_EQ(c.local_world_size, 0);
  EXPECT_EQ(c.clock_recal_s, 5u);
  EXPECT_EQ(c.py_stack_depth, 8u);
}

TEST(ConfigTest, PythonStackDepth) {
  EXPECT_EQ(Load({{"XPU_PY_STACK_DEPTH", "0"}}).py_stack_depth, 0u);
  EXPECT_EQ(Load({{"XPU_PY_STACK_DEPTH", "3"}}).py_stack_depth, 3u);
  EXPECT_EQ(Load({{"XPU_PY_STACK_DEPTH", "1000"}}).py_stack_depth, 64u);  // clamped
  EXPECT_EQ(Load({{"XPU_PY_STACK_DEPTH", "-1"}}).py_stack_depth, 8u);     // malformed: default
  EXPECT_EQ(Load({{"XPU_PY_STACK_DEPTH", "4x"}}).py_stack_depth, 8u);
  EXPECT_EQ(Load({{"XPU_PYTHON", "off"}}).py_stack_depth, 0u);
  EXPECT_EQ(Load({{"XPU_PYTHON", "off"}, {"XPU_PY_STACK_DEPTH", "4"}}).py_stack_depth, 0u);
  EXPECT_EQ(Load({{"XPU_PYTHON", "on"}}).py_stack_depth, 8u);
}

TEST(ConfigTest, ValidValues) {
  Config c = Load({{"XPU_ENABLE", "0"},
                   {"XPU_TIMING", "ALL"},
                   {"XPU_SAMPLE_FIRST", "4"},
                   {"XPU_SAMPLE_EVERY", "0"},
                   {"XPU_KERNEL_SAMPLE_EVERY", "100"},
                   {"XPU_RING_CAPACITY", "1000"},
                   {"XPU_SIG_CAPACITY", "512"},
                   {"XPU_RING_DIR", "/var/tmp"},
                   {"XPU_DAEMON", "off"},
                   {"XPU_DAEMON_SOCKET", "/run/x.sock"},
                   {"XPU_DAEMON_BIN", "/opt/xpu-daemon"},
                   {"XPU_ENGINE", "engine:7441"},
                   {"XPU_JOB_NAME", "llama"},
                   {"XPU_EVENT_POOL", "128"},
                   {"XPU_PENDING_MAX", "1024"},
                   {"RANK", "5"},
                   {"LOCAL_RANK", "1"},
                   {"WORLD_SIZE", "16"},
                   {"LOCAL_WORLD_SIZE", "8"}});
  EXPECT_FALSE(c.enable);
  EXPECT_EQ(c.timing, TimingPolicy::kAll);
  EXPECT_EQ(c.sample_first, 4u);
  EXPECT_EQ(c.sample_every, 0u);
  EXPECT_EQ(c.kernel_sample_every, 100u);
  EXPECT_EQ(c.ring_capacity, 1024u);  // rounded up to a power of two
  EXPECT_EQ(c.sig_capacity, 512u);
  EXPECT_EQ(c.ring_dir, "/var/tmp");
  EXPECT_FALSE(c.daemon);
  EXPECT_EQ(c.daemon_socket, "/run/x.sock");
  EXPECT_EQ(c.daemon_bin, "/opt/xpu-daemon");
  EXPECT_EQ(c.engine, "engine:7441");
  EXPECT_EQ(c.job_name, "llama");
  EXPECT_EQ(c.event_pool, 128u);
  EXPECT_EQ(c.pending_max, 1024u);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.world_size, 16);
  EXPECT_EQ(c.local_world_size, 8);
  EXPECT_EQ(Load({{"XPU_TIMING", "off"}}).timing, TimingPolicy::kOff);
}

TEST(ConfigTest, BadValuesFallBackToDefaults) {
  Config c = Load({{"XPU_ENABLE", "maybe"},
                   {"XPU_TIMING", "sometimes"},
                   {"XPU_SAMPLE_FIRST", "-3"},
                   {"XPU_SAMPLE_EVERY", "12abc"},
                   {"XPU_RING_CAPACITY", "99999999999999999999999"},
                   {"XPU_SIG_CAPACITY", "3"},  // below the minimum
                   {"XPU_EVENT_POOL", ""},
                   {"XPU_PENDING_MAX", " 100"},
                   {"XPU_DAEMON", "2"},
                   {"RANK", "x"},
                   {"WORLD_SIZE", "0"},
                   {"LOCAL_RANK", "-7"}});
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.timing, TimingPolicy::kSampled);
  EXPECT_EQ(c.sample_first, 32u);
  EXPECT_EQ(c.sample_every, 16u);
  EXPECT_EQ(c.ring_capacity, XPU_RING_DEFAULT_CAPACITY);
  EXPECT_EQ(c.sig_capacity, XPU_RING_DEFAULT_SIG_CAPACITY);
  EXPECT_EQ(c.event_pool, 4096u);
  EXPECT_EQ(c.pending_max, 16384u);
  EXPECT_TRUE(c.daemon);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.world_size, 0);
  EXPECT_EQ(c.local_rank, -1);
}

TEST(ConfigTest, JobIdentityPrecedence) {
  EXPECT_EQ(Load({{"XPU_JOB", "j3"}}).job, "j3");
  EXPECT_EQ(Load({{"XPU_JOB", "j3"}, {"SLURM_JOB_ID", "s2"}}).job, "s2");
  EXPECT_EQ(Load({{"XPU_JOB", "j3"}, {"SLURM_JOB_ID", "s2"}, {"TORCHELASTIC_RUN_ID", "t1"}}).job,
            "t1");
  EXPECT_EQ(Load({{"TORCHELASTIC_RUN_ID", ""}}).job, "pid-4321@node7");
  EXPECT_EQ(Load({{"XPU_JOB", "j3"}, {"TORCHELASTIC_RUN_ID", "none"}}).job, "j3");
}

TEST(ConfigTest, SocketPathRules) {
  EXPECT_EQ(Load({{"XDG_RUNTIME_DIR", "/run/user/1000"}}).daemon_socket,
            "/run/user/1000/xpu/daemon.sock");
  EXPECT_EQ(Load({{"XDG_RUNTIME_DIR", "relative"}}).daemon_socket, "/tmp/xpu-1000/daemon.sock");
  EXPECT_EQ(Load({}, 0).daemon_socket, "/run/xpu/daemon.sock");
  EXPECT_EQ(Load({{"XPU_DAEMON_SOCKET", "/s"}, {"XDG_RUNTIME_DIR", "/r"}}).daemon_socket, "/s");
}

TEST(ConfigTest, Parsers) {
  uint64_t u = 7;
  EXPECT_TRUE(ParseUint("42", 100, &u));
  EXPECT_EQ(u, 42u);
  EXPECT_FALSE(ParseUint("101", 100, &u));
  EXPECT_FALSE(ParseUint("-1", 100, &u));
  EXPECT_FALSE(ParseUint("", 100, &u));
  EXPECT_FALSE(ParseUint(nullptr, 100, &u));
  EXPECT_FALSE(ParseUint("4x", 100, &u));
  EXPECT_EQ(u, 42u);
  int64_t i = 0;
  EXPECT_TRUE(ParseInt("-5", -10, 10, &i));
  EXPECT_EQ(i, -5);
  EXPECT_FALSE(ParseInt("-11", -10, 10, &i));
  bool b = false;
  EXPECT_TRUE(ParseBool("ON", &b));
  EXPECT_TRUE(b);
  EXPECT_TRUE(ParseBool("no", &b));
  EXPECT_FALSE(b);
  EXPECT_FALSE(ParseBool("nah", &b));
}

}  // namespace
}  // namespace xpu::hook
