// SignalBatcher with a fake `send` that records each call and can be held until released.
#include "reload/signal_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tests/support/test_loop.h"

namespace reload {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ContainerSignal Request(const std::string& pod) {
  ContainerSignal r;
  r.pod_uid = pod;
  r.container_name = "web";
  r.signal = 1;
  return r;
}

// A `send` that records the pods of each call, answers "signalled <pod>", and, while held, waits
// in its call until released.
class FakeSend {
 public:
  SignalBatcher::Results operator()(const std::vector<ContainerSignal>& requests) {
    std::unique_lock<std::mutex> l(mu_);
    std::vector<std::string> pods;
    for (const ContainerSignal& r : requests) pods.push_back(r.pod_uid);
    calls_.push_back(pods);
    threads_.push_back(std::this_thread::get_id());
    cv_.notify_all();
    cv_.wait(l, [&] { return !held_; });
    if (throws_) throw std::runtime_error("no /proc");
    SignalBatcher::Results out;
    for (size_t i = 0; i < requests.size() - short_by_; ++i) {
      out.emplace_back("signalled " + requests[i].pod_uid);
    }
    return out;
  }
  void Hold(bool held) {
    std::lock_guard<std::mutex> l(mu_);
    held_ = held;
    cv_.notify_all();
  }
  std::vector<std::vector<std::string>> calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> l(mu_);
    return threads_;
  }
  bool throws_ = false;
  size_t short_by_ = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::vector<std::vector<std::string>> calls_;
  std::vector<std::thread::id> threads_;
};

class SignalBatcherTest : public ::testing::Test {
 protected:
  SignalBatcherTest()
      : batcher_(std::make_unique<SignalBatcher>(
            loop_.get(), [this](const std::vector<ContainerSignal>& r) { return send_(r); })) {}
  void TearDown() override {
    send_.Hold(false);
    if (batcher_) {
      bool closed = false;
      batcher_->Close([&] { closed = true; });
      EXPECT_TRUE(loop_.RunUntil([&] { return closed; }));
      batcher_.reset();
    }
    EXPECT_TRUE(loop_.Close()) << "a handle was left open";
  }
  // Submits one request for `pod`; its results land in results_[pod].
  void Submit(const std::string& pod) {
    batcher_->Submit({Request(pod)}, [this, pod](SignalBatcher::Results r) {
      ASSERT_EQ(r.size(), 1u);
      results_[pod] = r[0].ok() ? *r[0] : "error: " + r[0].status().message();
    });
  }

  vmtest::TestLoop loop_;
  FakeSend send_;
  std::unique_ptr<SignalBatcher> batcher_;
  std::map<std::string, std::string> results_;
};

TEST_F(SignalBatcherTest, TheSubmissionsOfOneTurnGoInOneCall) {
  for (const char* pod : {"a", "b", "c", "d", "e"}) Submit(pod);
  batcher_->Submit({Request("f"), Request("g")}, [this](SignalBatcher::Results r) {
    ASSERT_EQ(r.size(), 2u);
    results_["f+g"] = *r[0] + ", " + *r[1];
  });
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 6; }));
  EXPECT_THAT(send_.calls(), ElementsAre(ElementsAre("a", "b", "c", "d", "e", "f", "g")));
  EXPECT_EQ(results_["c"], "signalled c");
  EXPECT_EQ(results_["f+g"], "signalled f, signalled g");
  EXPECT_EQ(batcher_->stats().batches, 1u);
  EXPECT_EQ(batcher_->stats().requests, 7u);
  EXPECT_EQ(batcher_->outstanding(), 0u);
}

TEST_F(SignalBatcherTest, WhatComesWhileABatchRunsGoesInTheNextOne) {
  send_.Hold(true);
  Submit("first");
  ASSERT_TRUE(loop_.RunUntil([&] { return send_.calls().size() == 1; }));
  // Turns of the loop pass while the first call runs: each submission comes in a turn of its own.
  loop_.RunSteps(4, std::chrono::milliseconds(2),
                 [&](int i) { Submit("later" + std::to_string(i)); });
  EXPECT_EQ(send_.calls().size(), 1u) << "a second call started while the first ran";
  EXPECT_EQ(batcher_->outstanding(), 5u);
  send_.Hold(false);
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 5; }));
  EXPECT_THAT(send_.calls(), ElementsAre(ElementsAre("first"),
                                         ElementsAre("later0", "later1", "later2", "later3")));
  EXPECT_EQ(results_["later2"], "signalled later2");
  const std::vector<std::thread::id> threads = send_.threads();
  EXPECT_NE(threads[0], std::this_thread::get_id()) << "a scan ran on the loop thread";
  EXPECT_EQ(threads[0], threads[1]) << "every batch runs on the batcher's one thread";
}

TEST_F(SignalBatcherTest, ASendThatThrowsOrAnswersTooFewFailsEachUnansweredRequest) {
  send_.throws_ = true;
  Submit("a");
  Submit("b");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 2; }));
  EXPECT_THAT(results_["a"], HasSubstr("not sent: sending reload signals threw: no /proc"));
  EXPECT_EQ(results_["b"], results_["a"]);

  results_.clear();
  send_.throws_ = false;
  send_.short_by_ = 1;
  Submit("c");
  Submit("d");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 2; }));
  EXPECT_EQ(results_["c"], "signalled c");
  EXPECT_EQ(results_["d"], "error: not sent: no result for this request");
}

TEST_F(SignalBatcherTest, CloseWaitsForTheRunningCallWithoutBlockingTheLoopAndDropsTheRest) {
  send_.Hold(true);
  Submit("running");
  ASSERT_TRUE(loop_.RunUntil([&] { return send_.calls().size() == 1; }));
  Submit("queued");
  bool closed = false;
  batcher_->Close([&] { closed = true; });
  Submit("after close");
  // The loop keeps turning while the call is held: Close() did not block it.
  EXPECT_FALSE(loop_.RunUntil([&] { return closed; }, std::chrono::milliseconds(100)));
  send_.Hold(false);
  ASSERT_TRUE(loop_.RunUntil([&] { return closed; }));
  batcher_.reset();
  EXPECT_TRUE(results_.empty()) << "a result was reported after Close()";
  EXPECT_EQ(send_.calls().size(), 1u) << "a queued submission was sent after Close()";
}

TEST_F(SignalBatcherTest, NoThreadAndNoLoopReferenceUntilTheFirstBatch) {
  // An idle batcher keeps no loop alive (signals enabled, none sent).
  EXPECT_TRUE(loop_.RunUntilIdle(std::chrono::milliseconds(500)));
  EXPECT_TRUE(send_.calls().empty());
}

}  // namespace
}  // namespace reload
