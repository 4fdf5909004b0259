// Bounded memory: what the daemon keeps per pod and per volume goes away with the pod, whether
// its volumes mounted or never did, in standalone mode and beside the kubelet. The volume manager
// with the real plugins and the standalone object store on a temporary root dir.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/volume_inspector.h"
#include "cache/local_object_store.h"
#include "tests/support/test_loop.h"
#include "volumemanager/state/volume_paths.h"
#include "volumemanager/test_pods.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {
namespace {

kube::Pod PodReading(const std::string& uid, const std::string& config_map) {
  return PodReadingConfigMap(uid, config_map);
}

// Everything the manager and the store keep per pod or per volume, as one comparable value; the
// kubelet-ownership state too (zero in standalone mode): the reconciler's volumes waiting for the
// kubelet and its fetch, verify and set-up-seen state, the populator's volumes left to the
// kubelet, and the dir watcher's ids and kernel watches.
struct Sizes {
  size_t executor, desired, read_objects, actual, early_requests, records, pending, ledgers,
      cleanups_due, pods, terminating, resync, store_pods, store_refs, kubelet_waits, fetch_state,
      left_to_kubelet, watched, kernel_watches;
  bool operator==(const Sizes&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Sizes& s) {
  return os << "executor " << s.executor << ", desired " << s.desired << ", read objects "
            << s.read_objects << ", actual " << s.actual << ", early requests " << s.early_requests
            << ", volume records " << s.records << ", pending " << s.pending << ", ledgers "
            << s.ledgers << ", cleanups due " << s.cleanups_due << ", pods " << s.pods
            << ", terminating " << s.terminating << ", resync " << s.resync << ", store pods "
            << s.store_pods << ", store refs " << s.store_refs << ", waiting for the kubelet "
            << s.kubelet_waits << ", fetch state " << s.fetch_state << ", left to the kubelet "
            << s.left_to_kubelet << ", watched ids " << s.watched << ", kernel watches "
            << s.kernel_watches;
}

Sizes SizesOf(const VolumeManager& m, const cache::LocalObjectStore& store) {
  const VolumeDirWatcherStats watcher = m.dir_watcher().stats();
  return Sizes{m.executor().size(),
               m.desired().volumes().size(),
               m.desired().read_object_count(),
               m.actual().volumes().size(),
               m.actual().early_request_count(),
               m.reconciler().record_count(),
               m.reconciler().pending_count(),
               m.reconciler().ledger_count(),
               m.reconciler().cleanup_due_count(),
               m.populator().pods().size(),
               m.populator().terminating_count(),
               m.resync_schedule_size(),
               store.RegisteredPodCount(),
               store.ReferencedObjectCount(),
               m.reconciler().waiting_for_kubelet_count(),
               m.reconciler().fetch_state_count(),
               m.populator().left_to_kubelet().size(),
               watcher.armed + watcher.polled + watcher.unarmed,
               watcher.kernel_watches};
}

// What the kubelet does at a pod's first sync: the volume dir, and its content.
void KubeletSetsUp(const std::string& dir, const std::string& value) {
  std::filesystem::create_directories(dir);
  auto w = atomicwriter::AtomicWriter::Open(dir, {});
  ASSERT_TRUE(w.ok()) << w.status().message();
  atomicwriter::Payload payload;
  payload["k"] = atomicwriter::FileProjection{value, 0644, std::nullopt};
  auto r = (*w)->Write(payload, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
}

// The manager on a real loop, with a local object store holding ConfigMap "app" and dirs of its
// own; the log off (thousands of FailedMount lines say nothing here).
class MemoryBoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    level_ = spdlog::get_level();
    spdlog::set_level(spdlog::level::off);
    vmtest::WriteFile(objects_.File("app.yaml"),
                      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: v\n");
    cache::LocalObjectStoreOptions store_options;
    store_options.dir = objects_.path();
    ASSERT_TRUE(store.Start(loop.get(), store_options).ok());
    ASSERT_TRUE(dirs.ok());
  }

  void TearDown() override {
    if (manager_ != nullptr) {
      bool stopped = false;
      manager_->Stop([&] { stopped = true; });
      EXPECT_TRUE(loop.RunUntil([&] { return stopped; }));
    }
    store.Stop();
    spdlog::set_level(level_);
  }

  void StartManager(const VolumeManagerOptions& o) {
    manager_ = std::make_unique<VolumeManager>(loop.get(), o, &store, registry_.get(),
                                               [] { return true; });
    store.SetChangeHandler([this](const kube::ObjectRef& r) { manager_->OnObjectChanged(r); });
    manager_->Start();
    ASSERT_TRUE(loop.RunUntil([&] { return manager_->reconstructed(); }));
  }

  vmtest::TestLoop loop;
  TestManagerDirs dirs;
  cache::LocalObjectStore store;
  std::unique_ptr<VolumeManager> manager_;

 private:
  spdlog::level::level_enum level_ = spdlog::level::info;
  vmtest::TempDir objects_;
  std::unique_ptr<plugins::PluginRegistry> registry_ = plugins::PluginRegistry::NewDefault();
};

TEST_F(MemoryBoundTest, TenThousandPodsAddedAndRemovedLeaveNothingBehind) {
  ASSERT_NO_FATAL_FAILURE(StartManager(dirs.Options()));
  VolumeManager& manager = *manager_;
  const Sizes start = SizesOf(manager, store);

  // One pod in ten mounts; the others reference a ConfigMap that does not exist, so their
  // volumes never mount and only back off.
  constexpr int kPods = 10'000;
  std::vector<podconfig::PodPtr> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(std::make_shared<const kube::Pod>(
        PodReading("p" + std::to_string(i), i % 10 == 0 ? "app" : "missing")));
  }
  manager.OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kAdd, pods, "file"});
  // Generous bounds against hangs, not timing: 1,000 mounts and teardowns each commit to the
  // ownership journal, slow under the sanitizers on a busy disk.
  constexpr auto kLimit = std::chrono::minutes(5);
  ASSERT_TRUE(loop.RunUntil(
      [&] {
        return manager.stats().mounts_ok == kPods / 10 &&
               manager.stats().mounts_failed >= kPods - kPods / 10;
      },
      kLimit));
  EXPECT_GE(manager.executor().size(), static_cast<size_t>(kPods - kPods / 10));

  manager.OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kRemove, pods, "file"});
  loop.RunUntil([&] { return SizesOf(manager, store) == start; }, kLimit);
  EXPECT_EQ(SizesOf(manager, store), start);
  EXPECT_EQ(manager.stats().teardowns_ok, kPods / 10);
}

// A pod's UID (36 characters, past std::string's inline capacity) is held once: the desired
// state's key, its index by object and the actual state's key share one string, not a heap copy
// each.
TEST_F(MemoryBoundTest, APodsUidIsOneStringSharedByEveryKeyOfItsVolume) {
  ASSERT_NO_FATAL_FAILURE(StartManager(dirs.Options()));
  VolumeManager& manager = *manager_;
  const std::string uid = "0f8e1c5a-3b7d-4e2a-9c61-5d4b3a2f1e0d";
  manager.OnPodUpdate(podconfig::PodUpdate{
      podconfig::PodOp::kAdd, {std::make_shared<const kube::Pod>(PodReading(uid, "app"))}, "file"});
  ASSERT_TRUE(loop.RunUntil([&] { return manager.stats().mounts_ok == 1; }));

  ASSERT_EQ(manager.desired().volumes().size(), 1u);
  ASSERT_EQ(manager.actual().volumes().size(), 1u);
  const auto& [desired_key, desired] = *manager.desired().volumes().begin();
  const auto& [actual_key, actual] = *manager.actual().volumes().begin();
  const std::string* held = &desired_key.pod_uid.str();
  EXPECT_EQ(*held, uid);
  EXPECT_EQ(&actual_key.pod_uid.str(), held);
  const std::vector<VolumeKey> readers = manager.desired().VolumesReading(
      kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", "app"});
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(&readers.front().pod_uid.str(), held);
}

// Beside the kubelet (--volume-ownership kubelet), pods come and go, twice over: a third
// of them set up by the kubelet before they arrive (refreshed, their dirs watched, one swapped
// by the kubelet again: verified and fetched fresh), a third never set up (waiting for the
// kubelet, checked again and again), a third set up but reading a ConfigMap that does not exist
// (failing and backing off). Once every pod is gone, and the kubelet has torn their volumes down,
// nothing of them is left: no wait, fetch, verify or set-up-seen entry, no watch.
TEST_F(MemoryBoundTest, PodsComingAndGoingBesideTheKubeletLeaveNothingBehind) {
  VolumeManagerOptions o = dirs.Options();
  o.kubelet_owns_volumes = true;
  ASSERT_NO_FATAL_FAILURE(StartManager(o));
  VolumeManager& manager = *manager_;
  const Sizes start = SizesOf(manager, store);

  constexpr int kPerKind = 200;
  constexpr auto kLimit = std::chrono::minutes(5);  // against hangs, not timing
  for (int round = 0; round < 2; ++round) {
    const std::string r = "r" + std::to_string(round) + "-";
    std::vector<podconfig::PodPtr> pods;
    std::vector<std::string> set_up;
    for (int i = 0; i < 3 * kPerKind; ++i) {
      const std::string uid = r + "p" + std::to_string(i);
      const int kind = i % 3;  // 0: set up, 1: never set up, 2: set up, object missing
      pods.push_back(std::make_shared<const kube::Pod>(
          PodReadingConfigMap(uid, kind == 2 ? "missing" : "app")));
      if (kind != 1) {
        const std::string dir = VolumeDir(dirs.root(), uid, "kubernetes.io~configmap", "cfg");
        KubeletSetsUp(dir, "old");
        if (kind == 0) set_up.push_back(dir);
      }
    }
    const ReconcilerStats before = manager.stats();
    manager.OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kAdd, pods, "file"});
    ASSERT_TRUE(loop.RunUntil(
        [&] {
          const ReconcilerStats& now = manager.stats();
          return now.refreshes_ok - before.refreshes_ok >= kPerKind &&
                 now.mounts_failed - before.mounts_failed >= kPerKind &&
                 manager.reconciler().waiting_for_kubelet_count() ==
                     static_cast<size_t>(kPerKind) &&
                 manager.dir_watcher().stats().armed == static_cast<size_t>(kPerKind);
        },
        kLimit))
        << SizesOf(manager, store);
    EXPECT_EQ(manager.dir_watcher().stats().kernel_watches, static_cast<size_t>(kPerKind));
    // The kubelet swaps one volume from its own cache: verified, and corrected after a fresh read.
    KubeletSetsUp(set_up.front(), "older");
    ASSERT_TRUE(loop.RunUntil([&] { return manager.stats().foreign_swaps > before.foreign_swaps; },
                              kLimit));
    ASSERT_TRUE(loop.RunUntil(
        [&] { return atomicwriter::VisibleContent(set_up.front()).at("k") == "v"; }, kLimit));

    manager.OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kRemove, pods, "file"});
    ASSERT_TRUE(loop.RunUntil(
        [&] {
          return manager.stats().released_to_kubelet - before.released_to_kubelet >= kPerKind;
        },
        kLimit));
    // The kubelet tears the volumes down once their pods are gone.
    for (int i = 0; i < 3 * kPerKind; ++i) {
      std::filesystem::remove_all(dirs.root() + "/pods/" + r + "p" + std::to_string(i));
    }
    loop.RunUntil([&] { return SizesOf(manager, store) == start; }, kLimit);
    EXPECT_EQ(SizesOf(manager, store), start) << "round " << round;
  }
  EXPECT_EQ(manager.stats().teardowns_ok + manager.stats().teardowns_not_owned, 0)
      << "the kubelet's volumes are never the daemon's to tear down";
}

}  // namespace
}  // namespace volumemanager
