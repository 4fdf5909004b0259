// Bounded memory: what the daemon keeps per pod and per volume goes away with the pod, whether
// its volumes mounted or never did. The volume manager with the real plugins and the standalone
// object store on a temporary root dir.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/local_object_store.h"
#include "tests/support/test_loop.h"
#include "volumemanager/test_pods.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {
namespace {

kube::Pod PodReading(const std::string& uid, const std::string& config_map) {
  return PodReadingConfigMap(uid, config_map);
}

// Everything the manager and the store keep per pod or per volume, as one comparable value.
struct Sizes {
  size_t executor, desired, read_objects, actual, early_requests, records, pending, ledgers,
      cleanups_due, pods, terminating, resync, store_pods, store_refs;
  bool operator==(const Sizes&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Sizes& s) {
  return os << "executor " << s.executor << ", desired " << s.desired << ", read objects "
            << s.read_objects << ", actual " << s.actual << ", early requests " << s.early_requests
            << ", volume records " << s.records << ", pending " << s.pending << ", ledgers "
            << s.ledgers << ", cleanups due " << s.cleanups_due << ", pods " << s.pods
            << ", terminating " << s.terminating << ", resync " << s.resync << ", store pods "
            << s.store_pods << ", store refs " << s.store_refs;
}

Sizes SizesOf(const VolumeManager& m, const cache::LocalObjectStore& store) {
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
               store.ReferencedObjectCount()};
}

TEST(MemoryBoundTest, TenThousandPodsAddedAndRemovedLeaveNothingBehind) {
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::off);  // 9,000 FailedMount lines say nothing here
  vmtest::TestLoop loop;
  TestManagerDirs dirs;
  vmtest::TempDir objects;
  vmtest::WriteFile(objects.File("app.yaml"),
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: v\n");
  cache::LocalObjectStore store;
  cache::LocalObjectStoreOptions store_options;
  store_options.dir = objects.path();
  ASSERT_TRUE(store.Start(loop.get(), store_options).ok());

  ASSERT_TRUE(dirs.ok());
  const VolumeManagerOptions o = dirs.Options();
  auto registry = plugins::PluginRegistry::NewDefault();
  VolumeManager manager(loop.get(), o, &store, registry.get(), [] { return true; });
  store.SetChangeHandler([&](const kube::ObjectRef& r) { manager.OnObjectChanged(r); });
  manager.Start();
  ASSERT_TRUE(loop.RunUntil([&] { return manager.reconstructed(); }));
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

  bool stopped = false;
  manager.Stop([&] { stopped = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
  store.Stop();
  spdlog::set_level(level);
}

}  // namespace
}  // namespace volumemanager
