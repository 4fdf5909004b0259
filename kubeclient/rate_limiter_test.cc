// RateLimiter on a fake clock: the burst goes at once, the rest is paced at qps in arrival order,
// the bucket never holds more than `burst`, cancelled and destroyed waiters never run, and
// client-go's defaulting of QPS/Burst.
#include "kubeclient/rate_limiter.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

using std::chrono::milliseconds;
using vmtest::TestLoop;

class RateLimiterTest : public ::testing::Test {
 protected:
  RateLimiterOptions Limits(double qps, int burst) {
    RateLimiterOptions options;
    options.qps = qps;
    options.burst = burst;
    options.clock = [this] { return now_; };
    return options;
  }
  // Queues request `i`; records it when it runs.
  void Request(RateLimiter& limiter, int i) {
    tickets_.push_back(limiter.Acquire([this, i] { ran_.push_back(i); }));
  }
  // Moves the fake clock, then runs the loop until `count` requests ran.
  bool AdvanceUntil(milliseconds by, size_t count) {
    now_ += by;
    return loop_.RunUntil([&] { return ran_.size() >= count; });
  }

  TestLoop loop_;
  std::chrono::steady_clock::time_point now_{std::chrono::seconds(1000)};
  std::vector<int> ran_;
  std::vector<RateLimiter::Ticket> tickets_;
};

TEST_F(RateLimiterTest, ClientGoDefaulting) {
  struct Case {
    const char* name;
    double qps;
    int burst;
    double want_qps;
    int want_burst;
  } cases[] = {
      {"kubelet defaults", 50, 100, 50, 100},
      {"qps 0 is client-go's DefaultQPS", 0, 100, 5, 100},
      {"burst 0 is client-go's DefaultBurst", 50, 0, 50, 10},
      {"both 0", 0, 0, 5, 10},
      {"negative qps: no limiter", -1, 100, 0, 100},
  };
  for (const Case& c : cases) {
    RateLimiterOptions got = ClientGoRateLimits(c.qps, c.burst);
    EXPECT_EQ(got.qps, c.want_qps) << c.name;
    EXPECT_EQ(got.burst, c.want_burst) << c.name;
  }
  RateLimiter unlimited(loop_.get(), ClientGoRateLimits(-1, 0));
  EXPECT_FALSE(unlimited.limited());
}

TEST_F(RateLimiterTest, NoLimitRunsEverythingAtOnce) {
  RateLimiter limiter(loop_.get(), RateLimiterOptions{});
  for (int i = 0; i < 1000; ++i) Request(limiter, i);
  EXPECT_EQ(ran_.size(), 1000u);
  EXPECT_EQ(limiter.waiting(), 0u);
}

TEST_F(RateLimiterTest, BurstAtOnceThenPacedAtQpsInArrivalOrder) {
  RateLimiter limiter(loop_.get(), Limits(10, 3));  // one token per 100 ms
  for (int i = 0; i < 8; ++i) Request(limiter, i);
  EXPECT_EQ(ran_, (std::vector<int>{0, 1, 2}));  // the burst, inside Acquire
  EXPECT_EQ(limiter.waiting(), 5u);

  loop_.RunFor(milliseconds(150));  // real time passes, the fake clock does not
  EXPECT_EQ(ran_.size(), 3u);

  ASSERT_TRUE(AdvanceUntil(milliseconds(99), 3));
  loop_.RunFor(milliseconds(150));
  EXPECT_EQ(ran_.size(), 3u) << "a token after 99 ms at 10 qps";
  ASSERT_TRUE(AdvanceUntil(milliseconds(1), 4));
  ASSERT_TRUE(AdvanceUntil(milliseconds(250), 6));  // 2.5 tokens: two requests, half a token
  loop_.RunFor(milliseconds(150));
  EXPECT_EQ(ran_.size(), 6u);
  ASSERT_TRUE(AdvanceUntil(milliseconds(50), 7));  // the half token completes
  ASSERT_TRUE(AdvanceUntil(milliseconds(100), 8));
  EXPECT_EQ(ran_, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(limiter.waiting(), 0u);
}

TEST_F(RateLimiterTest, NewLimitsPaceTheWaitersAtTheNewRateOrReleaseThem) {
  RateLimiter limiter(loop_.get(), Limits(1, 1));  // one token per second
  for (int i = 0; i < 6; ++i) Request(limiter, i);
  EXPECT_EQ(ran_.size(), 1u);
  limiter.SetLimits(10, 1);  // one per 100 ms from now
  EXPECT_EQ(ran_.size(), 1u) << "no request runs inside SetLimits";
  ASSERT_TRUE(AdvanceUntil(milliseconds(100), 2));
  loop_.RunFor(milliseconds(50));
  EXPECT_EQ(ran_.size(), 2u);
  limiter.SetLimits(0, 1);  // no limit: every waiter goes
  ASSERT_TRUE(loop_.RunUntil([&] { return ran_.size() == 6; }));
  EXPECT_EQ(ran_, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(limiter.limited());
}

TEST_F(RateLimiterTest, AnIdleBucketHoldsAtMostBurstTokens) {
  RateLimiter limiter(loop_.get(), Limits(10, 3));
  now_ += std::chrono::hours(1);
  for (int i = 0; i < 5; ++i) Request(limiter, i);
  EXPECT_EQ(ran_.size(), 3u);
  loop_.RunFor(milliseconds(150));
  EXPECT_EQ(ran_.size(), 3u);
}

TEST_F(RateLimiterTest, ARequestArrivingBehindWaitersQueuesEvenWithATokenFree) {
  RateLimiter limiter(loop_.get(), Limits(10, 1));
  Request(limiter, 0);
  Request(limiter, 1);
  now_ += milliseconds(100);  // a token is free, but request 1 was first
  Request(limiter, 2);
  EXPECT_EQ(ran_, (std::vector<int>{0}));
  ASSERT_TRUE(loop_.RunUntil([&] { return ran_.size() == 2; }));
  ASSERT_TRUE(AdvanceUntil(milliseconds(100), 3));
  EXPECT_EQ(ran_, (std::vector<int>{0, 1, 2}));
}

TEST_F(RateLimiterTest, CancelledWaitersNeverRunAndDoNotUseATurn) {
  RateLimiter limiter(loop_.get(), Limits(10, 1));
  for (int i = 0; i < 4; ++i) Request(limiter, i);
  limiter.Cancel(tickets_[1]);
  limiter.Cancel(tickets_[2]);
  limiter.Cancel(tickets_[0]);  // already ran: ignored
  EXPECT_EQ(limiter.waiting(), 1u);
  ASSERT_TRUE(AdvanceUntil(milliseconds(100), 2));
  EXPECT_EQ(ran_, (std::vector<int>{0, 3}));
}

TEST_F(RateLimiterTest, DestroyedWithWaitersRunsNoneAndLeavesNoHandle) {
  {
    RateLimiter limiter(loop_.get(), Limits(10, 1));
    for (int i = 0; i < 3; ++i) Request(limiter, i);
  }
  now_ += std::chrono::seconds(10);
  loop_.RunFor(milliseconds(150));
  EXPECT_EQ(ran_.size(), 1u);
  EXPECT_TRUE(loop_.Close());
}

}  // namespace
}  // namespace kubeclient
