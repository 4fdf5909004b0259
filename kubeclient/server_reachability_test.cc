// ServerReachability with a scripted probe and a fake clock: no probe without a waiter, one probe
// at a time for any number of waiters, a probe that answers (only one request failed) wakes
// nobody, the first answer after an unanswered probe wakes every waiter once (outside the
// answer's call), cancelled waiters stay asleep, and the reconnect grace lasts its window.
#include "kubeclient/server_reachability.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

using std::chrono::milliseconds;
using State = ServerReachability::State;
using vmtest::TestLoop;

class ServerReachabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ReachabilityOptions options;
    options.probe_interval = milliseconds(1000);
    options.reconnect_grace = milliseconds(30000);
    options.clock = [this] { return now_; };
    options.random01 = [] { return 0.5; };
    reachability_ = std::make_unique<ServerReachability>(
        loop_.get(), options,
        [this](std::function<void(bool)> done) { probes_.push_back(std::move(done)); });
  }
  void TearDown() override {
    reachability_.reset();
    EXPECT_TRUE(loop_.Close()) << "a libuv handle was left open";
  }

  // Runs the loop until `n` probes were sent.
  bool ProbesSent(size_t n) {
    return loop_.RunUntil([&] { return probes_.size() >= n; });
  }
  // Answers the last probe, `later` after it was sent by the fake clock.
  void AnswerProbe(bool answered, milliseconds later = milliseconds(2000)) {
    now_ += later;
    auto done = std::move(probes_.back());
    done(answered);
  }
  ServerReachability::Ticket Wait(int id) {
    return reachability_->WaitForAnswer([this, id] { woken_.push_back(id); });
  }

  TestLoop loop_;
  std::chrono::steady_clock::time_point now_{std::chrono::seconds(1000)};
  std::unique_ptr<ServerReachability> reachability_;
  std::vector<std::function<void(bool)>> probes_;
  std::vector<int> woken_;
};

TEST_F(ServerReachabilityTest, ProbesOnlyWhileSomeoneWaits) {
  reachability_->OnNoAnswer();
  EXPECT_EQ(reachability_->state(), State::kInDoubt);
  loop_.RunFor(milliseconds(50));
  EXPECT_TRUE(probes_.empty()) << "a probe with nobody waiting";
  const auto ticket = Wait(1);
  ASSERT_TRUE(ProbesSent(1));
  AnswerProbe(false);
  EXPECT_EQ(reachability_->state(), State::kNotAnswering);
  ASSERT_TRUE(ProbesSent(2));  // the clock moved past the interval: the next one is due
  reachability_->CancelWait(ticket);
  AnswerProbe(false);
  loop_.RunFor(milliseconds(50));
  EXPECT_EQ(probes_.size(), 2u) << "a probe after the last waiter left";
  EXPECT_EQ(reachability_->stats().probes, 2u);
  EXPECT_EQ(reachability_->stats().probes_unanswered, 2u);
}

// A request failed but the probe answers: the server is there, only that request had a problem.
// Its waiter keeps its own backoff; nothing counts as a reconnect.
TEST_F(ServerReachabilityTest, AnAnsweredProbeWakesNobody) {
  reachability_->OnNoAnswer();
  Wait(1);
  ASSERT_TRUE(ProbesSent(1));
  reachability_->OnAnswer();  // the ApiClient reports the probe's answer first
  AnswerProbe(true);
  loop_.RunFor(milliseconds(50));
  EXPECT_EQ(reachability_->state(), State::kAnswering);
  EXPECT_TRUE(woken_.empty());
  EXPECT_EQ(reachability_->stats().reconnects, 0u);
  EXPECT_FALSE(reachability_->InReconnectGrace());
  EXPECT_EQ(probes_.size(), 1u) << "probing went on while the server answered";
}

TEST_F(ServerReachabilityTest, OneProbeForAllWaitersAndEveryWaiterWokenAtTheFirstAnswer) {
  reachability_->OnNoAnswer();
  std::vector<ServerReachability::Ticket> tickets;
  for (int i = 0; i < 1000; ++i) {
    tickets.push_back(Wait(i));
    reachability_->OnNoAnswer();  // each waiter's own failure
  }
  ASSERT_TRUE(ProbesSent(1));
  loop_.RunFor(milliseconds(50));
  EXPECT_EQ(probes_.size(), 1u) << "more than one probe in flight";
  AnswerProbe(false);
  ASSERT_TRUE(ProbesSent(2));
  AnswerProbe(false);
  ASSERT_TRUE(ProbesSent(3));
  reachability_->CancelWait(tickets[7]);
  // Any answer ends the outage, not only the probe's: here another request's.
  reachability_->OnAnswer();
  EXPECT_TRUE(woken_.empty()) << "woken inside the answer's own call";
  const auto late = Wait(5000);  // waits for the next reconnect, not this one
  ASSERT_TRUE(loop_.RunUntil([&] { return woken_.size() >= 999; }));
  loop_.RunFor(milliseconds(20));
  EXPECT_EQ(woken_.size(), 999u);
  EXPECT_EQ(std::count(woken_.begin(), woken_.end(), 7), 0) << "a cancelled waiter was woken";
  EXPECT_EQ(std::count(woken_.begin(), woken_.end(), 5000), 0);
  EXPECT_EQ(reachability_->waiting(), 1u);
  reachability_->CancelWait(late);
  // The probe still out answers late: no second reconnect.
  AnswerProbe(true);
  EXPECT_EQ(reachability_->stats().reconnects, 1u);
  EXPECT_EQ(reachability_->stats().woken, 999u);
  EXPECT_EQ(reachability_->stats().probes, 3u);
}

TEST_F(ServerReachabilityTest, TheReconnectGraceLastsItsWindow) {
  EXPECT_FALSE(reachability_->InReconnectGrace());
  reachability_->OnNoAnswer();
  Wait(1);
  ASSERT_TRUE(ProbesSent(1));
  AnswerProbe(false);
  EXPECT_FALSE(reachability_->InReconnectGrace()) << "a grace before any reconnect";
  reachability_->OnAnswer();
  EXPECT_TRUE(reachability_->InReconnectGrace());
  now_ += milliseconds(29999);
  EXPECT_TRUE(reachability_->InReconnectGrace());
  now_ += milliseconds(1);
  EXPECT_FALSE(reachability_->InReconnectGrace());
  ASSERT_TRUE(loop_.RunUntil([&] { return woken_.size() == 1; }));
}

}  // namespace
}  // namespace kubeclient
