#include "atomicwriter/remove_tree.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/volume_inspector.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

class RemoveTreeTest : public WriterTest {};

TEST_F(RemoveTreeTest, RemovesAVolumeButNothingItsLinksPointTo) {
  const fs::path outside = fs::path(root_) / "outside";
  fs::create_directories(outside / "sub");
  std::ofstream(outside / "keep") << "keep";
  std::ofstream(outside / "sub" / "keep") << "keep";
  const auto before = SnapshotTree(outside.string());

  auto w = OpenWriter();
  ASSERT_TRUE(w->Write(MakePayload({{"a", "1"}, {"d/b", "2"}})).ok());
  fs::create_directory_symlink(outside, fs::path(vol_) / "evil-dir");
  fs::create_symlink(outside / "keep", fs::path(vol_) / "evil-file");
  fs::create_directory_symlink(outside / "sub", fs::path(vol_) / LiveTsDir() / "d" / "x");

  ASSERT_TRUE(RemoveTree(vol_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(vol_)));
  EXPECT_EQ(SnapshotTree(outside.string()), before);
}

TEST_F(RemoveTreeTest, MissingPathIsNotAnError) {
  EXPECT_TRUE(RemoveTree(root_ + "/nope").ok());
  EXPECT_TRUE(RemoveTree(root_ + "/nope/deeper").ok());
}

TEST_F(RemoveTreeTest, RemovesASymlinkItselfNotItsTarget) {
  fs::create_directory_symlink(vol_, root_ + "/link");
  std::ofstream(fs::path(vol_) / "f") << "x";
  ASSERT_TRUE(RemoveTree(root_ + "/link").ok());
  EXPECT_TRUE(fs::exists(fs::path(vol_) / "f"));
}

TEST_F(RemoveTreeTest, FailuresAreReportedWithErrno) {
  fs::create_directories(fs::path(vol_) / "a" / "b");
  FaultInjectionEnv faulty(PosixEnv());
  faulty.FailCall(3, EIO);
  base::Status s = RemoveTree(vol_, &faulty);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.sys_errno(), EIO);
  faulty.FailCall(0, 0);
  EXPECT_TRUE(RemoveTree(vol_, &faulty).ok());
  EXPECT_FALSE(fs::exists(vol_));
}

// Records, for every directory the removal opens, whether its descriptor was still open when
// the directory itself was removed.
class OrderRecordingFilesystem : public FaultInjectionEnv {
 public:
  OrderRecordingFilesystem() : FaultInjectionEnv(PosixEnv()) {}
  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
    const int fd = FaultInjectionEnv::OpenAt(dirfd, path, flags, mode);
    if (fd >= 0 && (flags & O_DIRECTORY) != 0) open_[path] = fd;
    return fd;
  }
  int Close(int fd) override {
    for (auto it = open_.begin(); it != open_.end(); ++it) {
      if (it->second == fd) {
        open_.erase(it);
        break;
      }
    }
    return FaultInjectionEnv::Close(fd);
  }
  int UnlinkAt(int dirfd, const std::string& path, int flags) override {
    if ((flags & AT_REMOVEDIR) != 0) removed_while_open_[path] = open_.count(path) != 0;
    return FaultInjectionEnv::UnlinkAt(dirfd, path, flags);
  }

  std::map<std::string, int> open_;                 // dir name -> its open descriptor
  std::map<std::string, bool> removed_while_open_;  // dir name -> open when removed
};

// Freeing a directory's blocks (a discard waited for, on a `discard` mount) must not happen inside
// rmdir, which holds the parent's lock meanwhile: each directory is removed while still open, and
// the close frees it.
TEST_F(RemoveTreeTest, EachDirectoryIsRemovedWhileStillOpen) {
  fs::create_directories(fs::path(vol_) / "a" / "b");
  std::ofstream(fs::path(vol_) / "a" / "b" / "f") << "x";
  OrderRecordingFilesystem recording;
  ASSERT_TRUE(RemoveTree(vol_, &recording).ok());
  EXPECT_FALSE(fs::exists(vol_));
  EXPECT_EQ(recording.removed_while_open_,
            (std::map<std::string, bool>{{"vol", true}, {"a", true}, {"b", true}}));
  EXPECT_TRUE(recording.open_.empty()) << "a descriptor was left open";
}

}  // namespace
}  // namespace atomicwriter
