#include "atomicwriter/open_beneath.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/remove_tree.h"
#include "atomicwriter/writer_test_fixture.h"
#include "base/unique_fd.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

// Each case runs with openat2 (where the kernel has it) and with the component walk.
class OpenBeneathTest : public WriterTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    WriterTest::SetUp();
    ForceOpenBeneathWalkForTesting(GetParam());
    base_ = fs::path(root_) / "base";
    fs::create_directories(base_ / "a" / "b" / "c");
    std::ofstream(base_ / "a" / "b" / "c" / "file") << "x";
    fs::create_directories(fs::path(root_) / "victim" / "b" / "c");
    std::ofstream(fs::path(root_) / "victim" / "b" / "c" / "file") << "victim";
    base_fd_ = ::open(base_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(base_fd_, 0);
  }
  void TearDown() override {
    ::close(base_fd_);
    ForceOpenBeneathWalkForTesting(false);
    WriterTest::TearDown();
  }
  // errno of a failed open, 0 on success; every system call through `env_`.
  int Open(const std::string& rel, int flags = O_RDONLY) {
    const int fd = OpenBeneath(env_, base_fd_, rel, flags);
    if (fd < 0) return errno;
    ::close(fd);
    return 0;
  }

  FaultInjectionEnv env_{PosixEnv()};
  fs::path base_;
  int base_fd_ = -1;
};

TEST_P(OpenBeneathTest, PlainPathsOpen) {
  EXPECT_EQ(Open("a"), 0);
  EXPECT_EQ(Open("a/b/c", O_RDONLY | O_DIRECTORY), 0);
  EXPECT_EQ(Open("a/b/c/file"), 0);
  EXPECT_EQ(Open("a/b/missing"), ENOENT);
  EXPECT_EQ(Open("a/b/c/file/x"), ENOTDIR);
}

TEST_P(OpenBeneathTest, ALinkAtAnyLevelIsRefusedNeverFollowed) {
  const fs::path victim = fs::path(root_) / "victim";
  struct Case {
    const char* name;
    fs::path link;  // replaced by a link to `target`, where the rest of the path exists too
    fs::path target;
    std::string rel;
  } cases[] = {
      {"first component", base_ / "a", victim, "a/b/c/file"},
      {"middle component", base_ / "a" / "b", victim / "b", "a/b/c/file"},
      {"last component", base_ / "a" / "b" / "c", victim / "b" / "c", "a/b/c"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::rename(c.link, c.link.string() + ".real");
    fs::create_directory_symlink(c.target, c.link);
    EXPECT_EQ(Open(c.rel, O_RDONLY), ELOOP);
    EXPECT_EQ(Open(c.rel, O_RDONLY | O_DIRECTORY), ELOOP);
    fs::remove(c.link);
    fs::rename(c.link.string() + ".real", c.link);
  }
  // A relative link that stays beneath is refused too: no link at all is followed.
  fs::create_directory_symlink("b", base_ / "a" / "alias");
  EXPECT_EQ(Open("a/alias/c/file"), ELOOP);
}

TEST_P(OpenBeneathTest, PathsThatAreNotPlainAreRefusedBeforeAnySystemCall) {
  for (const std::string& rel :
       std::vector<std::string>{"", "/a", "a/../a", "..", "a/./b", "a//b", "a/",
                                std::string("a/..\0x/b", 8), std::string("a\0", 2)}) {
    SCOPED_TRACE(rel);
    env_.RecordCalls(true);
    EXPECT_EQ(Open(rel), EINVAL);
    EXPECT_TRUE(env_.recorded().empty());
  }
}

// The one walk goes through the Env, openat2 or component by component: each of its calls can
// fail, and a failed call fails the open with that call's errno, leaving no descriptor open.
TEST_P(OpenBeneathTest, EachCallOfTheWalkIsTheEnvsAndItsFailureIsTheAnswer) {
  env_.RecordCalls(true);
  ASSERT_EQ(Open("a/b/c/file"), 0);
  const std::vector<std::string> calls = env_.recorded();
  ASSERT_FALSE(calls.empty());
  // Without openat2 (or forced), one open per component.
  if (calls.front() != "openat2") {
    EXPECT_EQ(calls.size(), 4u + 3u) << "4 opens, 3 closes";
  }
  const auto open_fds = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  };
  const auto before = open_fds();
  for (size_t i = 1; i <= calls.size(); ++i) {
    SCOPED_TRACE("call " + std::to_string(i) + " (" + calls[i - 1] + ")");
    env_.FailCall(static_cast<int>(i), EIO);
    const int err = Open("a/b/c/file");
    ASSERT_EQ(env_.failed_call(), calls[i - 1]) << "the targeted call was reached";
    // A failed close still closes (and the open succeeded); any other failure is the answer.
    if (calls[i - 1] == "close") {
      EXPECT_EQ(err, 0);
    } else {
      EXPECT_EQ(err, EIO);
    }
    EXPECT_EQ(open_fds(), before);
  }
  env_.FailCall(0, 0);
}

TEST_P(OpenBeneathTest, OpenDirBeneathSaysALinkWasNotFollowed) {
  fs::rename(base_ / "a" / "b", base_ / "a" / "b.real");
  fs::create_directory_symlink(fs::path(root_) / "victim" / "b", base_ / "a" / "b");
  auto r = OpenDirBeneath(env_, base_fd_, "a/b/c", "/shown/a/b/c");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "/shown/a/b/c: a symlink stands where a directory of this path should be"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().sys_errno(), ELOOP);
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, OpenBeneathTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Walk" : "Openat2";
                         });

// Mount ids tell a bind mount of the same filesystem from its source, and a removal never enters
// one. Needs root (mount); CI runs as root.
class MountBoundTest : public WriterTest {
 protected:
  bool Bind(const fs::path& src, const fs::path& dst) {
    if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      why_ = std::string("mount --bind: ") + std::strerror(errno) + " (needs root)";
      return false;
    }
    bound_.push_back(dst);
    return true;
  }
  void TearDown() override {
    for (auto it = bound_.rbegin(); it != bound_.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    WriterTest::TearDown();
  }
  std::vector<fs::path> bound_;
  std::string why_;
};

TEST_F(MountBoundTest, ABindMountOfTheSameFilesystemHasAnotherMountId) {
  const fs::path src = fs::path(root_) / "src\\dir";
  const fs::path dst = fs::path(root_) / "dst dir";  // mountinfo shows "dst\040dir"
  fs::create_directories(src);
  fs::create_directories(dst);
  if (!Bind(src, dst)) GTEST_SKIP() << why_;
  const int a = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY);
  const int b = ::open(dst.c_str(), O_RDONLY | O_DIRECTORY);
  uint64_t id_a = 0;
  uint64_t id_b = 0;
  ASSERT_EQ(PosixEnv()->MountId(a, &id_a), 0);
  ASSERT_EQ(PosixEnv()->MountId(b, &id_b), 0);
  EXPECT_NE(id_a, id_b);
  struct stat sa {};
  struct stat sb {};
  ASSERT_EQ(::fstat(a, &sa), 0);
  ASSERT_EQ(::fstat(b, &sb), 0);
  EXPECT_EQ(sa.st_dev, sb.st_dev) << "the case st_dev cannot tell";
  MountInfo info;
  ASSERT_TRUE(PosixEnv()->FindMount(id_b, &info));
  EXPECT_FALSE(info.fs_type.empty());
  // Unescaped: the bind's mount point and root as paths, and its device as st_dev.
  EXPECT_EQ(info.mount_point, fs::canonical(dst).string());
  EXPECT_TRUE(info.root.ends_with("/src\\dir")) << info.root;
  EXPECT_EQ(info.device, std::to_string(major(sb.st_dev)) + ":" + std::to_string(minor(sb.st_dev)));
  ::close(a);
  ::close(b);
}

// Issue 42: FindMount read the whole of /proc/self/mountinfo at every call. It reads it once while
// no mount changes, and again once one did: a new mount is found, a removed one is not.
TEST_F(MountBoundTest, FindMountReadsTheTableAgainOnlyOnceAMountChanged) {
  const fs::path src = fs::path(root_) / "src";
  const fs::path dst = fs::path(root_) / "dst";
  const fs::path later = fs::path(root_) / "later";
  for (const auto& d : {src, dst, later}) fs::create_directories(d);
  if (!Bind(src, dst)) GTEST_SKIP() << why_;
  const base::UniqueFd b(::open(dst.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  uint64_t id_b = 0;
  ASSERT_EQ(PosixEnv()->MountId(b.get(), &id_b), 0);
  MountInfo info;
  ASSERT_TRUE(
      PosixEnv()->FindMount(id_b, &info));  // reads the table if it changed since the last read
  const uint64_t before = MountTableReadsForTesting();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(PosixEnv()->FindMount(id_b, &info));
    EXPECT_EQ(info.mount_point, fs::canonical(dst).string());
  }
  // No mount of the test's changed: no read (at most one more for a test elsewhere that mounts
  // meanwhile, in this mount namespace).
  EXPECT_LE(MountTableReadsForTesting() - before, 1u) << "one read per lookup";

  ASSERT_TRUE(Bind(src, later));
  const base::UniqueFd c(::open(later.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  uint64_t id_c = 0;
  ASSERT_EQ(PosixEnv()->MountId(c.get(), &id_c), 0);
  ASSERT_TRUE(PosixEnv()->FindMount(id_c, &info)) << "a mount made since the last read";
  EXPECT_EQ(info.mount_point, fs::canonical(later).string());
  ASSERT_TRUE(PosixEnv()->FindMount(id_b, &info));

  ASSERT_EQ(::umount2(later.c_str(), MNT_DETACH), 0);
  bound_.pop_back();
  EXPECT_FALSE(PosixEnv()->FindMount(id_c, &info) &&
               info.mount_point == fs::canonical(later).string())
      << "a mount removed since the last read";
}

TEST_F(MountBoundTest, RemovalNeverEntersABindMountNorABindLoop) {
  const fs::path outside = fs::path(root_) / "outside";
  fs::create_directories(outside / "sub");
  std::ofstream(outside / "keep") << "keep";
  std::ofstream(outside / "sub" / "keep") << "keep";
  const auto before = SnapshotTree(outside.string());
  auto w = OpenWriter();
  ASSERT_TRUE(w->Write(MakePayload({{"a", "1"}})).ok());
  fs::create_directories(fs::path(vol_) / "mnt");
  if (!Bind(outside, fs::path(vol_) / "mnt")) GTEST_SKIP() << why_;
  // A loop too: the volume's own parent bound inside it.
  fs::create_directories(fs::path(vol_) / "loop");
  ASSERT_TRUE(Bind(fs::path(vol_).parent_path(), fs::path(vol_) / "loop"));

  base::Status s = RemoveTree(vol_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a mount point"), std::string::npos) << s.message();
  EXPECT_EQ(SnapshotTree(outside.string()), before);
  EXPECT_TRUE(fs::exists(fs::path(vol_) / "mnt" / "keep"));
  EXPECT_TRUE(fs::exists(fs::path(vol_) / "loop" / "outside" / "keep"))
      << "the loop is left in place";
}

}  // namespace
}  // namespace atomicwriter
