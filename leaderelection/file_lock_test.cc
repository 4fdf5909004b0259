// Leader election over the file lock: two electors (or an elector and another process) on one
// lock file. Every transition goes on one timeline that fails the test if two ever lead at once.
#include "leaderelection/file_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "leaderelection/leader_elector.h"
#include "tests/support/election_timeline.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace leaderelection {
namespace {

using std::chrono::milliseconds;
using vmtest::ElectionTimeline;
using vmtest::TempDir;
using vmtest::TestLoop;

class FileElectionTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& e : electors_) e.reset();
    EXPECT_LE(timeline_.max_leaders(), 1u) << timeline_.Dump();
    EXPECT_TRUE(loop_.Close());
  }

  std::string LockPath() const { return dir_.File(kFileLockName); }

  // Short durations: attempts 50-110 ms apart.
  LeaderElector* AddElector(const std::string& identity) {
    LeaderElectorOptions options;
    options.identity = identity;
    options.timing = {milliseconds(3000), milliseconds(1000), milliseconds(50)};
    auto elector = LeaderElector::Create(loop_.get(), std::make_unique<FileLock>(LockPath()),
                                         options, timeline_.CallbacksFor(identity));
    EXPECT_TRUE(elector.ok()) << elector.status().message();
    electors_.push_back(std::move(*elector));
    return electors_.back().get();
  }

  TestLoop loop_;
  TempDir dir_;
  ElectionTimeline timeline_;
  std::vector<std::unique_ptr<LeaderElector>> electors_;
};

TEST_F(FileElectionTest, ExactlyOneOfTwoLeadsAndAGracefulStopHandsOverAtTheNextAttempt) {
  LeaderElector* a = AddElector("a");
  LeaderElector* b = AddElector("b");
  a->Start();
  b->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader() || b->IsLeader(); }));
  LeaderElector* holder = a->IsLeader() ? a : b;
  LeaderElector* waiter = holder == a ? b : a;
  // Both keep trying for a while: the holder renews, the other keeps being refused.
  const uint64_t before = waiter->attempts();
  ASSERT_TRUE(loop_.RunUntil([&] { return waiter->attempts() >= before + 5; }));
  EXPECT_TRUE(holder->IsLeader());
  EXPECT_FALSE(waiter->IsLeader());
  EXPECT_EQ(waiter->leader(), holder->identity()) << "the holder's identity is in the file";
  EXPECT_NE(vmtest::ReadFile(LockPath()).find("\"holderIdentity\":\"" + holder->identity() + "\""),
            std::string::npos)
      << vmtest::ReadFile(LockPath());

  uint64_t attempts_at_release = 0;
  bool stopped = false;
  holder->Stop([&] {
    stopped = true;
    attempts_at_release = waiter->attempts();
  });
  ASSERT_TRUE(loop_.RunUntil([&] { return stopped; }));
  EXPECT_EQ(vmtest::ReadFile(LockPath()), "") << "a released file names nobody";
  uint64_t acquired_at_attempt = 0;
  ASSERT_TRUE(loop_.RunUntil([&] {
    if (waiter->IsLeader() && acquired_at_attempt == 0) acquired_at_attempt = waiter->attempts();
    return waiter->IsLeader();
  }));
  EXPECT_EQ(acquired_at_attempt, attempts_at_release + 1)
      << "the first attempt after the release takes over";
  auto stop = timeline_.Find(holder->identity(), "stopped");
  auto start = timeline_.Find(waiter->identity(), "started");
  ASSERT_TRUE(stop && start);
  EXPECT_LT(*stop, *start) << timeline_.Dump();
  waiter->Stop();
}

// Another process that takes the lock and writes `record_text` into the file, then waits to be
// killed. Returns its pid once it holds the lock.
pid_t ForkHolder(const std::string& path, const std::string& record_text) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    close(ready[0]);
    const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
    if (write(fd, record_text.data(), record_text.size()) < 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    for (;;) pause();
  }
  close(ready[1]);
  char byte = 0;
  const bool ok = read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  return ok ? child : -1;
}

void KillHolder(pid_t child) {
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

// Kills the holder process when a failed assertion leaves the test early.
struct HolderGuard {
  pid_t pid;
  ~HolderGuard() {
    if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
  }
};

// The holder's record claims an hour-long lease; killed with SIGKILL, the kernel drops its flock
// and the elector's next attempt acquires: the kernel's lock is what counts, not the file's text.
TEST_F(FileElectionTest, AHolderKilledWithSigkillIsReplacedAtTheNextAttempt) {
  const pid_t child = ForkHolder(
      LockPath(), "{\"holderIdentity\":\"other-process\",\"leaseDurationSeconds\":3600}\n");
  ASSERT_GT(child, 0);
  HolderGuard guard{child};
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->leader() == "other-process"; }));
  const uint64_t seen_at = a->attempts();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->attempts() >= seen_at + 3; }));
  EXPECT_FALSE(a->IsLeader());

  KillHolder(child);
  guard.pid = -1;
  const uint64_t attempts_at_kill = a->attempts();
  uint64_t acquired_at_attempt = 0;
  ASSERT_TRUE(loop_.RunUntil([&] {
    if (a->IsLeader() && acquired_at_attempt == 0) acquired_at_attempt = a->attempts();
    return a->IsLeader();
  }));
  EXPECT_EQ(acquired_at_attempt, attempts_at_kill + 1);
  EXPECT_EQ(a->leader(), "a");
  a->Stop();
}

// A holder whose record has long expired (or says nothing) still holds the flock: the elector
// tries to take it at every attempt and is refused every time.
TEST_F(FileElectionTest, AnExpiredRecordDoesNotBeatTheKernelsLock) {
  const pid_t child = ForkHolder(LockPath(), "garbage, no record");
  ASSERT_GT(child, 0);
  HolderGuard guard{child};
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->leader() == kUnknownFileLockHolder; }));
  const uint64_t seen_at = a->attempts();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->attempts() >= seen_at + 5; }));
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(timeline_.Count("a", "started"), 0u);
  KillHolder(child);
  guard.pid = -1;
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  a->Stop();
}

// Someone replaces the lock file while it is held: a contender that locks the new file makes the
// holder stop at its next renewal.
TEST_F(FileElectionTest, AReplacedLockFileEndsTheOldHoldersTerm) {
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  // Another process locks a new file under the same name (as after rm + a restart).
  vmtest::WriteFile(LockPath() + ".new", "");
  std::filesystem::rename(LockPath() + ".new", LockPath());
  FileLock other(LockPath());
  LeaderElectionRecord record;
  record.holder_identity = "intruder";
  record.lease_duration_seconds = 3;
  base::Status s;
  other.Update(record, [&](base::Status st) { s = st; });
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(loop_.RunUntil([&] { return !a->IsLeader(); }));
  EXPECT_EQ(timeline_.Count("a", "stopped"), 1u);
  EXPECT_EQ(a->leader(), "intruder");
}

// The lock file unlinked while held (rm, as a cleanup of the state dir might): a newcomer would
// create and lock a new file. The holder's watch reports it, the renewal that follows finds the
// path gone and, nobody else having taken it yet, creates and locks the new file: a contender
// then finds it held.
TEST_F(FileElectionTest, AnUnlinkedLockFileIsNoticedAndTheNewFileLocked) {
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  ASSERT_TRUE(std::filesystem::remove(LockPath()));
  // Only the holder creates the file, in the same call that locks it.
  ASSERT_TRUE(loop_.RunUntil([&] { return std::filesystem::exists(LockPath()); }));
  FileLock other(LockPath());
  LeaderElectionRecord record;
  record.holder_identity = "intruder";
  base::Status s;
  other.Update(record, [&](base::Status st) { s = st; });
  EXPECT_FALSE(s.ok()) << "the intruder locked a file the holder did not";
  EXPECT_TRUE(a->IsLeader());
}

// A contender's attempts keep its loop visibly alive; a holder of the kernel's lock needs no
// renewal and is alive however long it stays quiet; neither once stopped.
TEST_F(FileElectionTest, AliveWhileRunningAndNotOnceStopped) {
  LeaderElector* a = AddElector("a");
  LeaderElector* b = AddElector("b");
  EXPECT_FALSE(a->Alive(std::chrono::steady_clock::now()));
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  b->Start();
  const auto first = b->last_activity();
  ASSERT_TRUE(loop_.RunUntil([&] { return b->last_activity() > first; }))
      << "a contender's attempts keep its loop visibly alive";
  EXPECT_TRUE(b->Alive(std::chrono::steady_clock::now()));
  EXPECT_FALSE(b->Alive(b->last_activity() + b->quiet_limit() + milliseconds(1)));
  EXPECT_TRUE(a->Alive(a->last_activity() + a->quiet_limit() + std::chrono::hours(1)))
      << "the holder has nothing to renew";
  bool stopped = false;
  a->Stop([&] { stopped = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return stopped; }));
  EXPECT_FALSE(a->Alive(std::chrono::steady_clock::now()));
  ASSERT_TRUE(loop_.RunUntil([&] { return b->IsLeader(); }));
  b->Stop();
}

// A symlink planted at the lock's path is refused, never followed; the elector says so once (not
// at every retry), shows it in last_error() while it lasts, and takes the lock once it is gone.
TEST_F(FileElectionTest, APlantedSymlinkIsAnErrorLoggedOnceAndShownUntilRemoved) {
  vmtest::LogCapture logs;
  const std::string target = dir_.File("target");
  vmtest::WriteFile(target, "precious\n");
  std::filesystem::create_symlink(target, LockPath());
  LeaderElector* a = AddElector("a");
  a->Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return a->attempts() >= 5; }));
  EXPECT_FALSE(a->IsLeader());
  EXPECT_NE(a->last_error().find("is a symlink"), std::string::npos) << a->last_error();
  EXPECT_NE(a->last_error().find(LockPath()), std::string::npos) << a->last_error();
  const std::string text = logs.text();
  size_t count = 0;
  for (size_t at = text.find("is a symlink"); at != std::string::npos;
       at = text.find("is a symlink", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << text;
  EXPECT_EQ(vmtest::ReadFile(target), "precious\n") << "the link's target is never written";

  std::filesystem::remove(LockPath());
  ASSERT_TRUE(loop_.RunUntil([&] { return a->IsLeader(); }));
  EXPECT_EQ(a->last_error(), "");
  EXPECT_NE(logs.text().find("usable again"), std::string::npos);
}

TEST(FileLockTest, ANonRegularFileIsRefused) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.File("fifo").c_str(), 0600), 0);
  std::filesystem::create_directory(dir.File("dir"));
  for (const char* name : {"fifo", "dir"}) {
    FileLock lock(dir.File(name));
    GetResult got;
    lock.Get([&](GetResult r) { got = std::move(r); });
    EXPECT_FALSE(got.status.ok()) << name;
    EXPECT_NE(got.status.message().find(dir.File(name)), std::string::npos) << got.status.message();
  }
}

TEST(FileLockTest, GetLeavesAFreeLockFreeAndUpdateTakesIt) {
  TempDir dir;
  FileLock a(dir.File("l"));
  FileLock b(dir.File("l"));
  GetResult got;
  a.Get([&](GetResult r) { got = std::move(r); });
  ASSERT_TRUE(got.status.ok());
  EXPECT_FALSE(got.not_found);
  EXPECT_EQ(got.record.holder_identity, "");
  EXPECT_FALSE(a.held());

  LeaderElectionRecord ra;
  ra.holder_identity = "a";
  base::Status s = base::Status::Error("not called");
  a.Update(ra, [&](base::Status st) { s = st; });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(a.held());

  LeaderElectionRecord rb;
  rb.holder_identity = "b";
  b.Update(rb, [&](base::Status st) { s = st; });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holder a"), std::string::npos) << s.message();
  b.Get([&](GetResult r) { got = std::move(r); });
  EXPECT_EQ(got.record.holder_identity, "a");

  a.Update(LeaderElectionRecord{}, [&](base::Status st) { s = st; });  // release
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(a.held());
  b.Update(rb, [&](base::Status st) { s = st; });
  EXPECT_TRUE(s.ok()) << s.message();
}

// Takes `lock` for holder "a" (or renews it); the status of the Update.
base::Status Renew(FileLock& lock) {
  LeaderElectionRecord record;
  record.holder_identity = "a";
  base::Status s = base::Status::Error("not called");
  lock.Update(record, [&](base::Status st) { s = st; });
  return s;
}

// A renewal compares the path with the locked file (stat, fstat) only after an inotify event on
// the file or a dir above it, read on the loop: none while nothing happens, one after an event
// that changed nothing (a chmod), and a replacement is a lost lock.
TEST(FileLockTest, RenewalsCompareThePathOnlyAfterAnEventOnTheLoop) {
  TestLoop loop;
  {
    TempDir dir;
    FileLock lock(dir.File("l"));
    lock.SetLoop(loop.get());
    ASSERT_TRUE(Renew(lock).ok());
    const uint64_t at_acquisition = lock.identity_checks();
    for (int i = 0; i < 20; ++i) {
      loop.RunFor(milliseconds(1));
      ASSERT_TRUE(Renew(lock).ok());
      GetResult got;
      lock.Get([&](GetResult r) { got = std::move(r); });
      EXPECT_EQ(got.record.holder_identity, "a");
    }
    EXPECT_EQ(lock.identity_checks(), at_acquisition) << "no stat per renewal";

    ASSERT_EQ(chmod(dir.File("l").c_str(), 0600), 0);  // IN_ATTRIB, still the same file
    loop.RunFor(milliseconds(20));
    ASSERT_TRUE(Renew(lock).ok());
    EXPECT_EQ(lock.identity_checks(), at_acquisition + 1);
    ASSERT_TRUE(Renew(lock).ok());
    EXPECT_EQ(lock.identity_checks(), at_acquisition + 1);

    vmtest::WriteFile(dir.File("l.new"), "");
    std::filesystem::rename(dir.File("l.new"), dir.File("l"));
    loop.RunFor(milliseconds(20));
    const base::Status s = Renew(lock);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("removed or replaced"), std::string::npos) << s.message();
    EXPECT_FALSE(lock.held());
  }
  EXPECT_TRUE(loop.Close()) << "the inotify poll handle is closed with the lock";
}

// Without a loop the inotify queue is read at each call: a lock file moved away is noticed all
// the same, and so is the dir holding it, or one above that, renamed.
TEST(FileLockTest, WithoutALoopAMovedFileOrDirIsALostLock) {
  TempDir dir;
  const std::string parent = dir.File("up");
  const std::string state = parent + "/state";
  std::filesystem::create_directories(state);
  const std::string moves[][2] = {{state + "/l", state + "/l.moved"},
                                  {state, dir.File("state.moved")},
                                  {parent, dir.File("up.moved")}};
  for (const auto& move : moves) {
    std::filesystem::create_directories(state);
    FileLock lock(state + "/l");
    ASSERT_TRUE(Renew(lock).ok()) << move[0];
    ASSERT_TRUE(Renew(lock).ok()) << move[0];
    const uint64_t before = lock.identity_checks();
    ASSERT_TRUE(Renew(lock).ok()) << move[0];
    EXPECT_EQ(lock.identity_checks(), before) << move[0];
    std::filesystem::rename(move[0], move[1]);
    const base::Status s = Renew(lock);
    EXPECT_FALSE(s.ok()) << move[0];
    EXPECT_FALSE(lock.held()) << move[0];
    std::filesystem::rename(move[1], move[0]);
  }
}

TEST(FileLockTest, AMissingDirectoryIsAnErrorNamingThePath) {
  FileLock lock("/nonexistent-dir-for-test/leader.lock");
  GetResult got;
  lock.Get([&](GetResult r) { got = std::move(r); });
  EXPECT_FALSE(got.status.ok());
  EXPECT_NE(got.status.message().find("/nonexistent-dir-for-test/leader.lock"), std::string::npos);
}

}  // namespace
}  // namespace leaderelection
