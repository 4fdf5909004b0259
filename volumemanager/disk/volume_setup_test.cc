#include "volumemanager/disk/volume_setup.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/volume_inspector.h"
#include "tests/support/skip.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/reconciler/reconstruct.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

class VolumeSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volume-setup-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = std::string(tmpl) + "/root";
    state_ = std::string(tmpl) + "/state";
    fs::create_directories(root_);
    auto j = OwnershipJournal::Open(state_);
    ASSERT_TRUE(j.ok()) << j.status().message();
    journal_ = std::move(j->journal);
  }
  void TearDown() override {
    journal_.reset();
    fs::remove_all(fs::path(root_).parent_path());
  }

  SetUpRequest Req(const VolumeLocation& loc, atomicwriter::Payload payload,
                   atomicwriter::PermissionCallback cb = nullptr) {
    SetUpRequest r{loc, std::move(payload), std::move(cb), false};
    r.journal = journal_.get();
    r.unpublished_grace = std::chrono::milliseconds(0);
    return r;
  }

  VolumeLocation Loc(const std::string& uid = "uid-1", const std::string& vol = "cfg") {
    return VolumeLocation{root_, uid, "kubernetes.io~configmap", vol};
  }
  static atomicwriter::Payload Payload(const std::string& data) {
    atomicwriter::Payload p;
    p["key"] = atomicwriter::FileProjection{data, 0644, std::nullopt};
    return p;
  }

  std::string root_;
  std::string state_;
  std::unique_ptr<OwnershipJournal> journal_;
};

TEST_F(VolumeSetupTest, FirstMountCreatesTheKubeletLayout) {
  const mode_t old = ::umask(022);
  auto r = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"), nullptr));
  ::umask(old);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->published);
  const std::string dir = root_ + "/pods/uid-1/volumes/kubernetes.io~configmap/cfg";
  EXPECT_EQ(Loc().dir(), dir);
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);  // as the kubelet's wrapper, whatever the umask
  EXPECT_EQ(atomicwriter::VisibleContent(dir), (std::map<std::string, std::string>{{"key", "v1"}}));
}

// A write into a volume the daemon owns takes the volume dir's lstat once: the identity check's
// is the one the writer starts from (atomicwriter::AtomicWriter::StatDir).
TEST_F(VolumeSetupTest, AWriteIntoAnOwnedVolumeTakesTheVolumeDirsLstatOnce) {
  atomicwriter::RemovalQueue queue;  // not started: nothing is removed
  atomicwriter::UnpublishedLedger ledger;
  auto req = [&](const std::string& data) {
    SetUpRequest r = Req(Loc(), Payload(data));
    r.removals = &queue;
    r.ledger = &ledger;
    r.unpublished_grace = std::chrono::seconds(30);
    return r;
  };
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req("v1")).ok());
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req("v2")).ok());
  atomicwriter::FaultInjectionEnv env(atomicwriter::PosixEnv());
  env.RecordCalls(true);
  auto r = SetUpVolume(env, req("v3"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->published);
  const std::vector<std::string> calls = env.recorded();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "fstat"), 1) << "the root dir's";
  // The volume dir's before (the check's, which the write starts from), the replaced version's
  // for the queue, the volume dir's after the write.
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "fstatat"), 3);
  EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()),
            (std::map<std::string, std::string>{{"key", "v3"}}));
}

TEST_F(VolumeSetupTest, TheRootDirsDescriptorIsKeptAcrossWritesUntilTheRootChanges) {
  RootDirCache roots;
  atomicwriter::RemovalQueue queue;  // not started: nothing is removed
  atomicwriter::UnpublishedLedger ledger;
  auto req = [&](const VolumeLocation& loc, const std::string& data) {
    SetUpRequest r = Req(loc, Payload(data));
    r.removals = &queue;
    r.ledger = &ledger;
    r.unpublished_grace = std::chrono::seconds(30);
    return r;
  };
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc(), "v1"), &roots).ok());
  // The first set-up made pods/ in the root: its ctime moved, the next one opens it again.
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc(), "v2"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 2u);
  atomicwriter::FaultInjectionEnv env(atomicwriter::PosixEnv());
  env.RecordCalls(true);
  auto r = SetUpVolume(env, req(Loc(), "v3"), &roots);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->published);
  std::vector<std::string> calls = env.recorded();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "statmount"), 1) << "the root's path";
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "fstat"), 0) << "the root's, kept";
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "close"),
            std::count(calls.begin(), calls.end(), "openat") +
                std::count(calls.begin(), calls.end(), "openat2") +
                std::count(calls.begin(), calls.end(), "dup"))
      << "the root dir is neither opened nor closed";
  EXPECT_EQ(roots.OpensForTesting(), 2u);
  EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()),
            (std::map<std::string, std::string>{{"key", "v3"}}));

  // A failed stat of the path: opened again, never the kept descriptor on trust.
  env.RecordCalls(false);
  env.FailNext("statmount", EIO);
  ASSERT_TRUE(SetUpVolume(env, req(Loc(), "v4"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 3u);

  // The root replaced by another directory at its path: the new one is written, the old one
  // (still open in the cache until then) never again.
  const std::string old_root = root_ + ".old";
  ASSERT_EQ(::rename(root_.c_str(), old_root.c_str()), 0);
  fs::create_directories(root_);
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc("uid-2"), "w1"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 4u);
  EXPECT_EQ(atomicwriter::VisibleContent(Loc("uid-2").dir()),
            (std::map<std::string, std::string>{{"key", "w1"}}));
  EXPECT_FALSE(fs::exists(old_root + "/pods/uid-2"));
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc("uid-2"), "w2"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 5u) << "pods/ made in the new root";
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc("uid-2"), "w3"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 5u);
  // A change in the root dir itself (its ctime) opens it again.
  ASSERT_TRUE(std::ofstream(root_ + "/x").good());
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc("uid-2"), "w4"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 6u);
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req(Loc("uid-2"), "w5"), &roots).ok());
  EXPECT_EQ(roots.OpensForTesting(), 6u);
  fs::remove_all(old_root);
}

TEST_F(VolumeSetupTest, FailedFirstMountLeavesNoDirectory) {
  atomicwriter::Payload bad;
  bad["../escape"] = atomicwriter::FileProjection{"x", 0644, std::nullopt};
  auto r = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), bad, nullptr));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "invalid path: must not contain '..': ../escape");
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

TEST_F(VolumeSetupTest, FailedRemountKeepsThePublishedContent) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"), nullptr)).ok());
  auto r = SetUpVolume(*atomicwriter::PosixEnv(),
                       Req(Loc(), Payload("v2"), [](atomicwriter::Env&, int, const std::string&) {
                         return base::Status::Error("ownership pass failed");
                       }));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()),
            (std::map<std::string, std::string>{{"key", "v1"}}));
}

TEST_F(VolumeSetupTest, UnsafePathComponentsAreRejected) {
  for (const std::string uid : {"", ".", "..", "a/b"}) {
    auto r = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(uid), Payload("x"), nullptr));
    ASSERT_FALSE(r.ok()) << uid;
    EXPECT_NE(r.status().message().find("must be a single path component"), std::string::npos);
  }
  auto r = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("uid", ".."), Payload("x"), nullptr));
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods"));
}

TEST_F(VolumeSetupTest, TearDownRemovesTheVolumeAndEmptyParentsOnly) {
  ASSERT_TRUE(
      SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("uid-1", "a"), Payload("1"), nullptr)).ok());
  ASSERT_TRUE(
      SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("uid-1", "b"), Payload("2"), nullptr)).ok());
  ASSERT_TRUE(TearDownVolume(*atomicwriter::PosixEnv(), Loc("uid-1", "a"), *journal_).ok());
  EXPECT_FALSE(fs::exists(Loc("uid-1", "a").dir()));
  EXPECT_TRUE(fs::exists(Loc("uid-1", "b").dir()));
  ASSERT_TRUE(TearDownVolume(*atomicwriter::PosixEnv(), Loc("uid-1", "b"), *journal_).ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
  EXPECT_TRUE(fs::exists(root_ + "/pods"));
  // Tearing down what is not there succeeds.
  EXPECT_TRUE(TearDownVolume(*atomicwriter::PosixEnv(), Loc("uid-1", "b"), *journal_).ok());
}

TEST_F(VolumeSetupTest, TearDownKeepsOtherFilesInThePodDir) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("1"), nullptr)).ok());
  std::ofstream(root_ + "/pods/uid-1/etc-hosts") << "kubelet's";
  ASSERT_TRUE(TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_).ok());
  EXPECT_TRUE(fs::exists(root_ + "/pods/uid-1/etc-hosts"));
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1/volumes"));
}

// Whether this process may mount (root with CAP_SYS_ADMIN, outside a restricted sandbox).
bool CanMountTmpfs(const std::string& scratch) {
  fs::create_directories(scratch);
  if (::mount("tmpfs", scratch.c_str(), "tmpfs", 0, nullptr) != 0) return false;
  ::umount2(scratch.c_str(), 0);
  return true;
}

TEST_F(VolumeSetupTest, MemoryMediumVolumesLiveOnTmpfs) {
  const bool can_mount = CanMountTmpfs(root_ + "/probe");
  SetUpRequest req = Req(Loc("uid-1", "secret"), Payload("s3cr3t"), nullptr);
  req.tmpfs = true;
  auto r = SetUpVolume(*atomicwriter::PosixEnv(), req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string dir = Loc("uid-1", "secret").dir();
  // Without the privilege to mount, the volume is still written (a warning is logged).
  EXPECT_EQ(IsMountPoint(*atomicwriter::PosixEnv(), dir), can_mount);
  EXPECT_EQ(atomicwriter::VisibleContent(dir),
            (std::map<std::string, std::string>{{"key", "s3cr3t"}}));
  if (can_mount) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 01777u);  // the tmpfs root, as the kubelet shows it
  }
  // A remount writes into the same tmpfs.
  req.payload = Payload("rotated");
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req).ok());
  EXPECT_EQ(IsMountPoint(*atomicwriter::PosixEnv(), dir), can_mount);
  ASSERT_TRUE(TearDownVolume(*atomicwriter::PosixEnv(), Loc("uid-1", "secret"), *journal_).ok());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

// An owned volume whose tmpfs went away (unmounted, or a reboot) is an empty dir: the next
// write mounts a tmpfs again and writes into it, not into the dir the mount now hides.
TEST_F(VolumeSetupTest, AnOwnedVolumeThatLostItsTmpfsGetsItBackAndTheContentGoesIntoIt) {
  if (!CanMountTmpfs(root_ + "/probe"))
    VM_SKIP_NEEDS_ROOT(std::string("mount tmpfs: ") + std::strerror(errno));
  SetUpRequest req = Req(Loc("uid-1", "secret"), Payload("v1"), nullptr);
  req.tmpfs = true;
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req).ok());
  const std::string dir = Loc("uid-1", "secret").dir();
  ASSERT_TRUE(IsMountPoint(*atomicwriter::PosixEnv(), dir));
  ASSERT_EQ(::umount2(dir.c_str(), 0), 0);
  ASSERT_TRUE(fs::is_empty(dir));
  req.payload = Payload("v2");
  auto r = SetUpVolume(*atomicwriter::PosixEnv(), req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(IsMountPoint(*atomicwriter::PosixEnv(), dir));
  EXPECT_EQ(atomicwriter::VisibleContent(dir), (std::map<std::string, std::string>{{"key", "v2"}}));
  // Nothing was written beneath the mount.
  ASSERT_EQ(::umount2(dir.c_str(), 0), 0);
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(VolumeSetupTest, FailedFirstMountOnTmpfsLeavesNothingMounted) {
  atomicwriter::Payload bad;
  bad["../escape"] = atomicwriter::FileProjection{"x", 0644, std::nullopt};
  SetUpRequest req = Req(Loc(), bad, nullptr);
  req.tmpfs = true;
  ASSERT_FALSE(SetUpVolume(*atomicwriter::PosixEnv(), req).ok());
  EXPECT_FALSE(fs::exists(Loc().dir()));
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

TEST_F(VolumeSetupTest, ReconstructionAdoptsOwnedVolumesOnly) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u1", "a"), Payload("1"))).ok());
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u2", "b"), Payload("1"))).ok());
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u2", "gone"), Payload("1"))).ok());
  fs::remove_all(Loc("u2", "gone").dir());
  // What the daemon did not make: the kubelet's volumes, a link, an unknown plugin's dir.
  fs::create_directories(root_ + "/pods/u2/volumes/kubernetes.io~empty-dir/scratch");
  fs::create_directories(root_ + "/pods/u3/volumes/kubernetes.io~configmap/kubelets");
  fs::create_directory_symlink(root_ + "/pods/u1/volumes/kubernetes.io~configmap/a",
                               root_ + "/pods/u2/volumes/kubernetes.io~configmap/link");
  ReconstructResult r =
      ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, *journal_,
                              {"kubernetes.io~configmap", "kubernetes.io~secret"});
  std::set<std::string> found;
  for (const FoundVolume& v : r.volumes) {
    found.insert(v.pod_uid + "/" + v.plugin_dir + "/" + v.volume_name);
  }
  EXPECT_EQ(found, (std::set<std::string>{"u1/kubernetes.io~configmap/a",
                                          "u2/kubernetes.io~configmap/b"}));
  EXPECT_EQ(r.pod_uids, (std::vector<std::string>{"u1", "u2"}));
  EXPECT_EQ(r.released, 1);  // "gone"
  EXPECT_FALSE(journal_->Owns(
      OwnedKind::kVolume, OwnershipJournal::VolumePath("u2", "kubernetes.io~configmap", "gone")));
  EXPECT_TRUE(r.problems.empty());
}

// Found by the crash loop (tests/crash): a kill after a teardown released its volume and before
// the empty dirs above it went, in a pod dir the daemon did not make (the kubelet's), left the
// owned volumes and plugin dirs behind for good: reconstruction named only pods whose pod dir
// the daemon owns, so the orphan cleanup never looked at this pod.
TEST_F(VolumeSetupTest, ReconstructionNamesPodsWhoseOwnedDirsAreBelowAPodDirNotItsOwn) {
  fs::create_directories(root_ + "/pods/kubelets/containers");  // the kubelet's pod dir
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("kubelets", "a"), Payload("1"))).ok());
  ASSERT_FALSE(journal_->Owns(OwnedKind::kDir, OwnershipJournal::PodPath("kubelets")));
  ASSERT_TRUE(journal_->Owns(OwnedKind::kDir, OwnershipJournal::PodVolumesPath("kubelets")));
  // The kill: the volume is removed and released, its dirs are not.
  fs::remove_all(Loc("kubelets", "a").dir());
  ASSERT_TRUE(
      journal_
          ->Remove({OwnedPath{OwnedKind::kVolume, OwnershipJournal::VolumePath(
                                                      "kubelets", "kubernetes.io~configmap", "a")}})
          .ok());
  ReconstructResult r = ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, *journal_,
                                                {"kubernetes.io~configmap"});
  EXPECT_TRUE(r.volumes.empty());
  ASSERT_EQ(r.pod_uids, (std::vector<std::string>{"kubelets"}));
  // What the orphan cleanup then does with it: the owned dirs go, the kubelet's stay.
  EXPECT_TRUE(
      RemoveOwnedEmptyPodDirs(*atomicwriter::PosixEnv(), root_, "kubelets", *journal_).ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods/kubelets/volumes"));
  EXPECT_TRUE(fs::exists(root_ + "/pods/kubelets/containers"));
  EXPECT_TRUE(journal_->EntriesOfPod("kubelets").empty());
}

TEST_F(VolumeSetupTest, AnOwnedVolumeThatCannotBeCheckedIsReportedAndTheRestProceeds) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u1", "a"), Payload("1"))).ok());
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u2", "b"), Payload("1"))).ok());
  // u1's pod dir became a symlink loop: its volume can be neither read nor declared gone.
  fs::remove_all(root_ + "/pods/u1");
  fs::create_symlink("u1", root_ + "/pods/u1");
  ReconstructResult r = ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, *journal_,
                                                {"kubernetes.io~configmap"});
  ASSERT_EQ(r.volumes.size(), 1u);
  EXPECT_EQ(r.volumes[0].pod_uid, "u2");
  bool reported = false;
  for (const std::string& p : r.problems) {
    reported |=
        p.find("/pods/u1/volumes/kubernetes.io~configmap/a: a symlink stands where a directory") !=
        std::string::npos;
  }
  EXPECT_TRUE(reported) << ::testing::PrintToString(r.problems);
  // Kept in the journal: it may come back readable.
  EXPECT_TRUE(journal_->Owns(OwnedKind::kVolume,
                             OwnershipJournal::VolumePath("u1", "kubernetes.io~configmap", "a")));
}

TEST_F(VolumeSetupTest, AVolumeTheDaemonDidNotSetUpIsRefreshedButNeverRemoved) {
  // The kubelet's volume of a pod the daemon also serves: its dirs exist before the daemon's
  // first write.
  const std::string dir = Loc().dir();
  fs::create_directories(dir);
  std::ofstream(root_ + "/pods/uid-1/etc-hosts") << "kubelet's";
  SetUpRequest req = Req(Loc(), Payload("v1"));
  req.tmpfs = true;
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), req).ok());
  EXPECT_FALSE(IsMountPoint(*atomicwriter::PosixEnv(), dir))
      << "a tmpfs on a volume the kubelet may be setting up";
  EXPECT_EQ(atomicwriter::VisibleContent(dir), (std::map<std::string, std::string>{{"key", "v1"}}));
  EXPECT_TRUE(journal_->Entries().empty());
  auto t = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, TearDownOutcome::kNotOwned);
  EXPECT_EQ(atomicwriter::VisibleContent(dir), (std::map<std::string, std::string>{{"key", "v1"}}));
  EXPECT_TRUE(RemoveOwnedEmptyPodDirs(*atomicwriter::PosixEnv(), root_, "uid-1", *journal_).ok());
  EXPECT_TRUE(fs::exists(dir));
}

// Issue 41, item 6: the journal records the inode of each volume dir the daemon makes; a dir in
// its place that is another inode (moved in while the daemon ran, or while it was stopped) is
// not its own: no write goes into it, teardown and reconstruction leave it and say why.
TEST_F(VolumeSetupTest, AVolumeDirReplacedByAnotherDirIsNeverWrittenOrRemoved) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"))).ok());
  const std::string dir = Loc().dir();
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(journal_->VolumeInode(Loc().rel()), st.st_ino);
  fs::rename(dir, dir + ".moved");
  fs::create_directory(dir);
  std::ofstream(dir + "/victim") << "mine";
  // A write: refused, nothing written, released.
  auto w = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v2")));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(dir + " is inode"), std::string::npos)
      << w.status().message();
  EXPECT_EQ(atomicwriter::VisibleContent(dir),
            (std::map<std::string, std::string>{{"victim", "mine"}}));
  EXPECT_FALSE(journal_->Owns(OwnedKind::kVolume, Loc().rel()));
  ASSERT_EQ(journal_->ForeignVolumeDirs().size(), 1u);
  EXPECT_EQ(journal_->ForeignVolumeDirs()[0].path, Loc().rel());
  // Then a set-up of the same volume refuses the non-empty dir it does not own.
  auto again = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v2")));
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("no ..data link"), std::string::npos)
      << again.status().message();
  EXPECT_EQ(atomicwriter::VisibleContent(dir),
            (std::map<std::string, std::string>{{"victim", "mine"}}));
  auto t = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, TearDownOutcome::kNotOwned);
  EXPECT_TRUE(fs::exists(dir + "/victim"));
}

TEST_F(VolumeSetupTest, TeardownLeavesAVolumeDirOfAnotherInodeAndSaysWhy) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"))).ok());
  const std::string dir = Loc().dir();
  fs::rename(dir, dir + ".moved");
  fs::create_directory(dir);
  std::ofstream(dir + "/victim") << "mine";
  auto t = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(dir + ": not the volume dir volumemanager set up"),
            std::string::npos)
      << t.status().message();
  EXPECT_TRUE(fs::exists(dir + "/victim"));
  EXPECT_FALSE(journal_->Owns(OwnedKind::kVolume, Loc().rel()));
  // The retry: no longer the daemon's.
  auto retry = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(*retry, TearDownOutcome::kNotOwned);
  EXPECT_TRUE(fs::exists(dir + "/victim"));
}

TEST_F(VolumeSetupTest, ReconstructionReleasesAVolumeDirOfAnotherInodeAndRecordsUnknownOnes) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u1", "a"), Payload("1"))).ok());
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc("u2", "b"), Payload("1"))).ok());
  const std::string a = Loc("u1", "a").dir();
  fs::rename(a, a + ".moved");
  fs::create_directory(a);
  std::ofstream(a + "/victim") << "mine";
  // u2/b as a v2 journal lists it: no inode.
  const uint64_t b_inode = journal_->VolumeInode(Loc("u2", "b").rel());
  ASSERT_NE(b_inode, 0u);
  ASSERT_TRUE(journal_->Remove({OwnedPath{OwnedKind::kVolume, Loc("u2", "b").rel()}}).ok());
  ASSERT_TRUE(journal_->Add({OwnedPath{OwnedKind::kVolume, Loc("u2", "b").rel()}}).ok());
  ASSERT_EQ(journal_->VolumeInode(Loc("u2", "b").rel()), 0u);
  ReconstructResult r = ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, *journal_,
                                                {"kubernetes.io~configmap"});
  ASSERT_EQ(r.volumes.size(), 1u);
  EXPECT_EQ(r.volumes[0].pod_uid, "u2");
  EXPECT_EQ(r.foreign, 1);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find(a + ": not the volume dir volumemanager set up"), std::string::npos)
      << r.problems[0];
  EXPECT_FALSE(journal_->Owns(OwnedKind::kVolume, Loc("u1", "a").rel()));
  EXPECT_TRUE(fs::exists(a + "/victim"));
  EXPECT_EQ(journal_->VolumeInode(Loc("u2", "b").rel()), b_inode) << "recorded at reconstruction";
}

TEST_F(VolumeSetupTest, TheKubeletHasSetUpAVolumeOnceItsTopLevelLinksExist) {
  // The kubelet's order: the version dir, `..data`, then one link per top-level name.
  const std::string dir = Loc().dir();
  EXPECT_FALSE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc())) << "no dir";
  fs::create_directories(dir + "/..2026_11_24_00_00_00.1/sub");
  std::ofstream(dir + "/..2026_11_24_00_00_00.1/key") << "v1";
  EXPECT_FALSE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc())) << "no ..data";
  fs::create_directory_symlink("..2026_11_24_00_00_00.1", dir + "/..data");
  EXPECT_FALSE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc()))
      << "..data published, links not yet created";
  fs::create_symlink("..data/key", dir + "/key");
  EXPECT_FALSE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc())) << "one link of two";
  fs::create_directory(dir + "/sub");  // anything under the name counts, as for the kubelet
  EXPECT_TRUE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc()));
  fs::remove(dir + "/..data");
  fs::create_directory_symlink("..missing", dir + "/..data");
  EXPECT_FALSE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc())) << "..data pointing at nothing";
}

TEST_F(VolumeSetupTest, OnlyTheDirectoriesTheDaemonCreatedAreRecordedAndRemoved) {
  // The pod dir and its volumes dir exist (the kubelet's); the plugin dir and the volume do not.
  fs::create_directories(root_ + "/pods/uid-1/volumes");
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"))).ok());
  std::vector<OwnedPath> want = {
      {OwnedKind::kDir, "pods/uid-1/volumes/kubernetes.io~configmap"},
      {OwnedKind::kVolume, "pods/uid-1/volumes/kubernetes.io~configmap/cfg"}};
  EXPECT_EQ(journal_->Entries(), want);
  auto t = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, TearDownOutcome::kRemoved);
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1/volumes/kubernetes.io~configmap"));
  EXPECT_TRUE(fs::is_directory(root_ + "/pods/uid-1/volumes"));  // empty, but not ours
  EXPECT_TRUE(journal_->Entries().empty());
}

TEST_F(VolumeSetupTest, AFailedFirstMountReleasesWhatItRecorded) {
  atomicwriter::Payload bad;
  bad["../escape"] = atomicwriter::FileProjection{"x", 0644, std::nullopt};
  ASSERT_FALSE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), bad)).ok());
  EXPECT_TRUE(journal_->Entries().empty());
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

}  // namespace
}  // namespace volumemanager

namespace volumemanager {
namespace {

// A link planted at each level of an owned volume's path: set-up, refresh and teardown refuse it,
// name it, and touch nothing where it points.
TEST_F(VolumeSetupTest, ALinkAboveAVolumeIsNeverFollowedBySetUpOrTearDown) {
  const std::string levels[] = {"/pods", "/pods/uid-1", "/pods/uid-1/volumes",
                                "/pods/uid-1/volumes/kubernetes.io~configmap"};
  for (const std::string& level : levels) {
    SCOPED_TRACE(level);
    ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"))).ok());
    // The victim mirrors what lies below the link, with the volume dir's content.
    const fs::path victim = fs::path(root_).parent_path() / "victim";
    fs::remove_all(victim);
    const std::string below = (root_ + "/pods/uid-1/volumes/kubernetes.io~configmap/cfg")
                                  .substr(root_.size() + level.size());
    fs::create_directories(victim.string() + below);
    std::ofstream(victim.string() + below + "/canary") << "keep";
    const auto before = atomicwriter::SnapshotTree(victim.string());
    fs::rename(root_ + level, root_ + level + ".moved");
    fs::create_directory_symlink(victim.string(), root_ + level);

    auto write = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v2")));
    ASSERT_FALSE(write.ok());
    EXPECT_NE(
        write.status().message().find("a symlink stands where a directory of this path should be"),
        std::string::npos)
        << write.status().message();
    EXPECT_EQ(write.status().sys_errno(), ELOOP);
    EXPECT_FALSE(KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc()).ok());
    auto down = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
    EXPECT_FALSE(down.ok());
    EXPECT_EQ(atomicwriter::SnapshotTree(victim.string()), before);
    EXPECT_TRUE(fs::is_symlink(root_ + level)) << "the link is left in place";

    fs::remove(root_ + level);
    fs::rename(root_ + level + ".moved", root_ + level);
    ASSERT_TRUE(TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_).ok());
    EXPECT_FALSE(fs::exists(Loc().dir()));
  }
}

TEST_F(VolumeSetupTest, AFirstMountUnderALinkedPodDirCreatesNothing) {
  const fs::path victim = fs::path(root_).parent_path() / "victim";
  fs::create_directories(victim);
  fs::create_directories(root_ + "/pods");
  fs::create_directory_symlink(victim, root_ + "/pods/uid-1");
  auto write = SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1")));
  ASSERT_FALSE(write.ok());
  EXPECT_TRUE(fs::is_empty(victim));
  EXPECT_TRUE(journal_->Entries().empty()) << "nothing recorded as the daemon's";
}

TEST_F(VolumeSetupTest, AVolumeDirReplacedByALinkIsReleasedNotFollowed) {
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), Req(Loc(), Payload("v1"))).ok());
  const fs::path victim = fs::path(root_).parent_path() / "victim";
  fs::create_directories(victim);
  std::ofstream(victim / "canary") << "keep";
  fs::remove_all(Loc().dir());
  fs::create_directory_symlink(victim, Loc().dir());
  auto down = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().sys_errno(), ELOOP);
  EXPECT_TRUE(fs::exists(victim / "canary"));
  EXPECT_TRUE(fs::is_symlink(Loc().dir()));
  auto again = TearDownVolume(*atomicwriter::PosixEnv(), Loc(), *journal_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, TearDownOutcome::kNotOwned);
}

}  // namespace
}  // namespace volumemanager

namespace volumemanager {
namespace {

// `..data` names a version dir beside it, nothing else: a target outside the volume dir (an
// absolute path, `..` steps, `..` itself) or a version name that is a link is refused by the
// set-up check, naming it, and nothing where it points is read or written.
TEST_F(VolumeSetupTest, ADataLinkOutOfTheVolumeIsNeverFollowed) {
  const std::string dir = Loc().dir();
  const fs::path elsewhere = fs::path(root_).parent_path() / "elsewhere";
  fs::create_directories(elsewhere);
  std::ofstream(elsewhere / "key") << "outside";  // what a followed link would find "set up"
  fs::create_directories(dir + "/..2026_11_24_00_00_00.1");
  std::ofstream(dir + "/..2026_11_24_00_00_00.1/key") << "v1";
  fs::create_directory_symlink(elsewhere, dir + "/..2026_11_24_00_00_00.2");
  fs::create_symlink("..data/key", dir + "/key");
  const auto before = atomicwriter::SnapshotTree(elsewhere.string());
  const std::string targets[] = {elsewhere.string(), fs::relative(elsewhere, dir).string(),
                                 "..2026_11_24_00_00_00.2", ".."};
  for (const std::string& target : targets) {
    SCOPED_TRACE(target);
    fs::remove(dir + "/..data");
    fs::create_directory_symlink(target, dir + "/..data");
    auto set_up = KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc());
    ASSERT_FALSE(set_up.ok()) << "followed, found set up: " << *set_up;
    EXPECT_NE(set_up.status().message().find("not followed"), std::string::npos)
        << set_up.status().message();
    EXPECT_NE(set_up.status().message().find(dir + "/.."), std::string::npos)
        << set_up.status().message();
    SetUpRequest req = Req(Loc(), Payload("v2"));
    req.refresh_only = true;
    auto write = SetUpVolume(*atomicwriter::PosixEnv(), req);
    EXPECT_FALSE(write.ok());
    EXPECT_EQ(atomicwriter::SnapshotTree(elsewhere.string()), before);
    EXPECT_EQ(fs::read_symlink(dir + "/..data").string(), target) << "the link is left in place";
  }
  // The same volume with `..data` on its own version: set up, and refreshed.
  fs::remove(dir + "/..data");
  fs::create_directory_symlink("..2026_11_24_00_00_00.1", dir + "/..data");
  ASSERT_TRUE(KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc()).ok());
  EXPECT_TRUE(*KubeletHasSetUp(*atomicwriter::PosixEnv(), Loc()));
}

// The removal queue opens a volume dir again beneath the root, one component at a time: a pod
// dir moved out of the root (its inodes kept, so every identity check of the queue still holds)
// with a link in its place is not followed, nothing is removed out there, and the refusal is
// reported.
TEST_F(VolumeSetupTest, TheRemovalQueueNeverFollowsALinkAboveAVolumeDir) {
  atomicwriter::RemovalQueue queue;
  SetUpRequest first = Req(Loc(), Payload("v1"));
  first.removals = &queue;
  ASSERT_TRUE(SetUpVolume(*atomicwriter::PosixEnv(), first).ok());
  SetUpRequest second = Req(Loc(), Payload("v2"));
  second.removals = &queue;
  auto write = SetUpVolume(*atomicwriter::PosixEnv(), second);
  ASSERT_TRUE(write.ok()) << write.status().message();
  ASSERT_EQ(queue.pending(), 1u) << "the replaced version";
  const fs::path outside = fs::path(root_).parent_path() / "outside";
  fs::create_directories(outside);
  fs::rename(root_ + "/pods/uid-1", outside / "uid-1");
  fs::create_directory_symlink(outside / "uid-1", root_ + "/pods/uid-1");
  const auto before = atomicwriter::SnapshotTree((outside / "uid-1").string());

  EXPECT_EQ(queue.RunAll(), 0u);
  EXPECT_EQ(atomicwriter::SnapshotTree((outside / "uid-1").string()), before)
      << "removed through the link";
  const atomicwriter::RemovalQueue::Stats stats = queue.stats();
  EXPECT_EQ(stats.removed, 0u);
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_NE(stats.last_error.find("a symlink stands where a directory of this path should be"),
            std::string::npos)
      << stats.last_error;
  EXPECT_EQ(queue.pending(), 0u) << "dropped: nothing is removed through a link later either";
  EXPECT_TRUE(fs::is_symlink(root_ + "/pods/uid-1")) << "the link is left in place";
}

}  // namespace
}  // namespace volumemanager
