#include "cmd/volumemanager/heap_trimmer.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <functional>

namespace volumemanager {
namespace {

using std::chrono::milliseconds;

class HeapTrimmerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override {
    trimmer_.Stop();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  void Start(milliseconds quiet, std::function<bool()> busy = nullptr) {
    HeapTrimmerOptions options;
    options.quiet = quiet;
    options.busy = std::move(busy);
    options.trim = [this] {
      ++calls_;
      return true;
    };
    trimmer_.Start(&loop_, std::move(options));
  }
  // Runs the loop for `ms` (the trimmer's timer alone does not keep it running).
  void RunFor(milliseconds ms) {
    uv_timer_t t;
    uv_timer_init(&loop_, &t);
    uv_timer_start(
        &t, [](uv_timer_t* h) { uv_stop(h->loop); }, ms.count(), 0);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_close(reinterpret_cast<uv_handle_t*>(&t), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
  }

  // Runs the loop until `done` (checked every 10 ms), at most 5 s; whether it came true.
  template <typename F>
  bool RunUntil(F done) {
    for (int i = 0; i < 500 && !done(); ++i) RunFor(milliseconds(10));
    return done();
  }

  uv_loop_t loop_{};
  HeapTrimmer trimmer_;
  std::atomic<int> calls_{0};
};

TEST_F(HeapTrimmerTest, NothingWithoutARequest) {
  Start(milliseconds(5));
  RunFor(milliseconds(50));
  EXPECT_EQ(calls_, 0);
  EXPECT_EQ(trimmer_.trims(), 0u);
}

TEST_F(HeapTrimmerTest, OneTrimAfterABurstOfRequests) {
  // A quiet time far above the loop's turns, so that a loaded machine does not end the burst.
  Start(milliseconds(500));
  for (int i = 0; i < 5; ++i) {
    trimmer_.Request();
    RunFor(milliseconds(2));  // each request comes within the quiet time of the last
  }
  EXPECT_TRUE(trimmer_.pending());
  ASSERT_TRUE(RunUntil([&] { return trimmer_.trims() >= 1; }));
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(trimmer_.trims(), 1u);
  EXPECT_EQ(trimmer_.released(), 1u);
  EXPECT_FALSE(trimmer_.pending());
  // A later burst is trimmed again.
  trimmer_.Request();
  ASSERT_TRUE(RunUntil([&] { return trimmer_.trims() >= 2; }));
  EXPECT_EQ(calls_, 2);
}

TEST_F(HeapTrimmerTest, WaitsWhileBusy) {
  bool busy = true;
  Start(milliseconds(5), [&busy] { return busy; });
  trimmer_.Request();
  RunFor(milliseconds(60));
  EXPECT_EQ(calls_, 0);
  EXPECT_TRUE(trimmer_.pending());
  busy = false;
  ASSERT_TRUE(RunUntil([&] { return trimmer_.trims() >= 1; }));
  EXPECT_EQ(calls_, 1);
}

TEST_F(HeapTrimmerTest, StopDropsAPendingTrim) {
  Start(milliseconds(20));
  trimmer_.Request();
  trimmer_.Stop();
  RunFor(milliseconds(60));
  EXPECT_EQ(calls_, 0);
  trimmer_.Request();  // after Stop: nothing
  RunFor(milliseconds(60));
  EXPECT_EQ(calls_, 0);
}

TEST_F(HeapTrimmerTest, TheDefaultTrimRuns) {
  HeapTrimmerOptions options;
  options.quiet = milliseconds(1);
  trimmer_.Start(&loop_, std::move(options));
  trimmer_.Request();
  ASSERT_TRUE(RunUntil([&] { return trimmer_.trims() >= 1; }));
  EXPECT_EQ(trimmer_.trims(), 1u);
}

}  // namespace
}  // namespace volumemanager
