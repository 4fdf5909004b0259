// Reconstruction's judgement of the ownership journal against the root dir's filesystem
// (reconstruct.h): the recorded filesystem, another one (wait), a tmpfs of an earlier boot
// (gone with the reboot), a journal with no identity yet (trusted, identity recorded).
#include "volumemanager/reconciler/reconstruct.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "volumemanager/journal/ownership_journal.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

const std::set<std::string> kPlugins = {"kubernetes.io~configmap"};

class ReconstructTest : public ::testing::Test {
 protected:
  // Where the test's dirs go.
  virtual std::string Parent() const { return "/tmp"; }
  void SetUp() override {
    std::string tmpl = Parent() + "/reconstruct-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << tmpl;
    base_ = tmpl;
    root_ = base_ + "/root";
    boot_file_ = base_ + "/boot_id";
    fs::create_directories(root_);
    SetBoot("boot-1");
    auto j = OwnershipJournal::Open(base_ + "/state", root_);
    ASSERT_TRUE(j.ok()) << j.status().message();
    journal_ = std::move(j->journal);
  }
  void TearDown() override {
    journal_.reset();
    fs::remove_all(base_);
  }
  void SetBoot(const std::string& id) { std::ofstream(boot_file_, std::ios::trunc) << id << "\n"; }
  RootIdentity Found() {
    auto id = RootIdentity::Probe(*atomicwriter::PosixEnv(), root_, boot_file_);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : RootIdentity{};
  }
  // Owns two volumes: "here" on disk, "gone" not.
  void OwnTwoVolumes() {
    const std::string here = OwnershipJournal::VolumePath("u1", "kubernetes.io~configmap", "here");
    const std::string gone = OwnershipJournal::VolumePath("u1", "kubernetes.io~configmap", "gone");
    ASSERT_TRUE(journal_
                    ->Add({{OwnedKind::kDir, OwnershipJournal::PodPath("u1")},
                           {OwnedKind::kVolume, here},
                           {OwnedKind::kVolume, gone}})
                    .ok());
    fs::create_directories(root_ + "/" + here);
  }
  ReconstructResult Reconstruct() {
    return ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, *journal_, kPlugins,
                                   boot_file_);
  }

  std::string base_;
  std::string root_;
  std::string boot_file_;
  std::unique_ptr<OwnershipJournal> journal_;
};

TEST_F(ReconstructTest, TheFirstReconstructionRecordsTheRootsIdentity) {
  OwnTwoVolumes();
  ASSERT_FALSE(journal_->identity().known());
  ReconstructResult r = Reconstruct();
  EXPECT_TRUE(r.waiting_for_filesystem.empty());
  EXPECT_EQ(r.volumes.size(), 1u);
  EXPECT_EQ(r.released, 1);
  EXPECT_EQ(journal_->identity(), Found());
  EXPECT_EQ(journal_->identity().boot_id, "boot-1");
}

TEST_F(ReconstructTest, AnotherFilesystemMeansWaitingNotReleasing) {
  OwnTwoVolumes();
  // Recorded on another filesystem (the kubelet's disk, not mounted on the root dir yet), in
  // this boot or an earlier one.
  for (const char* boot : {"boot-1", "boot-0"}) {
    SCOPED_TRACE(boot);
    RootIdentity recorded = Found();
    recorded.fs_id ^= 1;
    // A disk's, whatever /tmp is here: a tmpfs recorded in an earlier boot went with that boot
    // (the next test), which is not what this one asks.
    recorded.fs_magic = EXT4_SUPER_MAGIC;
    recorded.boot_id = boot;
    ASSERT_TRUE(journal_->SetIdentity(recorded).ok());
    const size_t entries = journal_->Entries().size();
    ReconstructResult r = Reconstruct();
    EXPECT_NE(r.waiting_for_filesystem.find("recorded on"), std::string::npos)
        << r.waiting_for_filesystem;
    EXPECT_TRUE(r.volumes.empty()) << "adopted from the wrong filesystem";
    EXPECT_EQ(r.released, 0);
    EXPECT_EQ(journal_->Entries().size(), entries) << "released what the other filesystem holds";
    EXPECT_EQ(journal_->identity(), recorded) << "the recorded identity was replaced";
  }
  // The filesystem is back: adopted as usual.
  RootIdentity recorded = Found();
  ASSERT_TRUE(journal_->SetIdentity(recorded).ok());
  ReconstructResult r = Reconstruct();
  EXPECT_TRUE(r.waiting_for_filesystem.empty()) << r.waiting_for_filesystem;
  EXPECT_EQ(r.volumes.size(), 1u);
  EXPECT_EQ(r.released, 1);
  EXPECT_EQ(r.released_after_reboot, 0);
}

TEST_F(ReconstructTest, ATmpfsOfAnEarlierBootWentWithTheReboot) {
  OwnTwoVolumes();
  RootIdentity recorded = Found();
  recorded.fs_magic = TMPFS_MAGIC;
  recorded.fs_id = 0x1234;
  ASSERT_TRUE(journal_->SetIdentity(recorded).ok());
  // The same boot: that tmpfs was unmounted (or another mounted over it): wait.
  EXPECT_FALSE(Reconstruct().waiting_for_filesystem.empty());
  // After a reboot: what it held is gone for good, and released as such.
  SetBoot("boot-2");
  ReconstructResult r = Reconstruct();
  EXPECT_TRUE(r.waiting_for_filesystem.empty()) << r.waiting_for_filesystem;
  EXPECT_EQ(r.released, 1);
  EXPECT_EQ(r.released_after_reboot, 1);
  EXPECT_EQ(journal_->identity(), Found());
}

TEST_F(ReconstructTest, AnEmptyJournalTakesTheRootAsItIs) {
  RootIdentity recorded = Found();
  recorded.fs_id ^= 1;
  ASSERT_TRUE(journal_->SetIdentity(recorded).ok());
  ReconstructResult r = Reconstruct();
  EXPECT_TRUE(r.waiting_for_filesystem.empty()) << "nothing to lose, nothing to wait for";
  EXPECT_EQ(journal_->identity(), Found());
}

TEST_F(ReconstructTest, TheIdentitySurvivesAReopen) {
  OwnTwoVolumes();
  Reconstruct();
  const RootIdentity id = journal_->identity();
  ASSERT_TRUE(id.known());
  journal_.reset();
  auto j = OwnershipJournal::Open(base_ + "/state", root_ + "/");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->loaded, OwnershipJournal::Loaded::kTrusted) << j->detail;
  EXPECT_EQ(j->journal->identity(), id);
  EXPECT_EQ(j->journal->Entries().size(), 2u);
}

// The root dir on a tmpfs (/dev/shm: no mount needed), as a volume the daemon mounted a tmpfs on
// is: an adopted volume comes with the memory its live version takes there, each regular file
// rounded up to whole pages; top-level links, other versions and links inside are not counted.
class ReconstructOnTmpfsTest : public ReconstructTest {
 protected:
  std::string Parent() const override { return "/dev/shm"; }
};

TEST_F(ReconstructOnTmpfsTest, AnAdoptedVolumeComesWithTheTmpfsPagesOfItsLiveVersion) {
  struct statfs sfs {};
  if (::statfs(root_.c_str(), &sfs) != 0 || sfs.f_type != TMPFS_MAGIC) {
    GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  }
  OwnTwoVolumes();
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::string vol =
      root_ + "/" + OwnershipJournal::VolumePath("u1", "kubernetes.io~configmap", "here");
  fs::create_directories(vol + "/..v2/d");
  std::ofstream(vol + "/..v2/a") << std::string(page + 10, 'a');  // two pages
  std::ofstream(vol + "/..v2/d/b") << "b";                        // one
  std::ofstream(vol + "/..v2/empty") << "";                       // none
  fs::create_symlink("/etc/passwd", vol + "/..v2/link");          // not followed
  fs::create_directories(vol + "/..v1");
  std::ofstream(vol + "/..v1/a") << std::string(10 * page, 'o');  // a replaced version
  fs::create_symlink("..v2", vol + "/..data");
  fs::create_symlink("..data/a", vol + "/a");
  ReconstructResult r = Reconstruct();
  ASSERT_EQ(r.volumes.size(), 1u);
  EXPECT_EQ(r.volumes[0].tmpfs_bytes, 3 * page);
  EXPECT_EQ(r.volumes[0].tmpfs_version, "..v2");
}

TEST_F(ReconstructTest, AVolumeOnADiskHoldsNoTmpfsPages) {
  struct statfs sfs {};
  ASSERT_EQ(::statfs(root_.c_str(), &sfs), 0);
  if (sfs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "/tmp is a tmpfs here";
  OwnTwoVolumes();
  const std::string vol =
      root_ + "/" + OwnershipJournal::VolumePath("u1", "kubernetes.io~configmap", "here");
  fs::create_directories(vol + "/..v1");
  std::ofstream(vol + "/..v1/a") << "a";
  fs::create_symlink("..v1", vol + "/..data");
  ReconstructResult r = Reconstruct();
  ASSERT_EQ(r.volumes.size(), 1u);
  EXPECT_EQ(r.volumes[0].tmpfs_bytes, 0u);
}

}  // namespace
}  // namespace volumemanager
