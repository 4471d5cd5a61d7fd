#include "engine/detectors/streaks.h"

#include <gtest/gtest.h>

namespace xpu::engine {
namespace {

TEST(StreaksTest, CountsConsecutiveWindowsPerJobAndKey) {
  Streaks s;
  {
    Streaks::Window w = s.Begin("a");
    EXPECT_EQ(w.Hold("x"), 1);
    EXPECT_EQ(w.Hold("x"), 1);  // twice in one window counts once
    EXPECT_EQ(w.Hold("y"), 1);
  }
  {
    Streaks::Window w = s.Begin("a");
    EXPECT_EQ(w.Hold("x"), 2);  // y not held: its streak ends
    Streaks::Window other = s.Begin("b");
    EXPECT_EQ(other.Hold("x"), 1);  // jobs are separate
  }
  Streaks::Window w = s.Begin("a");
  EXPECT_EQ(w.Hold("x"), 3);
  EXPECT_EQ(w.Hold("y"), 1);
}

}  // namespace
}  // namespace xpu::engine
