// One writer per node in the core: the WriteGate, the executor's check on the pool thread, and the
// volume manager losing the lock with hundreds of writes queued.
#include "volumemanager/disk/write_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "atomicwriter/volume_inspector.h"
#include "cache/fake_object_manager.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/reconciler/operation_executor.h"
#include "volumemanager/state/volume_paths.h"
#include "volumemanager/test_pods.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;
using Clock = WriteGate::Clock;
using std::chrono::milliseconds;

TEST(WriteGateTest, OpenUntilTheDeadlineClosedAtOnceOrForever) {
  WriteGate gate("me");
  const auto t = Clock::now();
  EXPECT_FALSE(gate.Open(t));  // closed until opened
  gate.OpenUntil(t + milliseconds(10));
  EXPECT_TRUE(gate.Open(t));
  EXPECT_TRUE(gate.Open(t + milliseconds(9)));
  EXPECT_FALSE(gate.Open(t + milliseconds(10)));  // the loss deadline, whatever the loop does
  gate.OpenUntil(t + milliseconds(20));           // a renewal moves it
  EXPECT_TRUE(gate.Open(t + milliseconds(19)));
  gate.Close();
  EXPECT_FALSE(gate.Open(t));
  gate.OpenForever();
  EXPECT_TRUE(gate.Open(t + std::chrono::hours(24 * 365)));
  EXPECT_EQ(gate.writer(), "me");
}

class OperationExecutorGateTest : public ::testing::Test {
 protected:
  void SetUp() override { uv_loop_init(&loop_); }
  void TearDown() override { uv_loop_close(&loop_); }
  uv_loop_t loop_;
};

TEST_F(OperationExecutorGateTest, AnOperationTakenUpWhileClosedDoesNotRunAndIsNoFailure) {
  const auto now = OperationExecutor::Clock::time_point{} + std::chrono::hours(1);
  WriteGate gate("w");
  OperationExecutor ex(
      &loop_, [now] { return now; }, &gate);
  const VolumeKey a{"pod", "a"};
  std::atomic<int> ran{0};
  base::Status got;
  // Run does not ask the gate (the loop's view may be late): the pool thread does, when it takes
  // the operation up. (Queued while open and closed before a thread is free: the 500 mounts test
  // below.)
  ASSERT_TRUE(ex.Run(
      a,
      [&] {
        ++ran;
        return base::Status::OK();
      },
      [&](const base::Status& s) { got = s; }));
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_TRUE(IsCancelled(got)) << got.message();
  EXPECT_FALSE(IsCancelled(base::Status::Error("disk full")));
  EXPECT_FALSE(IsCancelled(base::Status::OK()));
  EXPECT_EQ(ex.cancelled(), 1u);
  // No backoff, no last error: it may run again at once.
  EXPECT_TRUE(ex.CanStart(a, now));
  EXPECT_EQ(ex.LastError(a), "");
  EXPECT_EQ(ex.Backoff(a), nullptr);

  // Open again: it runs, and WriteGate::Current() is the gate while it does.
  gate.OpenForever();
  const WriteGate* current = nullptr;
  ASSERT_TRUE(ex.Run(
      a,
      [&] {
        ++ran;
        current = WriteGate::Current();
        return base::Status::OK();
      },
      [&](const base::Status& s) { got = s; }));
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_TRUE(got.ok());
  EXPECT_EQ(current, &gate);
  EXPECT_EQ(WriteGate::Current(), nullptr);
}

// The configMap plugin, slowed down: each payload takes `delay` to build (on the pool thread), so
// that hundreds of mounts wait in the pool's queue.
class SlowPlugin : public plugins::VolumePlugin {
 public:
  SlowPlugin(const plugins::VolumePlugin* inner, milliseconds delay)
      : inner_(inner), delay_(delay) {}
  std::string_view Name() const override { return inner_->Name(); }
  plugins::Medium medium() const override { return inner_->medium(); }
  bool Supports(const kube::Volume& v) const override { return inner_->Supports(v); }
  std::vector<plugins::ObjectRef> ReferencedObjects(const kube::Pod& p,
                                                    const kube::Volume& v) const override {
    return inner_->ReferencedObjects(p, v);
  }
  bool DependsOnPod(const kube::Volume& v) const override { return inner_->DependsOnPod(v); }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& p, const kube::Volume& v,
                                                   const plugins::VolumeHost& h) const override {
    std::this_thread::sleep_for(delay_);
    return inner_->BuildPayload(p, v, h);
  }

 private:
  const plugins::VolumePlugin* inner_;
  milliseconds delay_;
};

int PoolSize() {
  const char* size = std::getenv("UV_THREADPOOL_SIZE");
  return size != nullptr && std::atoi(size) > 0 ? std::atoi(size) : 4;  // libuv's default
}

TEST(VolumeManagerGateTest, LosingTheLockWithHundredsOfMountsQueuedStopsTheWritesAtOnce) {
  char tmpl[] = "/tmp/write-gate-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  {
    auto journal = OwnershipJournal::Open(root + "-state");
    ASSERT_TRUE(journal.ok()) << journal.status().message();
    auto defaults = plugins::PluginRegistry::NewDefault();
    std::vector<std::unique_ptr<plugins::VolumePlugin>> slow;
    slow.push_back(std::make_unique<SlowPlugin>(
        defaults->FindPluginByName("kubernetes.io/configmap"), milliseconds(10)));
    plugins::PluginRegistry registry(std::move(slow));
    cache::FakeObjectManager objects;
    kube::ConfigMap cm;
    cm.metadata.namespace_ = "default";
    cm.metadata.name = "app";
    cm.data = {{"k", "v"}};
    objects.SetConfigMap(cm);

    vmtest::LogCapture log;
    vmtest::TestLoop loop;
    WriteGate gate("daemon-a");
    gate.OpenForever();
    VolumeManagerOptions o;
    o.root_dir = root;
    o.sync_frequency = std::chrono::hours(1);
    o.journal = journal->journal.get();
    o.unpublished_grace = milliseconds(0);
    o.tmpfs = false;
    o.writer_identity = "daemon-a";
    o.write_gate = &gate;
    VolumeManager manager(loop.get(), o, &objects, &registry, [] { return true; });
    manager.Start();
    constexpr int kPods = 500;
    std::vector<podconfig::PodPtr> pods;
    for (int i = 0; i < kPods; ++i) {
      pods.push_back(std::make_shared<const kube::Pod>(
          PodReadingConfigMap("p" + std::to_string(i), "app", {false, true, false})));
    }
    manager.OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kAdd, pods, "file"});
    auto published = [&] {
      int n = 0;
      for (int i = 0; i < kPods; ++i) {
        n += fs::is_symlink(
            VolumeDir(root, "p" + std::to_string(i), "kubernetes.io~configmap", "cfg") + "/..data");
      }
      return n;
    };
    // A pass queued a window of first mounts (ReconcilerOptions::max_first_mounts_in_flight, 64),
    // the rest due; some have been written.
    ASSERT_TRUE(loop.RunUntil([&] { return manager.stats().mounts_ok >= 20; }));
    const int queued = manager.executor().in_flight();
    ASSERT_GE(queued, 32);

    // The lock is lost and the loop is late to hear of it: only the gate is closed.
    gate.Close();
    const int before = published();
    loop.RunFor(milliseconds(300));
    // Then the loop's own reaction, as the daemon's on_stopped_leading.
    manager.SetWritesAllowed(false);
    ASSERT_TRUE(loop.RunUntil([&] { return manager.executor().in_flight() == 0; }));
    const int after = published();
    EXPECT_LE(after - before, PoolSize()) << "writes completed after the lock was lost";
    // What was queued and not yet running was cancelled (and the window refilled meanwhile, and
    // cancelled too), never written.
    EXPECT_GE(static_cast<int>(manager.executor().cancelled()), queued - PoolSize());
    // Cancelled is no failure: no FailedMount, no backoff.
    EXPECT_EQ(manager.stats().mounts_failed, 0u);
    const std::string text = log.text();
    EXPECT_EQ(text.find("FailedMount"), std::string::npos);
    // Each operation that finished after the loss is logged with its writer.
    const std::regex late("Operation finished after the node's lock was lost.*writer=\"daemon-a\"");
    const auto late_lines = static_cast<int>(std::distance(
        std::sregex_iterator(text.begin(), text.end(), late), std::sregex_iterator()));
    EXPECT_LE(late_lines, PoolSize());
    EXPECT_GE(late_lines, after - before);
    for (int i = 0; i < kPods; ++i) {
      EXPECT_EQ(manager.executor().LastError({"p" + std::to_string(i), "cfg"}), "");
    }

    // Writes allowed again: every volume stayed due and is written.
    gate.OpenForever();
    manager.SetWritesAllowed(true);
    EXPECT_TRUE(loop.RunUntil([&] { return published() == kPods; }, std::chrono::seconds(60)));
    bool stopped = false;
    manager.Stop([&] { stopped = true; });
    EXPECT_TRUE(loop.RunUntil([&] { return stopped; }));
    EXPECT_TRUE(loop.Close());
  }
  fs::remove_all(root);
  fs::remove_all(root + "-state");
}

}  // namespace
}  // namespace volumemanager
