// ObservingDisk and ObserveVolume: the comparison of a payload with a volume's live version
// (added, removed, changed paths; modes and owners apart), on real directories, and proof that
// nothing below the root dir changes.
#include "volumemanager/disk/observing_disk.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "atomicwriter/volume_inspector.h"
#include "volumemanager/journal/ownership_journal.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

class ObservingDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/observing_disk_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    loc_ = VolumeLocation{root_, "uid-1", "kubernetes.io~configmap", "cfg"};
  }
  void TearDown() override { fs::remove_all(root_); }

  // A volume as a writer leaves it: ..data -> a version dir holding `files`, one top-level link
  // per name.
  void Plant(const std::map<std::string, std::pair<std::string, mode_t>>& files) {
    const fs::path dir = loc_.dir();
    const fs::path version = dir / "..2025_01_02_03_04_05.1";
    fs::create_directories(version);
    for (const auto& [rel, file] : files) {
      const fs::path p = version / rel;
      fs::create_directories(p.parent_path());
      std::ofstream(p) << file.first;
      ASSERT_EQ(::chmod(p.c_str(), file.second), 0);
      const std::string top = rel.substr(0, rel.find('/'));
      if (!fs::is_symlink(dir / top)) fs::create_symlink("..data/" + top, dir / top);
    }
    fs::create_symlink(version.filename(), dir / "..data");
  }

  static atomicwriter::Payload Payload(
      const std::map<std::string, std::pair<std::string, mode_t>>& files) {
    atomicwriter::Payload p;
    for (const auto& [rel, file] : files)
      p[rel] = atomicwriter::FileProjection{file.first, file.second, {}};
    return p;
  }

  std::string root_;
  VolumeLocation loc_;
};

TEST_F(ObservingDiskTest, SameContentIsCurrent) {
  Plant({{"a", {"1", 0644}}, {"sub/b", {"2", 0644}}});
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_,
                         Payload({{"a", {"1", 0644}}, {"sub/b", {"2", 0644}}}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->differs());
  EXPECT_FALSE(o->would_write());
  EXPECT_EQ(o->live_version, "..2025_01_02_03_04_05.1");
}

TEST_F(ObservingDiskTest, NamesAddedRemovedAndChangedPathsNeverBytes) {
  Plant({{"keep", {"same", 0644}}, {"old", {"x", 0644}}, {"sub/edit", {"before", 0644}}});
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_,
                         Payload({{"keep", {"same", 0644}},
                                  {"sub/edit", {"after!", 0644}},
                                  {"new", {"y", 0644}},
                                  {"./sub/more", {"z", 0644}}}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->reason, "content");
  EXPECT_TRUE(o->would_write());
  EXPECT_EQ(o->added, (Strings{"new", "sub/more"}));
  EXPECT_EQ(o->removed, (Strings{"old"}));
  EXPECT_EQ(o->changed, (Strings{"sub/edit"}));
  EXPECT_TRUE(o->modes.empty());
}

TEST_F(ObservingDiskTest, SameSizeOtherBytesIsChanged) {
  Plant({{"k", {"abc", 0644}}});
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_, Payload({{"k", {"abd", 0644}}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->changed, (Strings{"k"}));
}

TEST_F(ObservingDiskTest, ModesOnlyAreReportedButWouldNotWrite) {
  Plant({{"k", {"v", 0644}}, {"s", {"w", 0600}}});
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_,
                         Payload({{"k", {"v", 0400}}, {"s", {"w", 0600}}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->reason, "modes");
  EXPECT_TRUE(o->differs());
  EXPECT_FALSE(o->would_write()) << "the atomic writer does not publish for modes alone";
  EXPECT_EQ(o->modes, (Strings{"k: mode 0644 -> 0400"}));
}

TEST_F(ObservingDiskTest, OwnerDifferenceIsNamed) {
  Plant({{"k", {"v", 0644}}});
  atomicwriter::Payload p = Payload({{"k", {"v", 0644}}});
  p["k"].fs_user = ::geteuid() + 1;
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_, p);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->reason, "modes");
  ASSERT_EQ(o->modes.size(), 1u);
  EXPECT_NE(o->modes[0].find("owner " + std::to_string(::geteuid())), std::string::npos);
}

TEST_F(ObservingDiskTest, AMissingVolumeWouldBeSetUp) {
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_, Payload({{"a", {"1", 0644}}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->reason, "not_set_up");
  EXPECT_EQ(o->added, (Strings{"a"}));
  EXPECT_FALSE(fs::exists(root_ + "/pods")) << "observing created a dir";
}

TEST_F(ObservingDiskTest, ALinkInTheVersionIsChangedAndNotFollowed) {
  Plant({{"k", {"v", 0644}}});
  const fs::path version = fs::path(loc_.dir()) / "..2025_01_02_03_04_05.1";
  const fs::path outside = fs::path(root_) / "outside";
  std::ofstream(outside) << "v";
  fs::remove(version / "k");
  fs::create_symlink(outside, version / "k");
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_, Payload({{"k", {"v", 0644}}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->changed, (Strings{"k"}));
}

TEST_F(ObservingDiskTest, ALinkOnTheVolumePathFailsTheVolume) {
  fs::create_directories(root_ + "/pods/elsewhere");
  fs::create_symlink(root_ + "/pods/elsewhere", root_ + "/pods/uid-1");
  auto o = ObserveVolume(*atomicwriter::PosixEnv(), loc_, Payload({{"a", {"1", 0644}}}));
  EXPECT_FALSE(o.ok());
}

TEST_F(ObservingDiskTest, SetUpAndTearDownChangeNothingAndRecord) {
  Plant({{"a", {"1", 0644}}});
  const auto before = atomicwriter::SnapshotTree(root_);
  ObservingDisk disk;
  SetUpRequest request;
  request.location = loc_;
  request.payload = Payload({{"a", {"2", 0644}}});
  request.pod = "default/web";
  auto r = disk.SetUp(request);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->published);
  EXPECT_EQ(r->ts_dir, "..2025_01_02_03_04_05.1");
  auto seen = disk.Observations();
  ASSERT_EQ(seen.count(VolumeKey{"uid-1", "cfg"}), 1u);
  EXPECT_EQ(seen.at(VolumeKey{"uid-1", "cfg"}).reason, "content");
  EXPECT_EQ(seen.at(VolumeKey{"uid-1", "cfg"}).pod, "default/web");

  // Torn down only when the journal lists it (read only: nothing written in the state dir).
  const std::string state = root_ + "/state";
  auto journal = OwnershipJournal::ReadOnly(state, root_);
  EXPECT_FALSE(fs::exists(state)) << "a read-only journal created its state dir";
  auto not_owned = disk.TearDown(loc_, journal.journal.get());
  ASSERT_TRUE(not_owned.ok());
  EXPECT_EQ(*not_owned, TearDownOutcome::kNotOwned);
  EXPECT_EQ(disk.Observations().count(VolumeKey{"uid-1", "cfg"}), 0u);
  ASSERT_TRUE(journal.journal->Add({{OwnedKind::kVolume, loc_.rel()}}).ok());
  auto owned = disk.TearDown(loc_, journal.journal.get());
  ASSERT_TRUE(owned.ok());
  EXPECT_EQ(*owned, TearDownOutcome::kRemoved);
  EXPECT_EQ(disk.Observations().at(VolumeKey{"uid-1", "cfg"}).reason, "tear_down");
  EXPECT_EQ(atomicwriter::SnapshotTree(root_), before) << "observing changed the root dir";
  EXPECT_FALSE(fs::exists(state));
}

TEST_F(ObservingDiskTest, ReadOnlyJournalReadsEntriesAndWritesNothing) {
  const std::string state = root_ + "/state";
  {
    auto opened = OwnershipJournal::Open(state, root_);
    ASSERT_TRUE(opened.ok());
    ASSERT_TRUE(opened->journal->Add({{OwnedKind::kVolume, loc_.rel()}}).ok());
  }
  const auto before = atomicwriter::SnapshotTree(state);
  struct stat st_before {};
  ASSERT_EQ(::stat((state + "/ownership.journal").c_str(), &st_before), 0);
  auto journal = OwnershipJournal::ReadOnly(state, root_);
  EXPECT_EQ(journal.loaded, OwnershipJournal::Loaded::kTrusted);
  EXPECT_TRUE(journal.journal->Owns(OwnedKind::kVolume, loc_.rel()));
  ASSERT_TRUE(journal.journal->Remove({{OwnedKind::kVolume, loc_.rel()}}).ok());
  EXPECT_FALSE(journal.journal->Owns(OwnedKind::kVolume, loc_.rel()));
  ASSERT_TRUE(journal.journal->SetIdentity(RootIdentity{1, 2, "boot"}).ok());
  EXPECT_EQ(atomicwriter::SnapshotTree(state), before);
  struct stat st_after {};
  ASSERT_EQ(::stat((state + "/ownership.journal").c_str(), &st_after), 0);
  EXPECT_EQ(st_after.st_mtim.tv_nsec, st_before.st_mtim.tv_nsec);
  EXPECT_EQ(st_after.st_ino, st_before.st_ino);
  // Another root dir's journal owns nothing and stays where it is.
  auto other = OwnershipJournal::ReadOnly(state, root_ + "/other");
  EXPECT_EQ(other.loaded, OwnershipJournal::Loaded::kOtherRoot);
  EXPECT_TRUE(other.journal->Entries().empty());
  EXPECT_EQ(atomicwriter::SnapshotTree(state), before);
}

}  // namespace
}  // namespace volumemanager
