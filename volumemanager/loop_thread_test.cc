// The loop thread does no bulk work: payloads are built (object bytes copied) on the thread pool,
// and a remount whose inputs did not change builds nothing at all. The volume manager with a
// configMap plugin that records the thread of every BuildPayload.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "atomicwriter/volume_inspector.h"
#include "cache/fake_object_manager.h"
#include "tests/support/test_loop.h"
#include "volumemanager/state/volume_paths.h"
#include "volumemanager/test_pods.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {
namespace {

// The real configMap plugin, counting its payload builds on and off the loop thread.
class RecordingPlugin final : public plugins::VolumePlugin {
 public:
  RecordingPlugin(const plugins::VolumePlugin* real, std::thread::id loop_thread)
      : real_(real), loop_thread_(loop_thread) {}

  std::string_view Name() const override { return real_->Name(); }
  plugins::Medium medium() const override { return real_->medium(); }
  bool Supports(const kube::Volume& v) const override { return real_->Supports(v); }
  std::vector<plugins::ObjectRef> ReferencedObjects(const kube::Pod& pod,
                                                    const kube::Volume& v) const override {
    return real_->ReferencedObjects(pod, v);
  }
  bool DependsOnPod(const kube::Volume& v) const override { return real_->DependsOnPod(v); }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& v,
                                                   const plugins::VolumeHost& host) const override {
    (std::this_thread::get_id() == loop_thread_ ? builds_on_loop : builds_off_loop)++;
    return real_->BuildPayload(pod, v, host);
  }

  mutable std::atomic<int> builds_on_loop{0};
  mutable std::atomic<int> builds_off_loop{0};

 private:
  const plugins::VolumePlugin* real_;
  std::thread::id loop_thread_;
};

kube::Pod PodReading(const std::string& uid) { return PodReadingConfigMap(uid, "app"); }

kube::ConfigMap App(const std::string& value) {
  kube::ConfigMap cm;
  cm.metadata.namespace_ = "default";
  cm.metadata.name = "app";
  cm.data = {{"k", value}};
  return cm;
}

TEST(LoopThreadTest, PayloadsAreBuiltOnThePoolAndNotAtAllForUnchangedInputs) {
  vmtest::TestLoop loop;
  TestManagerDirs dirs;
  auto defaults = plugins::PluginRegistry::NewDefault();
  auto recording = std::make_unique<RecordingPlugin>(
      defaults->FindPluginByName("kubernetes.io/configmap"), std::this_thread::get_id());
  RecordingPlugin* plugin = recording.get();
  std::vector<std::unique_ptr<plugins::VolumePlugin>> list;
  list.push_back(std::move(recording));
  plugins::PluginRegistry registry(std::move(list));

  cache::FakeObjectManager objects;
  objects.SetConfigMap(App("v1"));
  ASSERT_TRUE(dirs.ok());
  const VolumeManagerOptions o = dirs.Options();
  VolumeManager manager(loop.get(), o, &objects, &registry, [] { return true; });
  objects.SetChangeHandler([&](const kube::ObjectRef& r) { manager.OnObjectChanged(r); });
  manager.Start();

  constexpr int kPods = 20;
  std::vector<podconfig::PodPtr> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(std::make_shared<const kube::Pod>(PodReading("p" + std::to_string(i))));
  }
  manager.OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kAdd, pods, "file"});
  ASSERT_TRUE(loop.RunUntil([&] { return manager.stats().mounts_ok == kPods; }));
  EXPECT_EQ(plugin->builds_on_loop, 0);
  EXPECT_EQ(plugin->builds_off_loop, kPods);

  // The same data again (a new revision, e.g. a label edit): every volume is looked at, none is
  // rebuilt.
  objects.SetConfigMap(App("v1"));
  ASSERT_TRUE(loop.RunUntil([&] { return manager.stats().remounts_unchanged == kPods; }));
  EXPECT_EQ(plugin->builds_on_loop + plugin->builds_off_loop, kPods);

  objects.SetConfigMap(App("v2"));
  const std::string last =
      VolumeDir(dirs.root(), "p" + std::to_string(kPods - 1), "kubernetes.io~configmap", "cfg");
  ASSERT_TRUE(loop.RunUntil([&] {
    return atomicwriter::VisibleContent(last) == std::map<std::string, std::string>{{"k", "v2"}};
  }));
  EXPECT_EQ(plugin->builds_on_loop, 0);

  bool stopped = false;
  manager.Stop([&] { stopped = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
}

}  // namespace
}  // namespace volumemanager
