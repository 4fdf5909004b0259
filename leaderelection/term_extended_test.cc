// LeaderCallbacks::on_term_extended: the loss deadline at each acquire and renewal, for a check of
// the term off the loop thread (the daemon's write gate).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "leaderelection/file_lock.h"
#include "leaderelection/leader_elector.h"
#include "tests/support/test_loop.h"

namespace leaderelection {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(TermExtendedTest, EachAcquireAndRenewalHandsOverTheDeadlineIsLeaderChecks) {
  vmtest::TestLoop loop;
  vmtest::TempDir dir;
  LeaderElectorOptions options;
  options.identity = "a";
  options.timing = {milliseconds(3000), milliseconds(1000), milliseconds(50)};
  std::vector<Clock::time_point> deadlines;
  bool leading = false;
  size_t at_start = 0;
  LeaderCallbacks callbacks;
  callbacks.on_term_extended = [&](Clock::time_point d) { deadlines.push_back(d); };
  callbacks.on_started_leading = [&] {
    leading = true;
    at_start = deadlines.size();
  };
  auto elector = LeaderElector::Create(loop.get(), std::make_unique<FileLock>(dir.File("lock")),
                                       options, std::move(callbacks));
  ASSERT_TRUE(elector.ok()) << elector.status().message();
  const Clock::time_point before = Clock::now();
  (*elector)->Start();
  ASSERT_TRUE(loop.RunUntil([&] { return leading; }));
  // Handed over before OnStartedLeading, so a gate is open when writes begin.
  EXPECT_EQ(at_start, 1u);
  // A term ends retryPeriod + renewDeadline after the last successful attempt was sent.
  EXPECT_GT(deadlines[0], before + milliseconds(1050) - milliseconds(1));
  EXPECT_LE(deadlines[0], Clock::now() + milliseconds(1050));
  ASSERT_TRUE(loop.RunUntil([&] { return deadlines.size() >= 4; }));
  for (size_t i = 1; i < deadlines.size(); ++i) EXPECT_GT(deadlines[i], deadlines[i - 1]);
  EXPECT_TRUE((*elector)->IsLeader());
  EXPECT_GT(deadlines.back(), Clock::now());
  bool stopped = false;
  (*elector)->Stop([&] { stopped = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
  elector->reset();
  EXPECT_TRUE(loop.Close());
}

}  // namespace
}  // namespace leaderelection
