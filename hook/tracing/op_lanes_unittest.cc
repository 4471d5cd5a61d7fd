// hook/tracing/op_lanes_unittest.cc — the per-thread lanes: one lane per
// thread, program order within a lane, a full lane refuses, the consumer
// frees the lanes of exited threads (and only those), and a new thread
// reuses a freed lane where its last owner stopped.
#include "hook/tracing/op_lanes.h"

#include <unistd.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace xpu::hook {
namespace {

LaneEntry Op(uint32_t seq) {
  LaneEntry e{};
  e.type = LaneEntry::kOp;
  e.seq = seq;
  return e;
}

TEST(OpLanesTest, OneLanePerThreadInProgramOrder) {
  static OpLanes lanes;  // 0.5 MiB of bookkeeping: not on the stack
  ASSERT_TRUE(lanes.Init());
  const uint32_t mine = lanes.ThisThreadLane();
  ASSERT_NE(mine, 0u);
  EXPECT_EQ(lanes.ThisThreadLane(), mine);
  EXPECT_EQ(lanes.CurrentLane(), mine);
  uint32_t other = 0, other_current_before = 1;
  std::thread t([&] {
    other_current_before = lanes.CurrentLane();  // never claims
    other = lanes.ThisThreadLane();
    for (uint32_t i = 1; i <= 3; ++i) EXPECT_TRUE(lanes.Push(other, Op(100 + i)));
  });
  t.join();
  EXPECT_EQ(other_current_before, 0u);
  ASSERT_NE(other, 0u);
  EXPECT_NE(other, mine);
  for (uint32_t i = 1; i <= 3; ++i) EXPECT_TRUE(lanes.Push(mine, Op(i)));
  EXPECT_FALSE(lanes.AllDrained());
  LaneEntry out[8];
  ASSERT_EQ(lanes.Peek(mine - 1, out, 8), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].seq, i + 1);
  lanes.Consume(mine - 1, 3);
  ASSERT_EQ(lanes.Peek(other - 1, out, 8), 3u);
  EXPECT_EQ(out[2].seq, 103u);
  lanes.Consume(other - 1, 3);
  EXPECT_TRUE(lanes.AllDrained());
}

TEST(OpLanesTest, FullLaneRefusesUntilConsumed) {
  static OpLanes lanes;
  ASSERT_TRUE(lanes.Init());
  const uint32_t lane = lanes.ThisThreadLane();
  ASSERT_NE(lane, 0u);
  for (uint32_t i = 0; i < OpLanes::kLaneCapacity; ++i) ASSERT_TRUE(lanes.Push(lane, Op(i)));
  EXPECT_FALSE(lanes.Push(lane, Op(0)));
  LaneEntry out[16];
  ASSERT_EQ(lanes.Peek(lane - 1, out, 16), 16u);
  lanes.Consume(lane - 1, 16);
  for (uint32_t i = 0; i < 16; ++i) EXPECT_TRUE(lanes.Push(lane, Op(i)));
  EXPECT_FALSE(lanes.Push(lane, Op(0)));
}

TEST(OpLanesTest, LanesOfExitedThreadsAreReclaimedOnceDrained) {
  static OpLanes lanes;
  ASSERT_TRUE(lanes.Init());
  const uint32_t mine = lanes.ThisThreadLane();
  uint32_t dead = 0;
  std::thread([&] {
    dead = lanes.ThisThreadLane();
    EXPECT_TRUE(lanes.Push(dead, Op(7)));
  }).join();
  ASSERT_NE(dead, 0u);
  const pid_t pid = getpid();
  const uint64_t s = 1000000000ull;
  // Not drained yet: kept, whatever its age.
  EXPECT_EQ(lanes.ReclaimDead(pid, 10 * s, s), 0u);
  EXPECT_EQ(lanes.ReclaimDead(pid, 20 * s, s), 0u);
  LaneEntry out[4];
  ASSERT_EQ(lanes.Peek(dead - 1, out, 4), 1u);
  lanes.Consume(dead - 1, 1);
  // Drained and idle for long enough: freed; this thread's lane (alive) is
  // kept however idle it is.
  EXPECT_EQ(lanes.ReclaimDead(pid, 30 * s, s), 1u);
  EXPECT_EQ(lanes.ReclaimDead(pid, 40 * s, s), 0u);
  EXPECT_EQ(lanes.owner(dead - 1), 0);
  EXPECT_NE(lanes.owner(mine - 1), 0);
  // A new thread takes the freed lane and continues after the last entry.
  uint32_t again = 0;
  std::thread([&] {
    again = lanes.ThisThreadLane();
    EXPECT_TRUE(lanes.Push(again, Op(8)));
  }).join();
  EXPECT_EQ(again, dead);
  ASSERT_EQ(lanes.Peek(again - 1, out, 4), 1u);
  EXPECT_EQ(out[0].seq, 8u);
}

}  // namespace
}  // namespace xpu::hook
