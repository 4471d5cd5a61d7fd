// engine/hang/hang_stacks_unittest.cc — stack parsing, rank ranges, the
// merged tree and its renderings.
#include <gtest/gtest.h>

#include "common/json/json.h"
#include "engine/hang/report.h"
#include "engine/hang/stack_tree.h"
#include "engine/hang/stacks.h"

namespace xpu::engine::hang {
namespace {

// Recorded from `gdb -p PID -batch -ex 'thread apply all bt'` on
// xpu-fake-train (trimmed), one rank waiting in a synchronize.
constexpr char kGdbWaiting[] = R"(
[New LWP 4101]
[Thread debugging using libthread_db enabled]
0x00007f1c2a4e3f9a in clock_nanosleep () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f1c29bff6c0 (LWP 4101) "xpu-hook"):
#0  0x00007f1c2a4e3f9a in clock_nanosleep () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1c2a4f1c13 in nanosleep () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f1c2a7a1b2e in xpu::hook::CompletionWorker::Run() () from libxpu_hook.so
#3  0x00007f1c2a49ffd4 in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442
#4  0x00007f1c2a51f5bc in clone3 () at ../sysdeps/unix/sysv/linux/x86_64/clone3.S:81

Thread 1 (Thread 0x7f1c2a3e2740 (LWP 4100) "xpu-fake-train"):
#0  0x00007f1c2a4e3f9a in clock_nanosleep () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1c2a4f1c13 in nanosleep () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f1c2a8f0a10 in xpu::fake::WaitStream(xpu::fake::Stream*) () from libxpu_fake_core.so
#3  0x00007f1c2a9a1234 in cudaStreamSynchronize (stream=0x55d0) at fake_cudart.cc:201
#4  0x000055d0c1a0b7de in (anonymous namespace)::Step(Options const&, Runtime&, int) (o=..., rt=..., step=3) at fake_train.cc:466
#5  0x000055d0c1a09f21 in main (argc=5, argv=0x7ffd) at fake_train.cc:512
[Inferior 1 (process 4100) detached]
)";

constexpr char kFaulthandler[] = R"(Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
  File "/usr/lib/python3.12/threading.py", line 1010 in run

Current thread 0x00007f0000000002 (most recent call first):
  File "/opt/train/ckpt.py", line 42 in save_checkpoint
  File "/opt/train/train.py", line 7 in <module>
)";

constexpr char kPySpy[] = R"(Process 4242: python train.py
Python v3.12.3 (/usr/bin/python3.12)

Thread 4242 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    train_step (train.py:31)
    <module> (train.py:50)
)";

TEST(StacksTest, ParsesGdbThreadsRootFirst) {
  std::vector<ThreadStack> t = ParseGdbBacktrace(kGdbWaiting);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].frames.front(), "clone3");
  EXPECT_EQ(t[0].frames.back(), "clock_nanosleep");
  EXPECT_EQ(t[0].frames[2], "xpu::hook::CompletionWorker::Run()");
  EXPECT_NE(t[0].thread.find("LWP 4101"), std::string::npos);
  EXPECT_NE(t[0].thread.find("xpu-hook"), std::string::npos);
  ASSERT_EQ(t[1].frames.size(), 6u);
  EXPECT_EQ(t[1].frames[0], "main");
  EXPECT_EQ(t[1].frames[1], "(anonymous namespace)::Step(Options const&, Runtime&, int)");
  EXPECT_EQ(t[1].frames[2], "cudaStreamSynchronize");
  EXPECT_TRUE(IsCommunicationFrame(t[1].frames[2]));
  EXPECT_FALSE(IsCommunicationFrame(t[1].frames[1]));
  EXPECT_TRUE(ParseGdbBacktrace("garbage\nno frames here").empty());
  // Argument lists are found as the last balanced group, after the location.
  std::vector<ThreadStack> f = ParseGdbBacktrace(
      "#0  std::function<void ()>::operator()() const (this=0x1) at "
      "/usr/include/c++/12/std_function.h:591\n"
      "#1  0x00007f in xpu::hook::CompletionWorker::Run() () from libxpu_hook.so\n");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].frames[1], "std::function<void ()>::operator()() const");
  EXPECT_EQ(f[0].frames[0], "xpu::hook::CompletionWorker::Run()");
  EXPECT_EQ(MainThread(t), &t[1]);
  EXPECT_EQ(Innermost(t[1], 2), "nanosleep > clock_nanosleep");
}

TEST(StacksTest, ParsesFaulthandlerAndPySpy) {
  std::vector<ThreadStack> f = ParsePythonStacks(kFaulthandler);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[1].python);
  EXPECT_EQ(f[1].frames.front(), "<module> (train.py)");
  EXPECT_EQ(f[1].frames.back(), "save_checkpoint (ckpt.py)");
  std::vector<ThreadStack> p = ParsePythonStacks(kPySpy);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].thread, "\"MainThread\"");
  EXPECT_EQ(p[0].frames.back(), "all_reduce (distributed_c10d.py)");
  EXPECT_TRUE(IsCommunicationFrame(p[0].frames.back()));
}

TEST(StacksTest, CompressesRanks) {
  EXPECT_EQ(CompressRanks({}), "-");
  EXPECT_EQ(CompressRanks({5, 0, 1, 2, 7, 6, 2}), "0-2,5-7");
  EXPECT_EQ(CompressRanks({3}), "3");
  EXPECT_EQ(CompressRanks({1, 3, 5}), "1,3,5");
}

TEST(StackTreeTest, MergesRanksAndNamesTheOnesMissing) {
  StackTree tree;
  std::vector<ThreadStack> waiting = ParseGdbBacktrace(kGdbWaiting);
  for (int r : {0, 1, 2, 4, 5, 6, 7}) tree.Add(r, waiting);
  ThreadStack hung;
  hung.frames = {"main", "(anonymous namespace)::Step(Options const&, Runtime&, int)", "pause"};
  tree.Add(3, {hung});
  tree.AddRank(8);  // no stacks at all
  std::string text = tree.Text();
  EXPECT_NE(
      text.find(
          "main > (anonymous namespace)::Step(Options const&, Runtime&, int)  [ranks 0-7 | not 8]"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("cudaStreamSynchronize > xpu::fake::WaitStream(xpu::fake::Stream*) > nanosleep > "
                "clock_nanosleep  [ranks 0-2,4-7 | not 3,8]"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("pause  [ranks 3 | not 0-2,4-8]"), std::string::npos) << text;
  std::string folded = tree.Folded();
  EXPECT_NE(
      folded.find("main;(anonymous_namespace)::Step(Options_const&,_Runtime&,_int);pause 1\n"),
      std::string::npos)
      << folded;
  EXPECT_NE(
      folded.find(";cudaStreamSynchronize;xpu::fake::WaitStream(xpu::fake::Stream*);nanosleep;"
                  "clock_nanosleep 7\n"),
      std::string::npos)
      << folded;
  std::string svg = tree.Svg("job <j>");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("job &lt;j&gt;"), std::string::npos);
  EXPECT_NE(svg.find("<title>pause (ranks 3 | not 0-2,4-8)</title>"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

// Host names, paths and reasons may be UTF-8: the JSON report carries them
// as they are (it used to escape each byte >= 0x7f as \u00XX, i.e. as
// Latin-1), and bytes that are not UTF-8 become U+FFFD.
TEST(HangReportTest, JsonKeepsNonAsciiText) {
  HangReport r;
  r.job = "entra\xC3\xAEnement-1";
  r.verdict.reason = "rang 0 bloqu\xC3\xA9 \xE6\x97\xA5";
  RankSummary s;
  s.rank = 0;
  s.host = "n\xC5\x93ud-0";
  s.where =
      "donn\xC3\xA9"
      "es.py:12";
  s.python_error = "bad \xFF byte";
  r.ranks.push_back(s);
  const std::string j = r.Json();
  EXPECT_NE(j.find("\"job\":\"entra\xC3\xAEnement-1\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"host\":\"n\xC5\x93ud-0\""), std::string::npos) << j;
  EXPECT_EQ(j.find("\\u00"), std::string::npos) << "no byte-wise escapes: " << j;
  const json::Json parsed = json::Json::parse(j);
  EXPECT_EQ(parsed["reason"], "rang 0 bloqu\xC3\xA9 \xE6\x97\xA5");
  EXPECT_EQ(parsed["ranks"][0]["where"],
            "donn\xC3\xA9"
            "es.py:12");
  EXPECT_EQ(parsed["ranks"][0]["python_error"], "bad \xEF\xBF\xBD byte");
}

}  // namespace
}  // namespace xpu::engine::hang
