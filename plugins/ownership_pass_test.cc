#include "plugins/ownership_pass.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/volume_inspector.h"

namespace plugins {
namespace {

constexpr gid_t kFsGroup = 4321;

struct StatInfo {
  mode_t mode;
  gid_t gid;
};

StatInfo Lstat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return {static_cast<mode_t>(st.st_mode & 07777), st.st_gid};
}

// Only root may give a file any group. Elsewhere the pass's chowns go to the caller's own group
// and the group asked for is what the test checks, so these tests run as any user.
void AllowChown(atomicwriter::FaultInjectionEnv& fs) {
  if (::geteuid() != 0) fs.RedirectChown(::getegid());
}

class OwnershipPassTest : public ::testing::Test {
 protected:
  OwnershipPassTest() { AllowChown(fs_); }

  // The group the pass gave `path` (not followed). An entry created after the pass in a setgid
  // directory has the directory's group, as the kernel gives it.
  gid_t GroupOf(const std::string& path) {
    if (auto asked = fs_.ChownRequested(path)) return *asked;
    const std::string parent = std::filesystem::path(path).parent_path().string();
    if (parent.size() > root_.size() && (Lstat(parent).mode & S_ISGID) != 0) {
      return GroupOf(parent);
    }
    return Lstat(path).gid;
  }

  void SetUp() override {
    char tmpl[] = "/tmp/ownership_pass_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    volume_ = root_ + "/volume";
    outside_ = root_ + "/outside.txt";
    ASSERT_EQ(::mkdir(volume_.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(volume_.c_str(), 0777), 0);  // as the kubelet's wrapper does (§1.1)
    std::ofstream(outside_) << "not yours";
    ASSERT_EQ(::chmod(outside_.c_str(), 0600), 0);
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  base::Result<atomicwriter::WriteResult> Write(const atomicwriter::Payload& payload,
                                                const atomicwriter::PermissionCallback& cb,
                                                atomicwriter::Env* fs = nullptr) {
    atomicwriter::Options options;
    options.fs = fs != nullptr ? fs : &fs_;
    auto writer = atomicwriter::AtomicWriter::Open(volume_, options);
    if (!writer.ok()) return writer.status();
    return (*writer)->Write(payload, cb);
  }

  atomicwriter::FaultInjectionEnv fs_{atomicwriter::PosixEnv()};
  std::string root_, volume_, outside_;
};

TEST_F(OwnershipPassTest, GroupAndModesAsTheKubelet) {
  kube::Pod pod;
  pod.spec.security_context = kube::PodSecurityContext{kFsGroup, std::nullopt, ""};
  const atomicwriter::Payload payload = {{"key.0400", {"a", 0400, {}}},
                                         {"dir/nested.0600", {"b", 0600, {}}},
                                         {"dir/deeper/x.0644", {"c", 0644, {}}}};
  auto written = Write(payload, OwnershipPassFor(pod, "cfg"));
  ASSERT_TRUE(written.ok()) << written.status().message();
  const std::string ts = volume_ + "/" + written->ts_dir;

  const struct {
    const char* name;
    std::string path;
    mode_t mode;
  } cases[] = {
      {"volume_dir_setgid", volume_, 0777 | S_ISGID},
      {"ts_dir", ts, 0755 | S_ISGID},
      {"file_0400_becomes_0440", ts + "/key.0400", 0440},
      {"file_0600_becomes_0640", ts + "/dir/nested.0600", 0640},
      {"file_0644_stays", ts + "/dir/deeper/x.0644", 0644},
      {"subdir", ts + "/dir/deeper", 0755 | S_ISGID},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Lstat(c.path).mode, c.mode);
    EXPECT_EQ(GroupOf(c.path), kFsGroup);
  }
  // Links are chowned without being followed.
  EXPECT_EQ(GroupOf(volume_ + "/..data"), kFsGroup);
  EXPECT_EQ(GroupOf(volume_ + "/dir"), kFsGroup);
  // What a container reads is unchanged.
  EXPECT_EQ(atomicwriter::VisibleContent(volume_), atomicwriter::ExpectedContent(payload));
}

TEST_F(OwnershipPassTest, NeverFollowsSymlinksOutOfTheVolume) {
  ASSERT_EQ(::symlink(outside_.c_str(), (volume_ + "/escape").c_str()), 0);
  ASSERT_EQ(::symlink(root_.c_str(), (volume_ + "/escape-dir").c_str()), 0);
  const auto before = atomicwriter::SnapshotTree(root_ + "/outside.txt");
  const StatInfo outside_before = Lstat(outside_);
  const StatInfo root_before = Lstat(root_);

  auto written =
      Write({{"k", {"v", 0400, {}}}}, OwnershipPass(kFsGroup, {"ns/p", "uid-1", "test"}));
  ASSERT_TRUE(written.ok()) << written.status().message();

  const StatInfo outside_after = Lstat(outside_);
  EXPECT_EQ(outside_after.mode, outside_before.mode);
  EXPECT_EQ(outside_after.gid, outside_before.gid);
  EXPECT_EQ(Lstat(root_).mode, root_before.mode);
  EXPECT_EQ(Lstat(root_).gid, root_before.gid);
  EXPECT_EQ(fs_.ChownRequested(outside_), std::nullopt);
  EXPECT_EQ(fs_.ChownRequested(root_), std::nullopt);
  EXPECT_EQ(GroupOf(volume_ + "/escape"), kFsGroup);  // the link itself
}

TEST_F(OwnershipPassTest, FailedCallsAreSkippedNotFatal) {
  // Fail each call of the pass in turn: the write still succeeds and publishes the payload.
  const atomicwriter::Payload payload = {{"a", {"1", 0400, {}}}, {"d/b", {"2", 0400, {}}}};
  ASSERT_TRUE(Write(payload, nullptr).ok());
  int dir_fd = ::open(volume_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  OwnershipPassStats clean;
  ASSERT_TRUE(SetVolumeOwnership(fs_, dir_fd, kFsGroup, &clean).ok());
  EXPECT_EQ(clean.failures, 0);
  EXPECT_GE(clean.entries, 7);  // volume, ts dir, a, d, d/b, ..data, a link, d link

  atomicwriter::FaultInjectionEnv counting(atomicwriter::PosixEnv());
  AllowChown(counting);
  counting.FailCall(0, 0);
  ASSERT_TRUE(SetVolumeOwnership(counting, dir_fd, kFsGroup).ok());
  const int total_calls = counting.calls();
  ASSERT_GT(total_calls, 10);
  for (int k = 2; k <= total_calls; ++k) {  // call 1 is the probe of the volume dir
    SCOPED_TRACE(k);
    atomicwriter::FaultInjectionEnv faulty(atomicwriter::PosixEnv());
    AllowChown(faulty);
    faulty.FailCall(k, EPERM);
    OwnershipPassStats stats;
    EXPECT_TRUE(SetVolumeOwnership(faulty, dir_fd, kFsGroup, &stats).ok());
    if (faulty.failed_call() != "close") {
      EXPECT_EQ(stats.failures, 1) << faulty.failed_call();
    }
  }
  atomicwriter::FaultInjectionEnv unreadable(atomicwriter::PosixEnv());
  unreadable.FailCall(1, EACCES);
  base::Status s = SetVolumeOwnership(unreadable, dir_fd, kFsGroup);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.sys_errno(), EACCES);
  ::close(dir_fd);
}

TEST(OwnershipPassForTest, OnlyWithFsGroup) {
  kube::Pod pod;
  EXPECT_EQ(OwnershipPassFor(pod, "x"), nullptr);
  pod.spec.security_context = kube::PodSecurityContext{std::nullopt, 1000, ""};
  EXPECT_EQ(OwnershipPassFor(pod, "x"), nullptr);
  pod.spec.security_context->fs_group = 2000;
  EXPECT_NE(OwnershipPassFor(pod, "x"), nullptr);
}

}  // namespace
}  // namespace plugins
