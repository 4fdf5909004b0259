#include "manifestdir/manifest_dir_watcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/test_loop.h"

namespace manifestdir {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Call {
  ManifestScanScope scope;
  std::set<std::string> named;
};

class ManifestDirWatcherTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds relist = std::chrono::hours(1),
             std::string path = std::string(),
             std::chrono::milliseconds debounce = std::chrono::milliseconds(5)) {
    ManifestDirWatcherOptions options;
    options.path = path.empty() ? tmp_.path() : path;
    options.allow_single_file = true;
    options.relist_interval = relist;
    options.debounce = debounce;
    options.max_debounce = debounce * 10;
    base::Status s = watcher_.Start(
        loop_.get(), options, [this](ManifestScanScope scope, const std::set<std::string>& n) {
          calls_.push_back({scope, n});
        });
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // The names of kNamed calls, all together.
  std::set<std::string> Named() const {
    std::set<std::string> all;
    for (const Call& c : calls_) {
      if (c.scope == ManifestScanScope::kNamed) all.insert(c.named.begin(), c.named.end());
    }
    return all;
  }
  bool Saw(ManifestScanScope scope) const {
    for (const Call& c : calls_) {
      if (c.scope == scope) return true;
    }
    return false;
  }

  vmtest::TestLoop loop_;
  vmtest::TempDir tmp_;
  ManifestDirWatcher watcher_;
  std::vector<Call> calls_;
};

TEST_F(ManifestDirWatcherTest, ABurstOfWritesIsOneCallNamingTheFiles) {
  // Writes 1 ms apart into files held open while the loop runs, so each write's events reach
  // the watcher before the next write: only the debounce (far longer than the gaps) can make
  // them one call, and it ends at once when the last file is closed.
  Start(std::chrono::hours(1), "", std::chrono::seconds(1));
  std::FILE* a = std::fopen(tmp_.File("a.yaml").c_str(), "w");
  std::FILE* b = std::fopen(tmp_.File("b.json").c_str(), "w");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  loop_.RunSteps(20, std::chrono::milliseconds(1), [&](int i) {
    for (std::FILE* f : {a, b}) {
      std::fputs(std::to_string(i).c_str(), f);
      std::fflush(f);
    }
  });
  loop_.RunFor(std::chrono::milliseconds(20));
  EXPECT_THAT(calls_, IsEmpty()) << "no call while files are being written";
  std::fclose(a);
  std::fclose(b);
  ASSERT_TRUE(loop_.RunUntil([&] { return !calls_.empty(); }));
  loop_.RunFor(std::chrono::milliseconds(20));
  ASSERT_EQ(calls_.size(), 1u) << "events of a burst are coalesced";
  EXPECT_EQ(calls_[0].scope, ManifestScanScope::kNamed);
  EXPECT_THAT(calls_[0].named, ElementsAre("a.yaml", "b.json"));
}

// A file renamed into place or closed after writing is complete: the call comes at once, not
// after the debounce (an hour here).
TEST_F(ManifestDirWatcherTest, AFileRenamedIntoPlaceOrClosedIsReadWithoutTheDebounce) {
  Start(std::chrono::hours(1), "", std::chrono::hours(1));
  vmtest::ReplaceFile(tmp_.File("a.yaml"), "a");
  ASSERT_TRUE(loop_.RunUntil([&] { return !calls_.empty(); }, std::chrono::seconds(10)));
  EXPECT_THAT(Named(), ElementsAre("a.yaml"));
  vmtest::WriteFile(tmp_.File("b.yaml"), "b");
  ASSERT_TRUE(
      loop_.RunUntil([&] { return Named().count("b.yaml") == 1; }, std::chrono::seconds(10)));
}

// A file still open for writing is not read until it is closed (or the debounce ends a burst
// that never completes).
TEST_F(ManifestDirWatcherTest, AFileBeingWrittenWaitsForItsClose) {
  Start(std::chrono::hours(1), "", std::chrono::hours(1));
  std::FILE* f = std::fopen(tmp_.File("a.yaml").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("half", f);
  std::fflush(f);
  loop_.RunFor(std::chrono::milliseconds(200));
  EXPECT_THAT(calls_, IsEmpty());
  std::fputs(" and the rest", f);
  std::fclose(f);
  ASSERT_TRUE(loop_.RunUntil([&] { return !calls_.empty(); }, std::chrono::seconds(10)));
  EXPECT_THAT(Named(), ElementsAre("a.yaml"));
}

TEST_F(ManifestDirWatcherTest, RenameIntoPlaceNamesTheTarget) {
  Start();
  vmtest::ReplaceFile(tmp_.File("a.yaml"), "a");
  ASSERT_TRUE(loop_.RunUntil([&] { return !calls_.empty(); }));
  EXPECT_THAT(Named(), ElementsAre("a.yaml")) << "the temporary name is not reported";
}

TEST_F(ManifestDirWatcherTest, OtherNamesCauseNoCall) {
  Start();
  for (const char* name : {".a.yaml.swp", "a.yaml~", "notes.txt", "4913", ".hidden.json"}) {
    vmtest::WriteFile(tmp_.File(name), "junk");
  }
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_THAT(calls_, IsEmpty());
}

TEST_F(ManifestDirWatcherTest, DataEntrySwapAsksForAStatOfEveryFile) {
  fs::create_directory(tmp_.File("..v1"));
  fs::create_directory_symlink("..v1", tmp_.File("..data"));
  Start();
  fs::create_directory(tmp_.File("..v2"));
  fs::create_directory_symlink("..v2", tmp_.File("..data_tmp"));
  fs::rename(tmp_.File("..data_tmp"), tmp_.File("..data"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !calls_.empty(); }));
  EXPECT_TRUE(Saw(ManifestScanScope::kStatAll));
}

TEST_F(ManifestDirWatcherTest, RelistAsksForAStatOfEveryFile) {
  Start(std::chrono::milliseconds(10));
  ASSERT_TRUE(loop_.RunUntil([&] { return calls_.size() >= 2; }));
  EXPECT_EQ(calls_[0].scope, ManifestScanScope::kStatAll);
  EXPECT_THAT(calls_[0].named, IsEmpty());
}

TEST_F(ManifestDirWatcherTest, MissingDirectoryIsWatchedOnceItAppears) {
  // The debounce is longer than the relist interval, so the relist arms the watch while the
  // parent's "it appeared" event still waits for its burst's end: the read of everything that
  // follows the new watch covers that event, and a later write is named on its own (CI once saw
  // that order and the write folded into a read of everything).
  fs::remove(tmp_.path());
  Start(std::chrono::milliseconds(10), "", std::chrono::milliseconds(300));
  fs::create_directory(tmp_.path());
  const size_t relists = calls_.size();
  ASSERT_TRUE(loop_.RunUntil([&] { return calls_.size() > relists; }));  // armed after it
  vmtest::WriteFile(tmp_.File("a.yaml"), "a");
  ASSERT_TRUE(loop_.RunUntil([&] { return !Named().empty(); }));
  EXPECT_THAT(Named(), ElementsAre("a.yaml")) << "only an event names files";
}

TEST_F(ManifestDirWatcherTest, SingleFileIsWatchedThroughItsDirectory) {
  vmtest::WriteFile(tmp_.File("only.yaml"), "1");
  Start(std::chrono::hours(1), tmp_.File("only.yaml"));
  vmtest::ReplaceFile(tmp_.File("only.yaml"), "2");
  ASSERT_TRUE(loop_.RunUntil([&] { return !Named().empty(); }));
  EXPECT_THAT(Named(), Contains("only.yaml"));
}

TEST_F(ManifestDirWatcherTest, NoCallAfterStopEvenFromInsideTheHandler) {
  ManifestDirWatcherOptions options;
  options.path = tmp_.path();
  options.relist_interval = std::chrono::milliseconds(5);
  int calls = 0;
  ASSERT_TRUE(watcher_
                  .Start(loop_.get(), options,
                         [&](ManifestScanScope, const std::set<std::string>&) {
                           ++calls;
                           watcher_.Stop();
                         })
                  .ok());
  ASSERT_TRUE(loop_.RunUntil([&] { return calls > 0; }));
  vmtest::WriteFile(tmp_.File("a.yaml"), "a");
  loop_.RunFor(std::chrono::milliseconds(50));
  EXPECT_EQ(calls, 1);
}

TEST(ManifestDirWatcherOptionsTest, RejectsAnEmptyPathAndASecondStart) {
  vmtest::TestLoop loop;
  vmtest::TempDir tmp;
  ManifestDirWatcher watcher;
  auto ignore = [](ManifestScanScope, const std::set<std::string>&) {};
  EXPECT_FALSE(watcher.Start(loop.get(), {}, ignore).ok());
  ManifestDirWatcherOptions options;
  options.path = tmp.path();
  EXPECT_TRUE(watcher.Start(loop.get(), options, ignore).ok());
  EXPECT_FALSE(watcher.Start(loop.get(), options, ignore).ok());
}

// A directory removed and created again is followed by its fs events at once (its parent is
// watched while it is missing), not at the next relist (an hour away here).
TEST_F(ManifestDirWatcherTest, ADirectoryRemovedAndRestoredIsFollowedWithoutARelist) {
  const std::string dir = tmp_.File("objects");
  fs::create_directory(dir);
  Start(std::chrono::hours(1), dir);
  fs::remove_all(dir);
  ASSERT_TRUE(loop_.RunUntil([&] { return Saw(ManifestScanScope::kReadAll); }))
      << "the removal is seen";
  calls_.clear();
  fs::create_directory(dir);
  vmtest::WriteFile(dir + "/cm.yaml", "kind: ConfigMap\n");
  ASSERT_TRUE(loop_.RunUntil([&] { return Saw(ManifestScanScope::kReadAll); }))
      << "the re-creation is seen through the parent's watch";
  // And the new directory is watched: a later file is named by its own event.
  calls_.clear();
  vmtest::WriteFile(dir + "/second.yaml", "kind: ConfigMap\n");
  ASSERT_TRUE(loop_.RunUntil([&] { return Named().count("second.yaml") > 0; }));

  // Renamed away and another renamed into place: the same.
  calls_.clear();
  fs::rename(dir, tmp_.File("old"));
  fs::create_directory(tmp_.File("new"));
  vmtest::WriteFile(tmp_.File("new") + "/third.yaml", "kind: ConfigMap\n");
  fs::rename(tmp_.File("new"), dir);
  ASSERT_TRUE(loop_.RunUntil([&] { return Saw(ManifestScanScope::kReadAll); }));
  calls_.clear();
  vmtest::WriteFile(dir + "/fourth.yaml", "kind: ConfigMap\n");
  ASSERT_TRUE(loop_.RunUntil([&] { return Named().count("fourth.yaml") > 0; }));
}

}  // namespace
}  // namespace manifestdir
