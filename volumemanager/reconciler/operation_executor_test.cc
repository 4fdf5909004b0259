#include "volumemanager/reconciler/operation_executor.h"

#include <gtest/gtest.h>

#include <atomic>

namespace volumemanager {
namespace {

TEST(ExponentialBackoffTest, DoublesFromHalfASecondToTheCap) {
  ExponentialBackoff b;
  const auto t0 = ExponentialBackoff::Clock::time_point{} + std::chrono::hours(1);
  std::vector<long> delays;
  for (int i = 0; i < 10; ++i) delays.push_back(b.RecordFailure(t0).count());
  EXPECT_EQ(delays,
            (std::vector<long>{500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 122000, 122000}));
  EXPECT_FALSE(b.Ready(t0 + std::chrono::seconds(121)));
  EXPECT_TRUE(b.Ready(t0 + std::chrono::seconds(122)));
  b.Reset();
  EXPECT_TRUE(b.Ready(t0));
  EXPECT_EQ(b.RecordFailure(t0).count(), 500);
}

class OperationExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override { uv_loop_init(&loop_); }
  void TearDown() override { uv_loop_close(&loop_); }
  uv_loop_t loop_;
};

TEST_F(OperationExecutorTest, OneOperationPerVolumeAndBackoffAfterFailure) {
  // Operations end at `now` on the executor's clock.
  const auto now = OperationExecutor::Clock::time_point{} + std::chrono::hours(1);
  OperationExecutor ex(&loop_, [now] { return now; });
  const VolumeKey a{"pod", "a"};
  const VolumeKey b{"pod", "b"};
  std::atomic<int> ran{0};
  std::vector<std::string> done;
  ASSERT_TRUE(ex.Run(
      a,
      [&] {
        ++ran;
        return base::Status::Error("disk full", 28);
      },
      [&](const base::Status& s) { done.push_back("a:" + s.message()); }));
  // A second operation for the same volume is refused while one is in flight; another volume
  // is independent.
  EXPECT_FALSE(ex.Run(
      a,
      [&] {
        ++ran;
        return base::Status::OK();
      },
      nullptr));
  ASSERT_TRUE(ex.Run(
      b,
      [&] {
        ++ran;
        return base::Status::OK();
      },
      [&](const base::Status& s) { done.push_back(s.ok() ? "b:ok" : "b:err"); }));
  EXPECT_EQ(ex.in_flight(), 2);
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(ex.in_flight(), 0);
  std::sort(done.begin(), done.end());
  EXPECT_EQ(done, (std::vector<std::string>{"a:disk full", "b:ok"}));
  // a failed: it backs off for 500 ms from its end; b succeeded: free to run.
  EXPECT_FALSE(ex.CanStart(a, now));
  EXPECT_FALSE(ex.CanStart(a, now + std::chrono::milliseconds(499)));
  EXPECT_TRUE(ex.CanStart(a, now + std::chrono::milliseconds(500)));
  EXPECT_TRUE(ex.CanStart(b, now));
  ASSERT_NE(ex.Backoff(a), nullptr);
  EXPECT_EQ(ex.Backoff(a)->delay().count(), 500);
  // Only the failure is remembered: a success leaves no entry behind.
  EXPECT_EQ(ex.Backoff(b), nullptr);
  EXPECT_EQ(ex.size(), 1u);
}

TEST_F(OperationExecutorTest, ForgetDropsTheBackoffButNotAnOperationInFlight) {
  const auto now = OperationExecutor::Clock::time_point{} + std::chrono::hours(1);
  OperationExecutor ex(&loop_, [now] { return now; });
  const VolumeKey k{"pod", "v"};
  ASSERT_TRUE(ex.Run(
      k, [] { return base::Status::Error("disk full"); }, [](const base::Status&) {}));
  ex.Forget(k);  // in flight: kept
  EXPECT_EQ(ex.size(), 1u);
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_FALSE(ex.CanStart(k, now));  // backing off
  EXPECT_EQ(ex.size(), 1u);
  ex.Forget(k);
  EXPECT_EQ(ex.size(), 0u);
  EXPECT_TRUE(ex.CanStart(k, now));
}

TEST_F(OperationExecutorTest, ExceptionsInWorkBecomeErrors) {
  OperationExecutor ex(&loop_);
  std::string msg;
  ASSERT_TRUE(ex.Run(
      VolumeKey{"p", "v"}, []() -> base::Status { throw std::runtime_error("boom"); },
      [&](const base::Status& s) { msg = s.message(); }));
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(msg, "operation threw: boom");
}

TEST_F(OperationExecutorTest, ACancelledOperationIsNoFailure) {
  const auto now = OperationExecutor::Clock::time_point{} + std::chrono::hours(1);
  OperationExecutor ex(&loop_, [now] { return now; });
  const VolumeKey a{"pod", "a"};
  bool cancelled = false;
  ASSERT_TRUE(ex.Run(
      a, [] { return CancelledStatus(); },
      [&](const base::Status& s) { cancelled = IsCancelled(s); }));
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(ex.CanStart(a, now));
  EXPECT_EQ(ex.Backoff(a), nullptr);  // nothing to back off from: nothing kept
  EXPECT_EQ(ex.LastError(a), "");
  EXPECT_FALSE(IsCancelled(base::Status::Error("disk full", 28)));
  EXPECT_FALSE(IsCancelled(base::Status::OK()));
}

}  // namespace
}  // namespace volumemanager
