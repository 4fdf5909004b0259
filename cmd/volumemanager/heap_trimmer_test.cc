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
  Start(milliseconds(20));
  for (int i = 0; i < 5; ++i) {
    trimmer_.Request();
    RunFor(milliseconds(5));  // each request comes within the quiet time of the last
  }
  EXPECT_EQ(calls_, 0);
  EXPECT_TRUE(trimmer_.pending());
  RunFor(milliseconds(100));
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(trimmer_.trims(), 1u);
  EXPECT_EQ(trimmer_.released(), 1u);
  EXPECT_FALSE(trimmer_.pending());
  // A later burst is trimmed again.
  trimmer_.Request();
  RunFor(milliseconds(100));
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
  RunFor(milliseconds(60));
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
  RunFor(milliseconds(100));
  EXPECT_EQ(trimmer_.trims(), 1u);
}

}  // namespace
}  // namespace volumemanager
