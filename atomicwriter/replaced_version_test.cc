// What becomes of the version a write replaces (Options::replaced_version).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/removal_queue.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// QueuedWriterTest's 30 s grace and fake clock, with or without the queue.
class ReplacedVersionTest : public QueuedWriterTest {
 protected:
  Options With(ReplacedVersion replaced, bool queued) {
    Options o = Queued();
    if (!queued) o.removals = nullptr;
    o.replaced_version = replaced;
    return o;
  }
};

TEST_F(ReplacedVersionTest, AtOnceWithAQueueTheReplacedVersionIsDueNowAndOtherEntriesWait) {
  auto w = OpenWriter(With(ReplacedVersion::kAtOnce, /*queued=*/true));
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  // Another writer's dir (or crash debris): it may be a write in progress, so it keeps its grace.
  const fs::path other = fs::path(vol_) / "..2020_01_01_00_00_00.7";
  fs::create_directory(other);
  const Payload v2 = MakePayload({{"a", "2"}});
  auto r2 = w->Write(v2);  // the dir changed since the last write: read in full
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->published);
  EXPECT_FALSE(r2->removed_replaced) << "with a queue the write removes no tree itself";
  EXPECT_EQ(r2->queued_removals, 2);
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir));

  EXPECT_EQ(queue_.RunDue(now_), 1u) << "the replaced version is due at once";
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  EXPECT_TRUE(fs::is_directory(other)) << "another writer's dir went before its grace";

  // The next write (no full read: only the queue's removal changed the dir since the last write,
  // RemovalQueue::TookDirFromTo) queues the version it replaced due now as well; the other
  // writer's dir stays queued with the due time it had.
  const Payload v3 = MakePayload({{"a", "3"}});
  auto r3 = w->Write(v3);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->queued_removals, 1);
  EXPECT_EQ(queue_.pending(), 2u);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r2->ts_dir));
  EXPECT_TRUE(fs::is_directory(other));

  now_ += seconds(30);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(other));
  EXPECT_EQ(DescribeDebris(vol_, v3), "");
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v3));
}

TEST_F(ReplacedVersionTest, VersionsQueuedAtOnceLeaveNothingInTheLedger) {
  auto w = OpenWriter(With(ReplacedVersion::kAtOnce, /*queued=*/true));
  Payload v;
  for (int i = 1; i <= 5; ++i) {
    v = MakePayload({{"a", std::to_string(i)}});
    auto r = w->Write(v);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->queued_removals, i == 1 ? 0 : 1);
  }
  // Writes 2-5 found the dir as the write before left it, and queued the version each replaced.
  EXPECT_EQ(ledger_.size(), 0u) << "a burst of changes must not grow the ledger for 30 s";
  EXPECT_EQ(queue_.RunDue(now_), 4u);
  EXPECT_EQ(DescribeDebris(vol_, v), "");

  // With the grace, the ledger keeps each queued version until a full read finds it gone.
  auto shared = OpenWriter(With(ReplacedVersion::kAfterGrace, /*queued=*/true));
  for (int i = 6; i <= 8; ++i) {
    ASSERT_TRUE(shared->Write(MakePayload({{"a", std::to_string(i)}})).ok());
  }
  EXPECT_EQ(ledger_.size(), 3u) << "the versions writes 6-8 replaced";
}

TEST_F(ReplacedVersionTest, AfterGraceIsTheDefaultAndKeepsTheReplacedVersionForTheGrace) {
  EXPECT_EQ(Options{}.replaced_version, ReplacedVersion::kAfterGrace);
  auto w = OpenWriter(With(ReplacedVersion::kAfterGrace, /*queued=*/true));
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
  EXPECT_EQ(queue_.RunDue(now_), 0u);
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir));
  now_ += seconds(30);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
}

TEST_F(ReplacedVersionTest, AtOnceWithoutAQueueTheWriteRemovesItAfterTheSwap) {
  auto w = OpenWriter(With(ReplacedVersion::kAtOnce, /*queued=*/false));
  auto r1 = w->Write(MakePayload({{"d/a", "1"}, {"b", "1"}}));
  ASSERT_TRUE(r1.ok());
  EXPECT_FALSE(r1->removed_replaced) << "the first write replaced nothing";
  const Payload v2 = MakePayload({{"d/a", "2"}, {"b", "2"}});
  auto r2 = w->Write(v2);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->removed_replaced);
  EXPECT_TRUE(r2->cleanup_error.empty()) << r2->cleanup_error;
  EXPECT_EQ(r2->awaiting_grace, 0);
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(DescribeDebris(vol_, v2), "");
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v2));

  // A write of the same bytes replaces nothing and removes nothing.
  auto r3 = w->Write(v2);
  ASSERT_TRUE(r3.ok());
  EXPECT_FALSE(r3->published);
  EXPECT_FALSE(r3->removed_replaced);
  EXPECT_EQ(LiveTsDir(), r2->ts_dir);
}

TEST_F(ReplacedVersionTest, AFailedRemovalInTheWriteLeavesTheRestToTheGracePeriod) {
  FaultInjectionEnv faulty(PosixEnv());
  Options o = With(ReplacedVersion::kAtOnce, /*queued=*/false);
  o.fs = &faulty;
  auto w = OpenWriter(o);
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  faulty.FailNext("unlinkat", EACCES);
  const Payload v2 = MakePayload({{"a", "2"}});
  auto r2 = w->Write(v2);
  ASSERT_TRUE(r2.ok()) << "past the swap nothing fails the write";
  EXPECT_TRUE(r2->published);
  EXPECT_FALSE(r2->removed_replaced);
  EXPECT_NE(r2->cleanup_error.find("Permission denied"), std::string::npos) << r2->cleanup_error;
  EXPECT_EQ(r2->awaiting_grace, 1) << "what is left waits out the grace like any unpublished dir";
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v2));

  now_ += seconds(30);
  auto r3 = w->Write(v2);
  ASSERT_TRUE(r3.ok());
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(DescribeDebris(vol_, v2), "");
}

TEST_F(ReplacedVersionTest, WhereFreedInodesWaitFollowsTheFilesystemOfTheVolume) {
  // The test dir's filesystem decides: at once on an ext4 without a journal, after the grace on
  // anything else.
  auto w = OpenWriter(With(ReplacedVersion::kAtOnceWhereFreedInodesWait, /*queued=*/true));
  const bool at_once = ProbeFilesystem(w->dir_fd()).freed_inodes_wait;
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
  EXPECT_EQ(queue_.RunDue(now_), at_once ? 1u : 0u);
  EXPECT_EQ(fs::exists(fs::path(vol_) / r1->ts_dir), !at_once);
}

}  // namespace
}  // namespace atomicwriter
