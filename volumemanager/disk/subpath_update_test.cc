// subPath copies on real directories with real bind mounts, made as the kubelet makes them: the
// file resolved through ..data opened without following links, /proc/self/fd/N bound onto
// pods/<uid>/volume-subpaths/<volume>/<container>/<index>; a second bind of that path stands in
// for the container's view. As root (mounts); every mount is undone in TearDown.
#include "volumemanager/disk/subpath_update.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/open_beneath.h"
#include "atomicwriter/removal_queue.h"
#include "atomicwriter/volume_inspector.h"
#include "base/unique_fd.h"
#include "tests/support/skip.h"
#include "tests/support/test_loop.h"
#include "volumemanager/disk/write_gate.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

constexpr char kUid[] = "pod-uid-1";
constexpr char kPlugin[] = "kubernetes.io~configmap";
constexpr char kVolume[] = "cfg";

void WriteFile(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

kube::Pod PodWithSubPaths(const std::string& annotation,
                          std::vector<kube::VolumeMount> app_mounts) {
  kube::Pod pod;
  pod.metadata.name = "web";
  pod.metadata.namespace_ = "shop";
  pod.metadata.uid = kUid;
  if (!annotation.empty()) pod.metadata.annotations[kUpdateSubPathsAnnotation] = annotation;
  kube::Volume cfg;
  cfg.name = "cfg";
  cfg.source = kube::ConfigMapVolumeSource{};
  pod.spec.volumes.push_back(cfg);
  kube::Volume scratch;  // an emptyDir: a volume the container may write, never the daemon's
  scratch.name = "scratch";
  pod.spec.volumes.push_back(scratch);
  kube::Container init;
  init.name = "init";
  init.volume_mounts = {{"cfg", "/etc/app.conf", "app.conf", true, ""}};
  pod.spec.init_containers.push_back(init);
  kube::Container app;
  app.name = "app";
  app.volume_mounts = std::move(app_mounts);
  pod.spec.containers.push_back(app);
  return pod;
}

TEST(PlanSubPathUpdatesTest, ListsTheSubPathMountsOfTheVolumeOnlyWhenAnnotated) {
  const std::vector<kube::VolumeMount> mounts = {
      {"other", "/other", "x", true, ""},  // another volume
      {"cfg", "/etc/cfg", "", true, ""},   // the whole volume: no subPath
      {"cfg", "/etc/app.conf", "app.conf", true, ""},
      {"cfg", "/etc/expr", "", true, "$(POD)/x"},
      {"cfg", "/etc/data", "..data/app.conf", true, ""},
      {"cfg", "/etc/dotdot", "..data", true, ""},
      {"cfg", "/etc/empty", "a//b", true, ""},
  };
  EXPECT_TRUE(PlanSubPathUpdates(PodWithSubPaths("", mounts), kVolume).empty());
  EXPECT_TRUE(PlanSubPathUpdates(PodWithSubPaths("false", mounts), kVolume).empty());

  SubPathPlan bad = PlanSubPathUpdates(PodWithSubPaths("yes", mounts), kVolume);
  EXPECT_TRUE(bad.mounts.empty());
  EXPECT_EQ(bad.annotation_error,
            "pod shop/web: annotation volumemanager.io/update-subpaths: \"yes\" is neither "
            "\"true\" nor \"false\"; no subPath mount is updated");

  std::vector<kube::VolumeMount> scratch_mounts = mounts;
  for (kube::VolumeMount& m : scratch_mounts) m.name = m.name == "cfg" ? "scratch" : m.name;
  EXPECT_TRUE(PlanSubPathUpdates(PodWithSubPaths("true", scratch_mounts), "scratch").empty());
  EXPECT_TRUE(PlanSubPathUpdates(PodWithSubPaths("true", mounts), "gone").empty());

  SubPathPlan plan = PlanSubPathUpdates(PodWithSubPaths("true", mounts), kVolume);
  EXPECT_TRUE(plan.annotation_error.empty());
  ASSERT_EQ(plan.mounts.size(), 6u);
  // Init containers the same way, each index within its own container's volumeMounts.
  EXPECT_EQ(plan.mounts[0], (SubPathMount{"init", 0, "app.conf", ""}));
  EXPECT_EQ(plan.mounts[1], (SubPathMount{"app", 2, "app.conf", ""}));
  EXPECT_EQ(plan.mounts[2].index, 3u);
  EXPECT_NE(plan.mounts[2].refusal.find("subPathExpr is not updated"), std::string::npos);
  EXPECT_EQ(plan.mounts[3], (SubPathMount{"app", 4, "..data/app.conf", ""}));
  EXPECT_NE(plan.mounts[4].refusal.find("a directory"), std::string::npos)
      << plan.mounts[4].refusal;
  EXPECT_NE(plan.mounts[5].refusal.find("not a plain relative path"), std::string::npos);
}

// Whether the mount holding `path` is listed in /proc/self/mountinfo.
bool MountListed(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    fields >> id >> parent >> dev >> root >> mount_point;
    const std::string prefix = mount_point == "/" ? "/" : mount_point + "/";
    if (path == mount_point || path.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

class SubPathUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/subpath_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // The code under test finds the volume's filesystem in /proc/self/mountinfo. In a chroot the
    // mount holding /tmp is not listed there (only mounts below the process's root are): the test
    // dir then gets a tmpfs of its own (as root; without root every test here skips anyway).
    if (!MountListed(root_) && ::geteuid() == 0 &&
        ::mount("tmpfs", root_.c_str(), "tmpfs", 0, "mode=0755") == 0) {
      mounts_.push_back(root_);
    }
    vol_ = fs::path(root_) / "pods" / kUid / "volumes" / kPlugin / kVolume;
    fs::create_directories(vol_);
    fs::create_directories(fs::path(root_) / "views");
  }
  void TearDown() override {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) {
      ::umount2(it->c_str(), MNT_DETACH);
    }
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Publishes `payload` as the volume's new version; the version it replaced is removed at once
  // (its bound files live on, with "//deleted" roots).
  std::string Publish(const atomicwriter::Payload& payload, bool keep_replaced = false) {
    atomicwriter::Options options;
    if (!keep_replaced) options.replaced_version = atomicwriter::ReplacedVersion::kAtOnce;
    auto writer = atomicwriter::AtomicWriter::Open(vol_.string(), options);
    EXPECT_TRUE(writer.ok()) << writer.status().message();
    auto result = (*writer)->Write(payload);
    EXPECT_TRUE(result.ok()) << result.status().message();
    return result.ok() ? result->ts_dir : "";
  }
  static atomicwriter::Payload Files(std::map<std::string, std::string> files) {
    atomicwriter::Payload p;
    for (auto& [path, data] : files) p[path].data = data;
    return p;
  }

  fs::path BindPath(const std::string& container, size_t index) const {
    return fs::path(root_) / SubPathBindRel(kUid, kVolume, container, index);
  }

  // The kubelet's bind: `source` opened without following links, its /proc/self/fd path bound
  // onto a new placeholder at the container's index. False (and `why_`) when mounting fails.
  bool KubeletBind(const fs::path& source, const std::string& container, size_t index) {
    const fs::path target = BindPath(container, index);
    fs::create_directories(target.parent_path());
    const bool dir = fs::is_directory(fs::symlink_status(source));
    if (dir) {
      fs::create_directories(target);
    } else if (!fs::exists(fs::symlink_status(target))) {
      WriteFile(target, "");
    }
    const base::UniqueFd fd(
        ::open(source.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : 0)));
    if (!fd.valid()) {
      why_ = "open " + source.string() + ": " + std::strerror(errno);
      return false;
    }
    return Mount(atomicwriter::FdPath(fd.get()), target);
  }
  // The live file `<vol>/..data/<name>` as the kubelet resolves it.
  fs::path LiveFile(const std::string& name) const {
    return vol_ / fs::read_symlink(vol_ / "..data") / name;
  }
  // A second bind of the subpath bind: what the container sees.
  fs::path ContainerView(const std::string& container, size_t index) {
    const fs::path view = fs::path(root_) / "views" / (container + "-" + std::to_string(index));
    WriteFile(view, "");
    EXPECT_TRUE(Mount(BindPath(container, index).string(), view)) << why_;
    return view;
  }
  bool Mount(const std::string& source, const fs::path& target) {
    if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      why_ = "mount --bind " + source + " " + target.string() + ": " + std::strerror(errno);
      return false;
    }
    mounts_.push_back(target);
    return true;
  }
  void Unmount(const fs::path& target) {
    ASSERT_EQ(::umount2(target.c_str(), MNT_DETACH), 0) << std::strerror(errno);
    std::erase(mounts_, target);
  }

  std::vector<SubPathCopy> Update(const atomicwriter::Payload& payload,
                                  std::vector<SubPathMount> mounts, const std::string& version,
                                  std::function<void(SubPathStage)> pause = nullptr,
                                  atomicwriter::Env* env = atomicwriter::PosixEnv()) {
    SubPathUpdateRequest request;
    request.location = VolumeLocation{root_, kUid, kPlugin, kVolume};
    request.payload = &payload;
    request.version = version;
    request.mounts = std::move(mounts);
    request.pause_for_testing = std::move(pause);
    return UpdateSubPaths(*env, request);
  }

  std::string root_;
  fs::path vol_;
  std::vector<fs::path> mounts_;
  std::string why_;
};

TEST_F(SubPathUpdateTest, TheContainersViewGetsTheNewBytesAndARestartedContainerIsCurrent) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const std::string v1 = Publish(Files({{"app.conf", "listen 80;\n"}, {"other", "o"}}));
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
  const fs::path view = ContainerView("app", 0);
  const std::vector<SubPathMount> mounts = {{"app", 0, "app.conf", ""}};

  // The same bytes: nothing to write.
  auto copies = Update(Files({{"app.conf", "listen 80;\n"}, {"other", "o"}}), mounts, v1);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].result, SubPathResult::kCurrent) << copies[0].reason;

  // A swap: the old version dir is gone at once, the bind holds its orphaned file.
  const auto v2_payload = Files({{"app.conf", "listen 8080; # longer than before\n"}});
  const std::string v2 = Publish(v2_payload);
  ASSERT_FALSE(fs::exists(vol_ / v1));
  EXPECT_EQ(vmtest::ReadFile(view.string()), "listen 80;\n");  // as the kubelet leaves it
  copies = Update(v2_payload, mounts, v2);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
  EXPECT_EQ(copies[0].version, v2);
  EXPECT_EQ(copies[0].bound_version, v1);
  EXPECT_EQ(vmtest::ReadFile(view.string()), "listen 8080; # longer than before\n");

  // Shorter: written, then truncated.
  const auto v3_payload = Files({{"app.conf", "x\n"}});
  const std::string v3 = Publish(v3_payload);
  copies = Update(v3_payload, mounts, v3);
  EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
  EXPECT_EQ(vmtest::ReadFile(view.string()), "x\n");

  // The container restarts: the kubelet binds the live file, which is never written in place.
  Unmount(view);
  Unmount(BindPath("app", 0));
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
  struct stat before {};
  ASSERT_EQ(::stat(LiveFile("app.conf").c_str(), &before), 0);
  copies = Update(Files({{"app.conf", "not what the live file holds\n"}}), mounts, v3);
  EXPECT_EQ(copies[0].result, SubPathResult::kCurrent) << copies[0].reason;
  EXPECT_EQ(copies[0].version, v3);
  EXPECT_EQ(vmtest::ReadFile(LiveFile("app.conf").string()), "x\n");
}

// Every system call of a copy failed in turn (EIO, ENOSPC, EINTR where a caller sees it): the
// copy is reported failed naming the cause, or done; the volume itself is never written; and the
// copy made again without the fault brings the bound file to the new bytes.
TEST_F(SubPathUpdateTest, ACopyFailedAtAnyCallNamesItsCauseAndIsDoneWhenMadeAgain) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const std::string old_bytes = "old bytes, longer than the new ones\n";
  Publish(Files({{"app.conf", old_bytes}}));
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
  const auto v2_payload = Files({{"app.conf", "new\n"}});
  const std::string v2 = Publish(v2_payload);
  const fs::path bound = BindPath("app", 0);
  const auto live = atomicwriter::VisibleContent(vol_.string());
  const std::vector<SubPathMount> mounts = {{"app", 0, "app.conf", ""}};
  atomicwriter::FaultInjectionEnv env(atomicwriter::PosixEnv());
  std::vector<SubPathCopy> copies;
  const auto calls = atomicwriter::FailEachCallInTurn(
      env, [&] { WriteFile(bound, old_bytes); },
      [&] { copies = Update(v2_payload, mounts, v2, nullptr, &env); },
      [&](const atomicwriter::FaultRun& r) {
        SCOPED_TRACE(r.Describe());
        ASSERT_TRUE(r.reached);
        ASSERT_EQ(copies.size(), 1u);
        EXPECT_EQ(atomicwriter::VisibleContent(vol_.string()), live);
        if (copies[0].result == SubPathResult::kUpdated) {
          EXPECT_EQ(vmtest::ReadFile(bound.string()), "new\n");
        } else {
          EXPECT_EQ(copies[0].result, SubPathResult::kFailed) << copies[0].reason;
          EXPECT_NE(copies[0].reason.find(std::strerror(r.err)), std::string::npos)
              << copies[0].reason;
        }
        copies = Update(v2_payload, mounts, v2);
        ASSERT_EQ(copies.size(), 1u);
        EXPECT_NE(copies[0].result, SubPathResult::kFailed) << copies[0].reason;
        EXPECT_EQ(vmtest::ReadFile(bound.string()), "new\n");
      });
  EXPECT_GT(calls.size(), 10u);
}

// Issue 42: every subPath check read the whole of /proc/self/mountinfo (once for the volume, once
// per bind): O(mounts) per subPath mount on a node with thousands of mounts. The checks of a
// write share one read while no mount changes; a bind made since is still found.
TEST_F(SubPathUpdateTest, TheChecksOfAWriteShareOneReadOfTheMountTable) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const auto v1_payload =
      Files({{"a.conf", "a1"}, {"b.conf", "b1"}, {"c.conf", "c1"}, {"d.conf", "d1"}});
  Publish(v1_payload);
  std::vector<SubPathMount> mounts;
  size_t index = 0;
  for (const char* name : {"a.conf", "b.conf", "c.conf", "d.conf"}) {
    ASSERT_TRUE(KubeletBind(LiveFile(name), "app", index)) << why_;
    mounts.push_back({"app", index++, name, ""});
  }
  const auto v2_payload =
      Files({{"a.conf", "a2"}, {"b.conf", "b2"}, {"c.conf", "c2"}, {"d.conf", "d2"}});
  const std::string v2 = Publish(v2_payload);
  const uint64_t before = atomicwriter::MountTableReadsForTesting();
  auto copies = Update(v2_payload, mounts, v2);
  const uint64_t reads = atomicwriter::MountTableReadsForTesting() - before;
  ASSERT_EQ(copies.size(), 4u);
  for (const auto& c : copies) EXPECT_EQ(c.result, SubPathResult::kUpdated) << c.reason;
  // One read for the volume and its 4 binds (one more at most for a test elsewhere that mounts
  // meanwhile, in this mount namespace), not one per check.
  EXPECT_LE(reads, 2u) << "one read per check";

  // A bind made after that read is found all the same: the table is read again once it changed.
  ASSERT_TRUE(KubeletBind(LiveFile("a.conf"), "late", 0)) << why_;
  const auto v3_payload =
      Files({{"a.conf", "a3"}, {"b.conf", "b3"}, {"c.conf", "c3"}, {"d.conf", "d3"}});
  const std::string v3 = Publish(v3_payload, /*keep_replaced=*/true);
  copies = Update(v3_payload, {{"late", 0, "a.conf", ""}}, v3);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
}

// The kubelet publishes a newer version and re-binds the subPath to its file (a container restart)
// while a copy of the older version's bytes is under way: whether the re-bind comes before the
// bound file is opened or after, the newer version's live file keeps its bytes.
TEST_F(SubPathUpdateTest, AReBindToANewerVersionDuringACopyIsNeverWrittenInPlace) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const std::vector<SubPathMount> mounts = {{"app", 0, "app.conf", ""}};
  for (const SubPathStage stage : {SubPathStage::kViewed, SubPathStage::kOpened}) {
    SCOPED_TRACE(stage == SubPathStage::kViewed ? "re-bound before the open" : "after the open");
    const std::string v1 = Publish(Files({{"app.conf", "v1\n"}}));
    ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
    const std::string v2 = Publish(Files({{"app.conf", "v2 from the daemon\n"}}));
    const auto v2_payload = Files({{"app.conf", "v2 from the daemon\n"}});
    std::string v3;
    auto copies = Update(v2_payload, mounts, v2, [&](SubPathStage at) {
      if (at != stage || !v3.empty()) return;
      // The kubelet's newer version, and the restarted container's bind of its file.
      v3 = Publish(Files({{"app.conf", "v3 from the kubelet\n"}}));
      Unmount(BindPath("app", 0));
      ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
    });
    ASSERT_FALSE(v3.empty());
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(vmtest::ReadFile(LiveFile("app.conf").string()), "v3 from the kubelet\n");
    if (stage == SubPathStage::kViewed) {
      // The bind now holds the live file: current, as published.
      EXPECT_EQ(copies[0].result, SubPathResult::kCurrent) << copies[0].reason;
      EXPECT_EQ(copies[0].version, v3);
      EXPECT_EQ(vmtest::ReadFile(BindPath("app", 0).string()), "v3 from the kubelet\n");
    } else {
      // The opened file was v1's, unpublished for good: written, the live file untouched.
      EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
    }
    Unmount(BindPath("app", 0));
  }
}

// One writer per node: a copy run by an operation whose write gate has closed (the node's lock
// lost) writes nothing, and says why.
TEST_F(SubPathUpdateTest, NothingIsWrittenOnceTheNodesLockIsLost) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const std::string v1 = Publish(Files({{"app.conf", "v1\n"}}));
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
  const auto v2_payload = Files({{"app.conf", "v2\n"}});
  const std::string v2 = Publish(v2_payload);
  WriteGate gate("daemon-a");
  gate.Close();
  std::vector<SubPathCopy> copies;
  {
    WriteGate::Scope scope(&gate);
    copies = Update(v2_payload, {{"app", 0, "app.conf", ""}}, v2);
  }
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].result, SubPathResult::kRefused);
  EXPECT_NE(copies[0].reason.find("no longer holds the node's lock (daemon-a)"), std::string::npos)
      << copies[0].reason;
  EXPECT_EQ(vmtest::ReadFile(BindPath("app", 0).string()), "v1\n");
  // The gate open again (the lock re-taken): written.
  gate.OpenForever();
  {
    WriteGate::Scope scope(&gate);
    copies = Update(v2_payload, {{"app", 0, "app.conf", ""}}, v2);
  }
  EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
  EXPECT_EQ(vmtest::ReadFile(BindPath("app", 0).string()), "v2\n");
}

TEST_F(SubPathUpdateTest, SubPathThroughDataAndANestedPathAndInitContainers) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const std::string v1 = Publish(Files({{"conf/app.yaml", "a: 1\n"}, {"k", "1"}}));
  ASSERT_TRUE(KubeletBind(LiveFile("conf/app.yaml"), "app", 1)) << why_;
  ASSERT_TRUE(KubeletBind(LiveFile("k"), "init", 0)) << why_;
  const auto next = Files({{"conf/app.yaml", "a: 2\n"}, {"k", "2"}});
  const std::string v2 = Publish(next, /*keep_replaced=*/true);
  // The removal queue claims a version by renaming it before removing it: the binds' roots
  // follow the rename.
  const std::string claimed = std::string(atomicwriter::kRemovingPrefix) + "00000000000000aa";
  fs::rename(vol_ / v1, vol_ / claimed);
  auto copies = Update(next, {{"init", 0, "..data/k", ""}, {"app", 1, "conf/app.yaml", ""}}, v2);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
  EXPECT_EQ(copies[1].result, SubPathResult::kUpdated) << copies[1].reason;
  EXPECT_EQ(copies[0].bound_version, claimed);
  EXPECT_EQ(vmtest::ReadFile(BindPath("init", 0).string()), "2");
  EXPECT_EQ(vmtest::ReadFile(BindPath("app", 1).string()), "a: 2\n");
}

TEST_F(SubPathUpdateTest, AKeyRemovedOrADirectoryOrASubPathExprLeavesTheBoundFileAsItWas) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  Publish(Files({{"app.conf", "old"}, {"conf/a", "a"}}));
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
  ASSERT_TRUE(KubeletBind(LiveFile("conf"), "app", 1)) << why_;  // a directory subPath
  const auto next = Files({{"conf/a", "b"}});
  const std::string v2 = Publish(next);
  auto copies = Update(next,
                       {{"app", 0, "app.conf", ""},
                        {"app", 1, "conf", ""},
                        {"app", 2, "$(X)", "subPathExpr is not updated: why"}},
                       v2);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0].result, SubPathResult::kRefused);
  EXPECT_NE(copies[0].reason.find("no longer in the volume"), std::string::npos);
  EXPECT_EQ(copies[1].result, SubPathResult::kRefused);
  EXPECT_NE(copies[1].reason.find("names a directory of the volume"), std::string::npos);
  EXPECT_EQ(copies[2].result, SubPathResult::kRefused);
  EXPECT_EQ(copies[2].reason, "subPathExpr is not updated: why");
  EXPECT_EQ(vmtest::ReadFile(BindPath("app", 0).string()), "old");
}

// Issue 42, item 6c: the kubelet binds a subPath file when the container starts, to the file of
// the version live then. A container that has not started (an init container still running, an
// image being pulled) has nothing bound: nothing is stale and nothing failed. It was refused, and
// the refusal posted as a FailedSubPathUpdate Warning at every write of the volume.
TEST_F(SubPathUpdateTest, AContainerThatHasNotStartedHasNothingBoundAndThatIsNoRefusal) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  Publish(Files({{"app.conf", "v1"}}));
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "init", 0)) << why_;  // started: bound
  const auto next = Files({{"app.conf", "v2"}});
  const std::string v2 = Publish(next);
  // "app" has not started: no dir of its own yet; index 1 of "init" was never bound. Nothing
  // bound is nothing to refuse either (index 1 of "app": a key the volume no longer has).
  auto copies = Update(next,
                       {{"init", 0, "app.conf", ""},
                        {"app", 0, "app.conf", ""},
                        {"init", 1, "app.conf", ""},
                        {"app", 1, "gone", ""}},
                       v2);
  ASSERT_EQ(copies.size(), 4u);
  EXPECT_EQ(copies[0].result, SubPathResult::kUpdated) << copies[0].reason;
  for (size_t i : {1u, 2u, 3u}) {
    SCOPED_TRACE(i);
    EXPECT_STREQ(SubPathResultName(copies[i].result), "not_bound") << copies[i].reason;
    EXPECT_NE(copies[i].reason.find("has not started"), std::string::npos) << copies[i].reason;
    EXPECT_FALSE(copies[i].binds_invisible);
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(BindPath("app", 0)))) << "nothing created";

  // "app" starts: the kubelet binds the live file, which is current.
  ASSERT_TRUE(KubeletBind(LiveFile("app.conf"), "app", 0)) << why_;
  copies = Update(next, {{"app", 0, "app.conf", ""}}, v2);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].result, SubPathResult::kCurrent) << copies[0].reason;
}

TEST_F(SubPathUpdateTest, HostileTargetsAreLeftUntouchedAndSayWhy) {
  VM_SKIP_UNLESS_ROOT("bind-mounts files as the kubelet does for subPath");
  const std::string v1 = Publish(Files({{"app.conf", "old"}, {"other", "other-old"}}));
  const fs::path old_version = vol_ / v1;
  const fs::path victim = fs::path(root_) / "victim";
  WriteFile(victim, "victim");

  // index 0: a symlink to a victim file where the kubelet's bind should be.
  fs::create_directories(BindPath("app", 0).parent_path());
  fs::create_symlink(victim, BindPath("app", 0));
  // index 1: an unrelated file bound there.
  ASSERT_TRUE(KubeletBind(victim, "app", 1)) << why_;
  // index 2: a file of the volume, but another key than the mount's subPath (a wrong index).
  ASSERT_TRUE(KubeletBind(LiveFile("other"), "app", 2)) << why_;
  // index 3: a directory bound where the file should be.
  ASSERT_TRUE(KubeletBind(old_version, "app", 3)) << why_;
  // index 4: an empty placeholder that is no mount point (binds invisible to this process).
  WriteFile(BindPath("app", 4), "");

  atomicwriter::Options keep;  // the old version stays, so index 3's dir can be compared
  auto writer = atomicwriter::AtomicWriter::Open(vol_.string(), keep);
  ASSERT_TRUE(writer.ok());
  const auto next = Files({{"app.conf", "new"}, {"other", "other-new"}});
  auto written = (*writer)->Write(next);
  ASSERT_TRUE(written.ok());
  std::vector<SubPathMount> mounts;
  for (size_t i = 0; i < 5; ++i) mounts.push_back({"app", i, "app.conf", ""});
  auto copies = Update(next, mounts, written->ts_dir);
  ASSERT_EQ(copies.size(), 5u);
  for (const SubPathCopy& c : copies) {
    SCOPED_TRACE(c.index);
    EXPECT_EQ(c.result, SubPathResult::kRefused) << c.reason;
  }
  EXPECT_NE(copies[0].reason.find("a symlink, not the kubelet's bind; not followed"),
            std::string::npos)
      << copies[0].reason;
  EXPECT_NE(copies[1].reason.find("not to the file \"app.conf\" of this volume"), std::string::npos)
      << copies[1].reason;
  EXPECT_NE(copies[2].reason.find("not to the file \"app.conf\" of this volume"), std::string::npos)
      << copies[2].reason;
  EXPECT_NE(copies[3].reason.find("a directory is bound there"), std::string::npos)
      << copies[3].reason;
  EXPECT_NE(copies[4].reason.find("HostToContainer"), std::string::npos) << copies[4].reason;
  EXPECT_TRUE(copies[4].binds_invisible);
  EXPECT_FALSE(copies[1].binds_invisible);

  EXPECT_EQ(vmtest::ReadFile(victim.string()), "victim");
  EXPECT_EQ(vmtest::ReadFile(BindPath("app", 2).string()), "other-old");
  EXPECT_EQ(vmtest::ReadFile((old_version / "app.conf").string()), "old");
  EXPECT_EQ(vmtest::ReadFile(BindPath("app", 4).string()), "");
}

}  // namespace
}  // namespace volumemanager
