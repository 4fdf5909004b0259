#include "dynamicconfig/startup.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dynamicconfig/test_configs.h"
#include "tests/support/test_loop.h"

namespace dynamicconfig {
namespace {

class StartupTest : public ::testing::Test {
 protected:
  StartupTest() : store_(state_.File("dynamic-config")), parse_(TestParse(state_.path())) {}

  Startup Begin(int64_t now = 1000) {
    auto s = BeginStartup(store_, now, kMaxFailedStarts, parse_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return *s;
  }
  std::chrono::nanoseconds SyncFrequency(const Startup& s) {
    return s.parsed.config->sync_frequency;
  }

  vmtest::TempDir state_;
  CheckpointStore store_;
  ParseFunction parse_;
  const Checkpoint good_ = TestCheckpoint("5", "syncFrequency: 2m\n");
  const Checkpoint next_ = TestCheckpoint("6", "syncFrequency: 3m\n");
};

TEST_F(StartupTest, NothingAssignedRunsOnTheFileAndFlags) {
  Startup s = Begin();
  EXPECT_FALSE(s.active);
  EXPECT_FALSE(s.on_trial());
  EXPECT_TRUE(s.errors.empty());
  EXPECT_EQ(SyncFrequency(s), std::chrono::minutes(1));
  EXPECT_TRUE(std::filesystem::is_directory(store_.dir()));
}

TEST_F(StartupTest, EachStartOnTrialIsCountedAndTheTrialClockStartsAtTheFirst) {
  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveLastKnownGood(good_).ok());
  ASSERT_TRUE(store_.SaveAssigned({next_, 0, 0, 0}).ok());
  Startup first = Begin(1000);
  ASSERT_TRUE(first.active);
  EXPECT_TRUE(first.active->SameRevision(next_));
  EXPECT_TRUE(first.on_trial());
  EXPECT_EQ(SyncFrequency(first), std::chrono::minutes(3));
  EXPECT_EQ(first.parsed.sources["syncFrequency"], "dynamic");
  Startup second = Begin(1050);
  EXPECT_EQ(second.assigned->starts, 2);
  EXPECT_EQ(second.assigned->trial_started_unix, 1000);
  EXPECT_EQ((*store_.LoadAssigned())->starts, 2);
}

// A daemon that does not hold the node's lock yet decides from the disk and writes nothing: its
// start is not counted, no rollback or corrupt file is recorded, the dir is not even created.
TEST_F(StartupTest, BeforeTheLockTheDecisionIsTakenAndNothingIsWritten) {
  auto read_only = [&] {
    auto s = BeginStartup(store_, 1000, kMaxFailedStarts, parse_, StartupWrites::kNone);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return *s;
  };
  Startup none = read_only();
  EXPECT_FALSE(none.active);
  EXPECT_FALSE(std::filesystem::exists(store_.dir()));

  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveLastKnownGood(good_).ok());
  // On trial, never counted however often it starts.
  ASSERT_TRUE(store_.SaveAssigned({next_, 0, 1, 0}).ok());
  for (int i = 0; i < kMaxFailedStarts + 2; ++i) {
    Startup s = read_only();
    ASSERT_TRUE(s.active);
    EXPECT_TRUE(s.active->SameRevision(next_));
    EXPECT_EQ(s.assigned->starts, 2);  // as the start holding the lock would count it
  }
  EXPECT_EQ((*store_.LoadAssigned())->starts, 1);
  EXPECT_EQ((*store_.LoadAssigned())->trial_started_unix, 0);
  // Due for a rollback: decided (runs on the last known good config), not recorded.
  ASSERT_TRUE(store_.SaveAssigned({next_, 900, kMaxFailedStarts, 0}).ok());
  Startup s = read_only();
  EXPECT_TRUE(s.rolled_back_now);
  EXPECT_TRUE(s.active->SameRevision(good_));
  EXPECT_FALSE(*store_.LoadRolledBack());
  EXPECT_TRUE((*store_.LoadAssigned())->checkpoint.SameRevision(next_));
  // The start holding the lock decides again and records it.
  Startup counted = Begin();
  EXPECT_TRUE(counted.rolled_back_now);
  EXPECT_TRUE((*store_.LoadRolledBack())->checkpoint.SameRevision(next_));
}

TEST_F(StartupTest, RepeatedFailedRunsOnTrialRollBackToTheLastKnownGood) {
  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveLastKnownGood(good_).ok());
  ASSERT_TRUE(store_.SaveAssigned({next_, 0, 0, 0}).ok());
  for (int i = 0; i < kMaxFailedStarts; ++i) {
    Startup s = Begin();
    ASSERT_TRUE(s.active->SameRevision(next_)) << "start " << i;
    EXPECT_FALSE(s.rolled_back_now);
  }
  Startup s = Begin();
  EXPECT_TRUE(s.rolled_back_now);
  ASSERT_TRUE(s.active);
  EXPECT_TRUE(s.active->SameRevision(good_));
  EXPECT_FALSE(s.on_trial());
  EXPECT_EQ(SyncFrequency(s), std::chrono::minutes(2));
  ASSERT_TRUE(s.rolled_back);
  EXPECT_TRUE(s.rolled_back->checkpoint.SameRevision(next_));
  EXPECT_NE(s.rolled_back->reason.find("3 of 3 runs"), std::string::npos) << s.rolled_back->reason;
  EXPECT_TRUE((*store_.LoadRolledBack())->checkpoint.SameRevision(next_));
  // The next start stays on the last known good config and reports nothing new.
  Startup again = Begin();
  EXPECT_TRUE(again.active->SameRevision(good_));
  EXPECT_FALSE(again.rolled_back_now);
}

TEST_F(StartupTest, GracefulStopsDoNotCountAsFailedRuns) {
  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveAssigned({next_, 900, 5, 3}).ok());  // 2 failed of 5
  Startup s = Begin();
  EXPECT_FALSE(s.rolled_back_now);
  EXPECT_TRUE(s.active->SameRevision(next_));
  Startup third = Begin();  // 3 failed now (the last run ended without a stop): rolled back
  EXPECT_TRUE(third.rolled_back_now);
  EXPECT_FALSE(third.active);  // no last known good: the file and flags
  EXPECT_EQ(SyncFrequency(third), std::chrono::minutes(1));
  EXPECT_FALSE(store_.LoadAssigned()->has_value());
}

TEST_F(StartupTest, AConfigNoLongerValidWithTheFlagsIsRolledBack) {
  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveLastKnownGood(good_).ok());
  ASSERT_TRUE(store_.SaveAssigned({TestCheckpoint("9", "syncFrequency: 0s\n"), 0, 0, 0}).ok());
  Startup s = Begin();
  EXPECT_TRUE(s.rolled_back_now);
  EXPECT_TRUE(s.active->SameRevision(good_));
  EXPECT_NE(s.rolled_back->reason.find("field syncFrequency: --sync-frequency: must be greater"),
            std::string::npos)
      << s.rolled_back->reason;
}

TEST_F(StartupTest, CorruptCheckpointsFallBackWithAnError) {
  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveLastKnownGood(good_).ok());
  vmtest::WriteFile(store_.dir() + "/" + CheckpointStore::kAssigned, "{\"kind\": truncated");
  Startup s = Begin();
  ASSERT_TRUE(s.active);
  EXPECT_TRUE(s.active->SameRevision(good_));
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_NE(s.errors[0].find("assigned.json: corrupt"), std::string::npos) << s.errors[0];
  EXPECT_NE(s.errors[0].find("using the last known good config"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(store_.dir() + "/assigned.json.corrupt"));
  // The last known good config is the assigned one now: the next start finds it.
  EXPECT_TRUE((*store_.LoadAssigned())->checkpoint.SameRevision(good_));
  EXPECT_TRUE(Begin().errors.empty());

  // A corrupt last known good config as well: the file and flags.
  vmtest::WriteFile(store_.dir() + "/" + CheckpointStore::kAssigned, "x");
  vmtest::WriteFile(store_.dir() + "/" + CheckpointStore::kLastKnownGood, "y");
  Startup bare = Begin();
  EXPECT_FALSE(bare.active);
  EXPECT_EQ(SyncFrequency(bare), std::chrono::minutes(1));
  ASSERT_EQ(bare.errors.size(), 2u);
  EXPECT_NE(bare.errors[0].find("last-known-good.json: corrupt"), std::string::npos);
  EXPECT_NE(bare.errors[1].find("using the file and flags alone"), std::string::npos);
}

}  // namespace
}  // namespace dynamicconfig
