#include "volumemanager/volume_setup.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "atomicwriter/volume_inspector.h"
#include "volumemanager/reconstruct.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

class VolumeSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volume-setup-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  VolumeLocation Loc(const std::string& uid = "uid-1", const std::string& vol = "cfg") {
    return VolumeLocation{root_, uid, "kubernetes.io~configmap", vol};
  }
  static atomicwriter::Payload Payload(const std::string& data) {
    atomicwriter::Payload p;
    p["key"] = atomicwriter::FileProjection{data, 0644, std::nullopt};
    return p;
  }

  std::string root_;
};

TEST_F(VolumeSetupTest, FirstMountCreatesTheKubeletLayout) {
  const mode_t old = ::umask(022);
  auto r = SetUpVolume(SetUpRequest{Loc(), Payload("v1"), nullptr, false});
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

TEST_F(VolumeSetupTest, FailedFirstMountLeavesNoDirectory) {
  atomicwriter::Payload bad;
  bad["../escape"] = atomicwriter::FileProjection{"x", 0644, std::nullopt};
  auto r = SetUpVolume(SetUpRequest{Loc(), bad, nullptr, false});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "invalid path: must not contain '..': ../escape");
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

TEST_F(VolumeSetupTest, FailedRemountKeepsThePublishedContent) {
  ASSERT_TRUE(SetUpVolume(SetUpRequest{Loc(), Payload("v1"), nullptr, false}).ok());
  auto r = SetUpVolume(SetUpRequest{Loc(), Payload("v2"),
                                    [](atomicwriter::Filesystem&, int, const std::string&) {
                                      return base::Status::Error("ownership pass failed");
                                    },
                                    false});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()),
            (std::map<std::string, std::string>{{"key", "v1"}}));
}

TEST_F(VolumeSetupTest, UnsafePathComponentsAreRejected) {
  for (const std::string uid : {"", ".", "..", "a/b"}) {
    auto r = SetUpVolume(SetUpRequest{Loc(uid), Payload("x"), nullptr, false});
    ASSERT_FALSE(r.ok()) << uid;
    EXPECT_NE(r.status().message().find("must be a single path component"), std::string::npos);
  }
  auto r = SetUpVolume(SetUpRequest{Loc("uid", ".."), Payload("x"), nullptr, false});
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods"));
}

TEST_F(VolumeSetupTest, TearDownRemovesTheVolumeAndEmptyParentsOnly) {
  ASSERT_TRUE(SetUpVolume(SetUpRequest{Loc("uid-1", "a"), Payload("1"), nullptr, false}).ok());
  ASSERT_TRUE(SetUpVolume(SetUpRequest{Loc("uid-1", "b"), Payload("2"), nullptr, false}).ok());
  ASSERT_TRUE(TearDownVolume(Loc("uid-1", "a")).ok());
  EXPECT_FALSE(fs::exists(Loc("uid-1", "a").dir()));
  EXPECT_TRUE(fs::exists(Loc("uid-1", "b").dir()));
  ASSERT_TRUE(TearDownVolume(Loc("uid-1", "b")).ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
  EXPECT_TRUE(fs::exists(root_ + "/pods"));
  // Tearing down what is not there succeeds.
  EXPECT_TRUE(TearDownVolume(Loc("uid-1", "b")).ok());
}

TEST_F(VolumeSetupTest, TearDownKeepsOtherFilesInThePodDir) {
  ASSERT_TRUE(SetUpVolume(SetUpRequest{Loc(), Payload("1"), nullptr, false}).ok());
  std::ofstream(root_ + "/pods/uid-1/etc-hosts") << "kubelet's";
  ASSERT_TRUE(TearDownVolume(Loc()).ok());
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
  SetUpRequest req{Loc("uid-1", "secret"), Payload("s3cr3t"), nullptr, false};
  req.tmpfs = true;
  auto r = SetUpVolume(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string dir = Loc("uid-1", "secret").dir();
  // Without the privilege to mount, the volume is still written (a warning is logged).
  EXPECT_EQ(IsMountPoint(dir), can_mount);
  EXPECT_EQ(atomicwriter::VisibleContent(dir),
            (std::map<std::string, std::string>{{"key", "s3cr3t"}}));
  if (can_mount) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 01777u);  // the tmpfs root, as the kubelet shows it
  }
  // A remount writes into the same tmpfs.
  req.payload = Payload("rotated");
  ASSERT_TRUE(SetUpVolume(req).ok());
  EXPECT_EQ(IsMountPoint(dir), can_mount);
  ASSERT_TRUE(TearDownVolume(Loc("uid-1", "secret")).ok());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

TEST_F(VolumeSetupTest, FailedFirstMountOnTmpfsLeavesNothingMounted) {
  atomicwriter::Payload bad;
  bad["../escape"] = atomicwriter::FileProjection{"x", 0644, std::nullopt};
  SetUpRequest req{Loc(), bad, nullptr, false};
  req.tmpfs = true;
  ASSERT_FALSE(SetUpVolume(req).ok());
  EXPECT_FALSE(fs::exists(Loc().dir()));
  EXPECT_FALSE(fs::exists(root_ + "/pods/uid-1"));
}

TEST_F(VolumeSetupTest, ScanFindsKnownPluginVolumesOnly) {
  ASSERT_TRUE(SetUpVolume(SetUpRequest{Loc("u1", "a"), Payload("1"), nullptr, false}).ok());
  ASSERT_TRUE(SetUpVolume(SetUpRequest{Loc("u2", "b"), Payload("1"), nullptr, false}).ok());
  fs::create_directories(root_ + "/pods/u2/volumes/kubernetes.io~empty-dir/scratch");
  fs::create_directories(root_ + "/pods/u3");
  fs::create_directory_symlink(root_ + "/pods/u1/volumes/kubernetes.io~configmap/a",
                               root_ + "/pods/u2/volumes/kubernetes.io~configmap/link");
  ScanResult r = ScanPodVolumes(root_, {"kubernetes.io~configmap", "kubernetes.io~secret"});
  std::set<std::string> found;
  for (const FoundVolume& v : r.volumes)
    found.insert(v.pod_uid + "/" + v.plugin_dir + "/" + v.volume_name);
  EXPECT_EQ(found, (std::set<std::string>{"u1/kubernetes.io~configmap/a",
                                          "u2/kubernetes.io~configmap/b"}));
  std::set<std::string> pods(r.pod_uids.begin(), r.pod_uids.end());
  EXPECT_EQ(pods, (std::set<std::string>{"u1", "u2", "u3"}));
  EXPECT_TRUE(ScanPodVolumes(root_ + "/missing", {"kubernetes.io~configmap"}).volumes.empty());
}

}  // namespace
}  // namespace volumemanager
