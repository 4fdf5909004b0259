#include "atomicwriter/remove_tree.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "atomicwriter/fault_injection_filesystem.h"
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
  FaultInjectionFilesystem faulty(PosixFilesystem());
  faulty.FailCall(3, EIO);
  base::Status s = RemoveTree(vol_, &faulty);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.sys_errno(), EIO);
  faulty.FailCall(0, 0);
  EXPECT_TRUE(RemoveTree(vol_, &faulty).ok());
  EXPECT_FALSE(fs::exists(vol_));
}

}  // namespace
}  // namespace atomicwriter
