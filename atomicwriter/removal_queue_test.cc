#include "atomicwriter/removal_queue.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

TEST_F(QueuedWriterTest, TheReplacedVersionIsQueuedNotRemovedAndGoesWhenItsGraceIsOver) {
  auto w = OpenWriter(Queued());
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  const Payload v2 = MakePayload({{"a", "2"}});
  auto r2 = w->Write(v2);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->published);
  EXPECT_EQ(r2->queued_removals, 1);
  EXPECT_EQ(r2->awaiting_grace, 0) << "the queue removes it: no later write is needed";
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir)) << "removed inside the write";
  EXPECT_EQ(queue_.pending(), 1u);

  now_ += seconds(29);
  EXPECT_EQ(queue_.RunDue(now_), 0u);
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir)) << "removed before its grace ran out";

  now_ += seconds(1);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(DescribeDebris(vol_, v2), "");
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v2));
  EXPECT_EQ(queue_.pending(), 0u);
}

// One writer per node: while the queue is not permitted to remove (the node's lock lost), a due
// entry is held, nothing under the volume is renamed or removed; once permitted again, it goes.
TEST_F(QueuedWriterTest, NothingIsRemovedWhileRemovingIsNotPermitted) {
  std::atomic<bool> permitted{false};
  queue_.SetPermission([&] { return permitted.load(); });
  auto w = OpenWriter(Queued());
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
  const std::set<std::string> before = DotDotEntries();
  now_ += seconds(30);
  EXPECT_EQ(queue_.RunDue(now_), 0u);
  EXPECT_EQ(DotDotEntries(), before) << "renamed or removed without the lock";
  EXPECT_TRUE(Removing().empty());
  EXPECT_EQ(queue_.stats().held, 1u);
  EXPECT_EQ(queue_.pending(), 1u) << "held entries stay queued";
  // Looked at again a retry interval later, still not permitted: still there.
  now_ += seconds(1);
  EXPECT_EQ(queue_.RunDue(now_), 0u);
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(queue_.stats().held, 2u);
  permitted = true;
  now_ += seconds(1);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
}

TEST_F(QueuedWriterTest, AWriteNeverRemovesATreeItself) {
  // Even a write that finds an entry long past its grace period only queues it.
  auto w = OpenWriter(Queued());
  const Payload p = MakePayload({{"a", "1"}});
  ASSERT_TRUE(w->Write(p).ok());
  const fs::path debris = fs::path(vol_) / "..2020_01_01_00_00_00.1";
  fs::create_directory(debris);
  ASSERT_TRUE(w->Write(p).ok());
  now_ += std::chrono::hours(1);
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(fs::exists(debris));
  EXPECT_EQ(r->queued_removals, 1);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(debris));
}

// What may happen to a queued entry before it falls due, and what the queue then does.
TEST_F(QueuedWriterTest, AtItsDueTimeAnEntryIsRemovedOnlyIfStillUnpublishedAndUnchanged) {
  struct Case {
    const char* name;
    // Runs between the queueing write and the due time; gets the volume dir and the queued
    // version's path.
    std::function<void(const fs::path& vol, const fs::path& old)> meanwhile;
    bool exists_after_due;
    bool exists_a_grace_later;
  };
  const Case cases[] = {
      {"untouched", [](const fs::path&, const fs::path&) {}, false, false},
      {"still being written (a file added: its ctime moved)",
       [](const fs::path&, const fs::path& old) {
         std::this_thread::sleep_for(std::chrono::milliseconds(20));
         std::ofstream(old / "late") << "x";
       },
       true, false},
      {"published again by another writer",
       [](const fs::path& vol, const fs::path& old) {
         fs::remove(vol / "..data");
         fs::create_directory_symlink(old.filename(), vol / "..data");
       },
       true, true},
      {"replaced by another entry of the same name",
       [](const fs::path&, const fs::path& old) {
         fs::remove_all(old);
         fs::create_directory(old);
       },
       true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(vol_);
    fs::create_directory(vol_);
    ledger_ = UnpublishedLedger();
    auto w = OpenWriter(Queued());
    auto r1 = w->Write(MakePayload({{"a", "1"}}));
    ASSERT_TRUE(r1.ok());
    ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
    const fs::path old = fs::path(vol_) / r1->ts_dir;
    c.meanwhile(vol_, old);
    now_ += seconds(30);
    queue_.RunDue(now_);
    EXPECT_EQ(fs::exists(old), c.exists_after_due);
    now_ += seconds(30);
    queue_.RunDue(now_);
    EXPECT_EQ(fs::exists(old), c.exists_a_grace_later);
    EXPECT_TRUE(Removing().empty());
    EXPECT_EQ(queue_.pending(), 0u);
  }
}

// The version this process published and its next write replaced (the dir as that write left
// it) is complete: the queue never reads its tree, at the stamp or at the due time, and judges it
// by its own inode and ctime. Once it changes, it is stamped and judged like any other entry.
TEST_F(QueuedWriterTest, TheVersionThisProcessPublishedIsRemovedWithoutReadingItsTree) {
  FaultInjectionEnv env(PosixEnv());
  RemovalQueue queue(&env, [this] { return now_; });
  Options o = Queued();
  o.removals = &queue;
  auto w = OpenWriter(o);
  auto r1 = w->Write(MakePayload({{"a", "1"}, {"d/b", "1"}}));
  ASSERT_TRUE(r1.ok());
  auto r2 = w->Write(MakePayload({{"a", "2"}, {"d/b", "2"}}));
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->queued_removals, 1);

  // Changed after it was queued: not what the write knew; its tree is stamped from then on.
  const fs::path old = fs::path(vol_) / r1->ts_dir;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(old / "late") << "x";
  queue.RunDue(now_);
  now_ += seconds(30);
  EXPECT_EQ(queue.RunDue(now_), 0u);
  EXPECT_TRUE(fs::exists(old)) << "removed although it changed during its grace period";
  now_ += seconds(20);
  std::ofstream(old / "d" / "later") << "x";  // only d's ctime moves
  now_ += seconds(10);
  EXPECT_EQ(queue.RunDue(now_), 0u);
  EXPECT_TRUE(fs::exists(old / "d" / "later")) << "removed 10 s after a change in its tree";
  now_ += seconds(30);
  EXPECT_EQ(queue.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(old));

  // Unchanged: never read but by its removal.
  auto r3 = w->Write(MakePayload({{"a", "3"}, {"d/b", "3"}}));  // a full read: the queue removed
  ASSERT_TRUE(r3.ok());
  now_ += seconds(10);
  auto r4 = w->Write(MakePayload({{"a", "4"}, {"d/b", "4"}}));
  ASSERT_TRUE(r4.ok());
  ASSERT_EQ(r4->queued_removals, 1);
  EXPECT_EQ(queue.pending(), 2u) << "r2's version (queued by the full read) and r3's";
  now_ += seconds(20);
  EXPECT_EQ(queue.RunDue(now_), 1u);  // r2's version, due 30 s after r3
  env.RecordCalls(true);
  EXPECT_EQ(queue.RunDue(now_), 0u);
  EXPECT_TRUE(env.recorded().empty()) << env.recorded().size() << " calls before it is due";
  now_ += seconds(10);
  EXPECT_EQ(queue.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r3->ts_dir));
  const std::vector<std::string> calls = env.recorded();
  // Only the removal reads the tree: its dirs, the version's and d/, once each.
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "readdir"), 2);
  EXPECT_TRUE(Removing().empty());
}

// Another writer's version in progress (the kubelet's writes an item "a/b/c" into a nested
// subdir of its version dir): a file created there moves the subdir's ctime only, never the
// version dir's. A write that stalls there for 40 s, past a grace period of 30 s, is not removed
// while it goes on; it goes a grace period after its last change.
TEST_F(QueuedWriterTest, AVersionStillBeingWrittenInANestedSubdirIsNotRemoved) {
  auto w = OpenWriter(Queued());
  ASSERT_TRUE(w->Write(MakePayload({{"x", "1"}})).ok());
  const std::string name = "..2020_01_01_00_00_00.123";
  const fs::path theirs = fs::path(vol_) / name;
  fs::create_directories(theirs / "a" / "b");
  std::ofstream(theirs / "top") << "1";
  std::ofstream(theirs / "a" / "b" / "c0") << "1";
  // The next write (a full read: the dir changed) finds it unpublished and queues it.
  auto r = w->Write(MakePayload({{"x", "2"}}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->queued_removals, 2) << "the replaced version and theirs";
  queue_.RunDue(now_);  // what the worker does at once

  struct stat before {};
  ASSERT_EQ(::lstat(theirs.c_str(), &before), 0);
  now_ += seconds(20);
  std::ofstream(theirs / "a" / "b" / "c1") << "1";  // 20 s in: only a/b changes
  now_ += seconds(10);
  queue_.RunDue(now_);  // 30 s: its first due time
  EXPECT_TRUE(fs::exists(theirs / "a" / "b" / "c1")) << "removed 10 s after a change in its tree";
  now_ += seconds(10);
  std::ofstream(theirs / "a" / "b" / "c2") << "1";  // 40 s in
  now_ += seconds(20);
  queue_.RunDue(now_);  // 60 s: due again after the change at 20 s
  EXPECT_TRUE(fs::exists(theirs / "a" / "b" / "c2")) << "removed 20 s after a change in its tree";
  struct stat after {};
  ASSERT_EQ(::lstat(theirs.c_str(), &after), 0);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec) << "the test's premise: the version "
                                                              "dir's own ctime never moved";
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);

  now_ += seconds(30);
  queue_.RunDue(now_);  // 90 s: a full grace period after the last change at 40 s
  EXPECT_FALSE(fs::exists(theirs)) << "a quiet tree goes a grace period after its last change";
  EXPECT_TRUE(Removing().empty());
}

TEST_F(QueuedWriterTest, AVolumeDirMadeAgainIsNotTheQueuedOnes) {
  auto w = OpenWriter(Queued());
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
  w.reset();
  // Torn down and set up again, with an entry of the same name (another writer's, say).
  fs::remove_all(vol_);
  fs::create_directory(vol_);
  fs::create_directory(fs::path(vol_) / r1->ts_dir);
  now_ += seconds(30);
  queue_.RunDue(now_);
  // Kept (another volume dir), or, when the new dir got the old one's inode number, restarted
  // (another entry): either way not removed at the old entry's due time.
  EXPECT_TRUE(fs::exists(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(queue_.stats().removed, 0u);
}

// A burst of writes to one volume reads the volume dir once: the changed writes after the first
// find it as the last one left it, read nothing (their bytes differ from those the live version
// was written with, so there is nothing to compare) and only queue the version they replaced. A
// write of the same bytes still compares them with the live version. Anything that changes the
// dir (an entry of another writer, a link removed), other top-level names, or a grace period
// since the last full read make the next write read the dir again.
TEST_F(QueuedWriterTest, TheBytesTheLiveVersionHoldsAreReadAgainOnlyWhenSomethingInItChanged) {
  FaultInjectionEnv counting(PosixEnv());
  Options o = Queued();
  o.fs = &counting;
  auto w = OpenWriter(o);
  const Payload v = MakePayload({{"a", "1"}, {"d/b", "2"}});
  const fs::path live = fs::path(vol_) / "..data";
  bool published = false;
  // ReadDir calls while comparing with the live version: one per dir of it (2), when it is read.
  auto read_dirs_of = [&](const Payload& p) {
    const int before = counting.read_dir_calls();
    auto r = w->Write(p);
    EXPECT_TRUE(r.ok());
    published = r.ok() && r->published;
    return counting.read_dir_calls() - before;
  };
  ASSERT_EQ(read_dirs_of(v), 1) << "the first write: a full read of the volume dir";
  EXPECT_EQ(read_dirs_of(v), 2) << "the bytes just written: read once";
  EXPECT_FALSE(published);
  EXPECT_EQ(read_dirs_of(v), 0) << "found the same, and nothing changed since";
  EXPECT_EQ(read_dirs_of(v), 0);

  // Rewritten in place, same size: mtime and ctime move (after the clock's tick, however coarse).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  { std::ofstream(live / "d" / "b", std::ios::trunc) << "X"; }
  EXPECT_EQ(read_dirs_of(v), 2);
  EXPECT_TRUE(published);
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v));

  // A file added beside the payload's: its dir's mtime moves, and the write replaces the version.
  EXPECT_EQ(read_dirs_of(v), 2);
  EXPECT_EQ(read_dirs_of(v), 0);
  { std::ofstream(live / "d" / "extra") << "e"; }
  EXPECT_GE(read_dirs_of(v), 1);
  EXPECT_TRUE(published);
  EXPECT_FALSE(fs::exists(live / "d" / "extra"));
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v));

  // A mode changed: read again, found the same bytes, nothing published.
  EXPECT_EQ(read_dirs_of(v), 2);
  ASSERT_EQ(::chmod((live / "a").c_str(), 0600), 0);
  EXPECT_EQ(read_dirs_of(v), 2);
  EXPECT_FALSE(published);
  EXPECT_EQ(read_dirs_of(v), 0);

  // A grace period after they were last read, they are read again, changed or not.
  now_ += seconds(31);
  EXPECT_GE(read_dirs_of(v), 2);
  EXPECT_FALSE(published);
}

TEST_F(QueuedWriterTest, WritesReadTheVolumeDirAgainOnlyWhenSomethingElseMayHaveChangedIt) {
  FaultInjectionEnv counting(PosixEnv());
  Options o = Queued();
  o.fs = &counting;
  auto w = OpenWriter(o);
  const Payload v1 = MakePayload({{"a", "1"}});
  const Payload v2 = MakePayload({{"a", "2"}});
  // ReadDir calls: one to compare with the live version, one for a full read of the volume dir.
  bool published = false;
  auto read_dirs_of = [&](const Payload& p, int* queued) {
    const int before = counting.read_dir_calls();
    auto r = w->Write(p);
    EXPECT_TRUE(r.ok());
    *queued = r.ok() ? r->queued_removals : -1;
    published = r.ok() && r->published;
    return counting.read_dir_calls() - before;
  };
  int queued = 0;
  EXPECT_EQ(read_dirs_of(v1, &queued), 1) << "the first write: nothing to compare, a full read";
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(read_dirs_of(i % 2 == 0 ? v2 : v1, &queued), 0) << "write " << i;
    EXPECT_EQ(queued, 1) << "write " << i;
  }
  EXPECT_EQ(queue_.pending(), 6u);
  EXPECT_EQ(read_dirs_of(v1, &queued), 1) << "the same bytes: compared, not published";
  EXPECT_FALSE(published);

  // The live file changed in place (the volume dir does not show it): a write of the same bytes
  // compares and publishes them again.
  { std::ofstream(fs::path(vol_) / "..data" / "a", std::ios::trunc) << "tampered"; }
  EXPECT_EQ(read_dirs_of(v1, &queued), 1);
  EXPECT_TRUE(published);
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v1));

  // Another writer's dir appears: the next write reads the dir and queues it too.
  const fs::path other = fs::path(vol_) / "..2020_01_01_00_00_00.7";
  fs::create_directory(other);
  EXPECT_EQ(read_dirs_of(v2, &queued), 2);
  EXPECT_EQ(queued, 9) << "the seven queued earlier, the one replaced now, the other writer's dir";
  EXPECT_EQ(read_dirs_of(v1, &queued), 0);

  // A grace period after the last full read, the next write reads the dir again.
  now_ += seconds(31);
  EXPECT_EQ(read_dirs_of(v2, &queued), 2);

  // Other top-level names: the write reads the dir, and the stale link goes.
  EXPECT_EQ(read_dirs_of(MakePayload({{"b", "1"}}), &queued), 2);
  EXPECT_FALSE(fs::exists(fs::symlink_status(fs::path(vol_) / "a")));

  // A top-level link removed by someone else: the next write, even one that changes nothing,
  // sees the dir changed and puts it back.
  fs::remove(fs::path(vol_) / "b");
  EXPECT_EQ(read_dirs_of(MakePayload({{"b", "1"}}), &queued), 2);
  EXPECT_TRUE(fs::is_symlink(fs::path(vol_) / "b"));
  EXPECT_EQ(read_dirs_of(MakePayload({{"b", "1"}}), &queued), 0)
      << "the bytes the last write read, and nothing in the live version changed since";

  queue_.RunDue(now_ + seconds(30));
  EXPECT_FALSE(fs::exists(other));
  EXPECT_EQ(DescribeDebris(vol_, MakePayload({{"b", "1"}})), "");
}

// The queue's own removals change the volume dir, but they are all that changed it: the next
// write still takes its shortcut. Another change beside them still makes it read the dir.
TEST_F(QueuedWriterTest, TheQueuesOwnRemovalsDoNotMakeTheNextWriteReadTheDir) {
  FaultInjectionEnv counting(PosixEnv());
  Options o = Queued();
  o.fs = &counting;
  o.replaced_version = ReplacedVersion::kAtOnce;
  auto w = OpenWriter(o);
  auto read_dirs_of = [&](const Payload& p) {
    const int before = counting.read_dir_calls();
    auto r = w->Write(p);
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE(r.ok() && r->published);
    return counting.read_dir_calls() - before;
  };
  const Payload v1 = MakePayload({{"a", "1"}});
  const Payload v2 = MakePayload({{"a", "2"}});
  EXPECT_EQ(read_dirs_of(v1), 1) << "the first write: a full read";
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(read_dirs_of(i % 2 == 0 ? v2 : v1), 0) << "write " << i;
    EXPECT_EQ(queue_.RunDue(now_), 1u) << "write " << i << ": the replaced version, due at once";
  }
  EXPECT_EQ(read_dirs_of(v2), 0);
  ASSERT_TRUE(w->Write(v1).ok());
  EXPECT_EQ(queue_.RunDue(now_), 2u);
  EXPECT_EQ(DescribeDebris(vol_, v1), "");

  // Another writer's entry beside a removal of the queue: read in full, and queued.
  EXPECT_EQ(read_dirs_of(v2), 0) << "after two removals in one batch";
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const fs::path other = fs::path(vol_) / "..2020_01_01_00_00_00.7";
  fs::create_directory(other);
  EXPECT_EQ(read_dirs_of(v1), 2) << "a full read (and a comparison with the live version)";
  queue_.RunDue(now_ + seconds(30));
  EXPECT_FALSE(fs::exists(other));
  EXPECT_EQ(DescribeDebris(vol_, v1), "");
}

TEST_F(QueuedWriterTest, AnInterruptedRemovalIsFoundAndFinishedByALaterWrite) {
  // A crash in the middle of a removal leaves the renamed, partly removed tree.
  auto w = OpenWriter(Queued());
  const Payload p = MakePayload({{"a", "1"}});
  ASSERT_TRUE(w->Write(p).ok());
  const fs::path left = fs::path(vol_) / (std::string(kRemovingPrefix) + "00000000000000aa");
  fs::create_directories(left / "sub");
  std::ofstream(left / "sub" / "f") << "x";
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->queued_removals, 1);
  now_ += seconds(30);
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_FALSE(fs::exists(left));
  EXPECT_EQ(DescribeDebris(vol_, p), "");
}

TEST_F(QueuedWriterTest, WithoutAQueueTheWriterStillRemovesInterruptedRemovals) {
  Options o = SoleWriter();
  auto w = OpenWriter(o);
  const Payload p = MakePayload({{"a", "1"}});
  ASSERT_TRUE(w->Write(p).ok());
  const fs::path left = fs::path(vol_) / (std::string(kRemovingPrefix) + "00000000000000ab");
  fs::create_directories(left / "sub");
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_FALSE(fs::exists(left));
}

TEST_F(QueuedWriterTest, AFailedRemovalIsRetriedAGracePeriodLaterUnderItsNewName) {
  FaultInjectionEnv faulty(PosixEnv());
  RemovalQueue queue(&faulty, [this] { return now_; });
  Options o = Queued();
  o.removals = &queue;
  auto w = OpenWriter(o);
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  const Payload v2 = MakePayload({{"a", "2"}});
  ASSERT_TRUE(w->Write(v2).ok());
  now_ += seconds(30);
  faulty.FailNext("unlinkat", EIO);
  EXPECT_EQ(queue.RunDue(now_), 0u);
  EXPECT_EQ(queue.stats().failed, 1u);
  EXPECT_NE(queue.stats().last_error.find(vol_), std::string::npos) << queue.stats().last_error;
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  ASSERT_EQ(Removing().size(), 1u) << "claimed, then the removal failed";
  EXPECT_EQ(queue.pending(), 1u);
  now_ += seconds(30);
  EXPECT_EQ(queue.RunDue(now_), 1u);
  EXPECT_TRUE(Removing().empty());
  EXPECT_EQ(DescribeDebris(vol_, v2), "");
}

TEST_F(WriterTest, TheQueuesWorkerRemovesDueEntriesByItself) {
  RemovalQueue queue;
  queue.Start();
  Options o = SoleWriter();
  o.removals = &queue;
  auto w = OpenWriter(o);
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  const Payload v2 = MakePayload({{"a", "2"}, {"b/c", "3"}});
  ASSERT_TRUE(w->Write(v2).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (fs::exists(fs::path(vol_) / r1->ts_dir) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  while (queue.pending() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(DescribeDebris(vol_, v2), "");
  queue.Stop();
}

// The worker takes an entry that is due when added (ReplacedVersion::kAtOnce) at once, without
// waiting for a batch window: the queue's clock here moves only when the test moves it, and the
// entry goes while it stands still.
TEST_F(WriterTest, TheWorkerTakesAnEntryDueWhenAddedWithoutABatchWindow) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  std::atomic<int64_t> now_ms{3600 * 1000};
  auto now = [&] { return RemovalQueue::Clock::time_point(milliseconds(now_ms.load())); };
  RemovalQueue queue(nullptr, now);
  queue.Start();
  const fs::path later = fs::path(vol_) / "..2020_01_01_00_00_00.1";
  const fs::path at_once = fs::path(vol_) / "..2020_01_01_00_00_00.2";
  fs::create_directory(later);
  fs::create_directory(at_once);
  struct stat dir_st {};
  struct stat st {};
  ASSERT_EQ(::lstat(vol_.c_str(), &dir_st), 0);
  ASSERT_EQ(::lstat(later.c_str(), &st), 0);
  queue.Add(vol_, dir_st, later.filename(), st, now() + seconds(2), seconds(30));
  now_ms += 1000;
  ASSERT_EQ(::lstat(at_once.c_str(), &st), 0);
  queue.Add(vol_, dir_st, at_once.filename(), st, now(), seconds(30));
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  auto wait_gone = [&](const fs::path& p) {
    while (fs::exists(p) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    return !fs::exists(p);
  };
  EXPECT_TRUE(wait_gone(at_once)) << "an entry due when added waited for the clock";
  EXPECT_EQ(queue.pending(), 1u);

  EXPECT_TRUE(fs::exists(later));
  now_ms += 1010;  // the other one's due time and the batch window after it
  EXPECT_TRUE(wait_gone(later));
  queue.Stop();
}

TEST_F(WriterTest, StoppingTheQueueWithEntriesNotYetDueReturnsAndLeavesThem) {
  RemovalQueue queue;
  queue.Start();
  Options o;
  o.unpublished_grace = std::chrono::hours(1);
  o.removals = &queue;
  auto w = OpenWriter(o);
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
  EXPECT_EQ(queue.pending(), 1u);
  queue.Stop();
  EXPECT_TRUE(fs::exists(fs::path(vol_) / r1->ts_dir));
}

// What the queue notes of its removals for a volume dir's next write (TookDirFromTo) is dropped
// once no write could use it any more (a grace period after the removal), so the notes of volumes
// no write comes back to (their pods deleted) do not pile up.
TEST_F(QueuedWriterTest, NotesOfRemovalsNoWriteAsksAboutExpire) {
  Options o = Queued();
  o.replaced_version = ReplacedVersion::kAtOnce;
  auto w = OpenWriter(o);
  ASSERT_TRUE(w->Write(MakePayload({{"a", "1"}})).ok());
  ASSERT_TRUE(w->Write(MakePayload({{"a", "2"}})).ok());
  EXPECT_EQ(queue_.RunDue(now_), 1u);
  EXPECT_EQ(queue_.noted_dirs(), 1u) << "the removal is noted for the volume's next write";
  now_ += o.unpublished_grace - seconds(1);
  queue_.RunDue(now_);
  EXPECT_EQ(queue_.noted_dirs(), 1u) << "a write may still ask";
  now_ += seconds(1);
  queue_.RunDue(now_);
  EXPECT_EQ(queue_.noted_dirs(), 0u) << "no write can use it any more";
}

// A volume dir written again and again keeps one note, whatever the number of removals, and it
// goes once its last removal's grace period is over, not its first's (the walk starts when the
// earliest expiry it knows of passes, which may be a note renewed since). The old expiry lines
// per removal were not counted here: this holds the behaviour, BENCHMARKS.md the memory.
TEST_F(QueuedWriterTest, ManyRemovalsOfOneVolumeDirKeepOneNote) {
  Options o = Queued();
  o.replaced_version = ReplacedVersion::kAtOnce;
  auto w = OpenWriter(o);
  ASSERT_TRUE(w->Write(MakePayload({{"a", "0"}})).ok());
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(w->Write(MakePayload({{"a", std::to_string(i)}})).ok());
    EXPECT_EQ(queue_.RunDue(now_), 1u) << "write " << i;
    EXPECT_EQ(queue_.noted_dirs(), 1u) << "write " << i;
    now_ += seconds(10);
  }
  // The first removal's grace period is long over; the last one's is not.
  now_ += o.unpublished_grace - seconds(11);
  queue_.RunDue(now_);
  EXPECT_EQ(queue_.noted_dirs(), 1u) << "the last removal may still be asked about";
  now_ += seconds(2);
  queue_.RunDue(now_);
  EXPECT_EQ(queue_.noted_dirs(), 0u);
}

// The worker runs 10 nice steps below the thread that started it (19 at most), so removals yield
// to the writes when the cores are busy. Found among this process's threads by its nice value,
// before and after Start.
TEST(RemovalQueueTest, TheWorkerYieldsToTheWrites) {
  auto nice_of_threads = [] {
    std::multiset<int> nices;
    for (const auto& task : fs::directory_iterator("/proc/self/task")) {
      std::ifstream in(task.path() / "stat");
      std::string stat;
      std::getline(in, stat);                // one line
      const size_t close = stat.rfind(')');  // the name may hold spaces
      if (close == std::string::npos) continue;
      std::istringstream fields(stat.substr(close + 2));
      std::string field;
      // Fields from the 3rd (state) on; nice is the 19th.
      for (int i = 3; i <= 19 && fields >> field; ++i) {
        if (i == 19) nices.insert(std::stoi(field));
      }
    }
    return nices;
  };
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  const int want = std::min(own + 10, 19);
  const size_t before = nice_of_threads().count(want);
  RemovalQueue queue;
  queue.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t after = before;
  while ((after = nice_of_threads().count(want)) == before &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(after, before + 1) << "no thread at nice " << want << " after Start";
  EXPECT_EQ(::getpriority(PRIO_PROCESS, 0), own) << "the calling thread's nice changed";
  queue.Stop();
}

}  // namespace
}  // namespace atomicwriter
