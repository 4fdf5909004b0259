#include "atomicwriter/tree_stamp.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

class TreeStampTest : public WriterTest {
 protected:
  std::optional<uint64_t> Stamp(const std::string& name) {
    const int dir = ::open(vol_.c_str(), O_RDONLY | O_DIRECTORY);
    EXPECT_GE(dir, 0);
    struct stat st {};
    EXPECT_EQ(::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0);
    auto out = TreeStamp(*PosixEnv(), dir, name, st);
    ::close(dir);
    return out;
  }
  // Past the filesystem's timestamp granularity, so that a ctime can move.
  static void Tick() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }
};

TEST_F(TreeStampTest, AnyChangeDeepInTheTreeMovesTheStampAndNothingElseDoes) {
  const fs::path v = fs::path(vol_) / "..2020_01_01_00_00_00.1";
  fs::create_directories(v / "a" / "b");
  std::ofstream(v / "a" / "b" / "c") << "1";
  const auto first = Stamp(v.filename());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(Stamp(v.filename()), first) << "read twice, unchanged";
  Tick();
  std::ofstream(v / "a" / "b" / "c", std::ios::app) << "2";  // a write deep inside
  const auto written = Stamp(v.filename());
  EXPECT_NE(written, first);
  Tick();
  fs::permissions(v / "a" / "b" / "c", fs::perms::owner_read);  // a chmod
  const auto chmodded = Stamp(v.filename());
  EXPECT_NE(chmodded, written);
  fs::remove(v / "a" / "b" / "c");  // a removal
  EXPECT_NE(Stamp(v.filename()), chmodded);
}

TEST_F(TreeStampTest, ALinkIsNotFollowed) {
  const fs::path v = fs::path(vol_) / "..2020_01_01_00_00_00.1";
  const fs::path outside = fs::path(vol_).parent_path() / "tree-stamp-outside";
  fs::create_directories(outside);
  fs::create_directories(v);
  fs::create_directory_symlink(outside, v / "link");
  const auto before = Stamp(v.filename());
  ASSERT_TRUE(before.has_value());
  Tick();
  std::ofstream(outside / "x") << "1";
  EXPECT_EQ(Stamp(v.filename()), before) << "what the link points to is not its tree";
  fs::remove_all(outside);
}

TEST_F(TreeStampTest, ATreeTooBigToJudgeHasNoStampAndTheQueueKeepsIt) {
  const fs::path v = fs::path(vol_) / "..2020_01_01_00_00_00.1";
  fs::create_directories(v / "d");
  for (int i = 0; i <= kTreeStampMaxEntries; ++i) {
    std::ofstream(v / "d" / std::to_string(i)) << "";
  }
  EXPECT_FALSE(Stamp(v.filename()).has_value());

  auto now = RemovalQueue::Clock::time_point(std::chrono::hours(1));
  RemovalQueue queue(nullptr, [&] { return now; });
  struct stat dir_st {};
  struct stat st {};
  ASSERT_EQ(::lstat(vol_.c_str(), &dir_st), 0);
  ASSERT_EQ(::lstat(v.c_str(), &st), 0);
  queue.Add(vol_, dir_st, v.filename(), st, now + std::chrono::seconds(30),
            std::chrono::seconds(30));
  queue.RunDue(now);
  for (int i = 0; i < 3; ++i) {
    now += std::chrono::seconds(30);
    queue.RunDue(now);
    EXPECT_TRUE(fs::exists(v)) << "removed a tree it could not judge";
  }
  EXPECT_EQ(queue.pending(), 1u) << "kept in the queue, judged again each grace period";
}

}  // namespace
}  // namespace atomicwriter
