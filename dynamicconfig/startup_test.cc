#include "dynamicconfig/startup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "base/durable_file.h"
#include "dynamicconfig/test_configs.h"
#include "tests/support/test_loop.h"

#ifndef VM_FORMATS_DIR
#error "VM_FORMATS_DIR: the testdata/formats dir (CMakeLists.txt)"
#endif

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

// The checkpoints of every format a release has written (testdata/formats/<version>/, written by
// that release's CheckpointStore; testdata/formats/README.md), read by today's code: each record
// as it was saved, and a start decided from them.
TEST_F(StartupTest, EveryCheckpointFormatEverWrittenIsReadAsSaved) {
  for (const char* version : {"v1"}) {
    SCOPED_TRACE(version);
    std::filesystem::remove_all(store_.dir());
    std::filesystem::create_directories(store_.dir());
    for (const char* file : {CheckpointStore::kAssigned, CheckpointStore::kLastKnownGood,
                             CheckpointStore::kRolledBack}) {
      std::filesystem::copy_file(std::string(VM_FORMATS_DIR) + "/" + version + "/" + file,
                                 store_.dir() + "/" + file);
    }
    auto assigned = store_.LoadAssigned();
    ASSERT_TRUE(assigned.ok() && assigned->has_value()) << assigned.status().message();
    const Checkpoint& trial = (*assigned)->checkpoint;
    EXPECT_EQ(trial.Describe(),
              "ConfigMap volumemanager/vm-config (uid 0f2e9c7a-41d3-4c55-9b1e-2d6a8f0c3b11, "
              "resourceVersion 48502)");
    EXPECT_EQ(trial.config, ConfigText("syncFrequency: 90s\nlogging: {format: json}\n"));
    EXPECT_EQ((*assigned)->trial_started_unix, 1764460800);
    EXPECT_EQ((*assigned)->starts, 2);
    EXPECT_EQ((*assigned)->clean_exits, 1);
    auto lkg = store_.LoadLastKnownGood();
    ASSERT_TRUE(lkg.ok() && lkg->has_value()) << lkg.status().message();
    EXPECT_EQ((*lkg)->resource_version, "48213");
    EXPECT_EQ((*lkg)->config, ConfigText("syncFrequency: 2m\n"));
    auto rolled_back = store_.LoadRolledBack();
    ASSERT_TRUE(rolled_back.ok() && rolled_back->has_value()) << rolled_back.status().message();
    EXPECT_EQ((*rolled_back)->checkpoint.name, "vm-config-node-7");
    EXPECT_EQ((*rolled_back)->reason, "3 runs on it ended without a graceful stop");
    // A start: the assigned config, on trial (one of its two runs failed), is run and counted.
    Startup start = Begin(1764461000);
    EXPECT_TRUE(start.errors.empty()) << start.errors[0];
    ASSERT_TRUE(start.active);
    EXPECT_TRUE(start.active->SameRevision(trial));
    EXPECT_TRUE(start.on_trial());
    EXPECT_EQ(SyncFrequency(start), std::chrono::seconds(90));
    EXPECT_EQ((*store_.LoadAssigned())->starts, 3);
  }
}

// A rollback: a checkpoint of a later format (a newer release's) is no corrupt file to set aside
// and fall back from: the start is refused, naming the file and the version, and every file stays.
TEST_F(StartupTest, ACheckpointOfALaterFormatRefusesTheStartAndStaysInPlace) {
  for (const char* file : {CheckpointStore::kAssigned, CheckpointStore::kLastKnownGood,
                           CheckpointStore::kRolledBack}) {
    SCOPED_TRACE(file);
    std::filesystem::remove_all(store_.dir());
    std::filesystem::create_directories(store_.dir());
    std::map<std::string, std::string> before;
    for (const char* f : {CheckpointStore::kAssigned, CheckpointStore::kLastKnownGood,
                          CheckpointStore::kRolledBack}) {
      std::string text = *base::ReadWholeFile(std::string(VM_FORMATS_DIR) + "/v1/" + f);
      // The next format, its record and digest as they are (a later one may change both).
      if (std::string(f) == file) text.replace(text.find("\"version\":1"), 11, "\"version\":2");
      vmtest::WriteFile(store_.dir() + "/" + f, text);
      before[f] = text;
    }
    const std::string path = store_.dir() + "/" + file;
    const std::string said =
        path +
        ": dynamic config checkpoint format version 2 is newer than this release reads "
        "(version 1)";
    base::Status refused = store_.RefuseNewerFormat();
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find(said), std::string::npos) << refused.message();
    EXPECT_NE(refused.message().find("Refusing to start"), std::string::npos) << refused.message();
    for (StartupWrites writes : {StartupWrites::kNone, StartupWrites::kAll}) {
      auto start = BeginStartup(store_, 1764461000, kMaxFailedStarts, parse_, writes);
      ASSERT_FALSE(start.ok()) << "started on a newer release's checkpoints";
      EXPECT_NE(start.status().message().find(said), std::string::npos) << start.status().message();
    }
    std::map<std::string, std::string> after;
    for (const auto& e : std::filesystem::directory_iterator(store_.dir())) {
      after[e.path().filename()] = *base::ReadWholeFile(e.path().string());
    }
    EXPECT_EQ(after, before) << "a checkpoint was changed, set aside or written";
  }
  // Today's format: no refusal.
  std::filesystem::remove_all(store_.dir());
  ASSERT_TRUE(store_.Init().ok());
  ASSERT_TRUE(store_.SaveAssigned({good_, 0, 0, 0}).ok());
  EXPECT_TRUE(store_.RefuseNewerFormat().ok());
}

}  // namespace
}  // namespace dynamicconfig
