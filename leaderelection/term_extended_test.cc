// LeaderCallbacks::on_term_extended: the loss deadline at each acquire and renewal, for a check of
// the term off the loop thread (the daemon's write gate).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "leaderelection/file_lock.h"
#include "leaderelection/leader_elector.h"
#include "tests/support/test_loop.h"

namespace leaderelection {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A lock that lapses unless renewed, as a Lease: kept in memory, every call succeeds.
class MemoryLock : public ResourceLock {
 public:
  void Get(std::function<void(GetResult)> done) override {
    GetResult r;
    r.not_found = !exists_;
    r.record = record_;
    done(std::move(r));
  }
  void Create(const LeaderElectionRecord& record, std::function<void(base::Status)> done) override {
    exists_ = true;
    record_ = record;
    done(base::Status::OK());
  }
  void Update(const LeaderElectionRecord& record, std::function<void(base::Status)> done) override {
    record_ = record;
    done(base::Status::OK());
  }
  void CancelPending() override {}
  std::string Describe() const override { return "memory"; }

 private:
  bool exists_ = false;
  LeaderElectionRecord record_;
};

LeaderElectorOptions Options() {
  LeaderElectorOptions options;
  options.identity = "a";
  options.timing = {milliseconds(3000), milliseconds(1000), milliseconds(50)};
  return options;
}

TEST(TermExtendedTest, EachAcquireAndRenewalHandsOverTheDeadlineIsLeaderChecks) {
  vmtest::TestLoop loop;
  std::vector<Clock::time_point> deadlines;
  bool leading = false;
  size_t at_start = 0;
  LeaderCallbacks callbacks;
  callbacks.on_term_extended = [&](Clock::time_point d) { deadlines.push_back(d); };
  callbacks.on_started_leading = [&] {
    leading = true;
    at_start = deadlines.size();
  };
  auto elector = LeaderElector::Create(loop.get(), std::make_unique<MemoryLock>(), Options(),
                                       std::move(callbacks));
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

// The kernel's lock is not renewed: one term with no end and no attempt while nothing happens;
// the lock file replaced is a doubt, answered by a renewal at once (the term meanwhile ending
// as a Lease's would), and the holder locks the new file and is back to a term with no end.
TEST(TermExtendedTest, TheFileLockIsHeldWithNoRenewalUntilItsFileChanges) {
  vmtest::TestLoop loop;
  vmtest::TempDir dir;
  std::vector<Clock::time_point> deadlines;
  bool leading = false;
  LeaderCallbacks callbacks;
  callbacks.on_term_extended = [&](Clock::time_point d) { deadlines.push_back(d); };
  callbacks.on_started_leading = [&] { leading = true; };
  auto elector = LeaderElector::Create(loop.get(), std::make_unique<FileLock>(dir.File("lock")),
                                       Options(), std::move(callbacks));
  ASSERT_TRUE(elector.ok()) << elector.status().message();
  LeaderElector& e = **elector;
  e.Start();
  ASSERT_TRUE(loop.RunUntil([&] { return leading; }));
  ASSERT_EQ(deadlines.size(), 1u);
  EXPECT_EQ(deadlines[0], Clock::time_point::max());
  const uint64_t attempts = e.attempts();
  loop.RunFor(milliseconds(400));  // 8 retry periods
  EXPECT_EQ(e.attempts(), attempts) << "no renewal while the file is untouched";
  EXPECT_EQ(deadlines.size(), 1u);
  EXPECT_TRUE(e.IsLeader());

  ASSERT_TRUE(std::filesystem::remove(dir.File("lock")));
  ASSERT_TRUE(loop.RunUntil(
      [&] { return deadlines.size() >= 3 && deadlines.back() == Clock::time_point::max(); }));
  loop.RunFor(milliseconds(100));
  EXPECT_EQ(deadlines.size(), 3u) << "one renewal for one replacement";
  EXPECT_LT(deadlines[1], Clock::time_point::max()) << "in doubt, the term had an end";
  EXPECT_GT(e.attempts(), attempts);
  EXPECT_TRUE(e.IsLeader());
  EXPECT_TRUE(std::filesystem::exists(dir.File("lock")));
  bool stopped = false;
  e.Stop([&] { stopped = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
  elector->reset();
  EXPECT_TRUE(loop.Close());
}

}  // namespace
}  // namespace leaderelection
