// The volume manager on a real libuv loop and a temporary root dir, with the real plugins and a
// fake object manager (cache/fake_object_manager.h).
#include "volumemanager/volume_manager.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "atomicwriter/volume_inspector.h"
#include "cache/fake_object_manager.h"
#include "cache/fake_token_manager.h"
#include "cache/read_policy.h"
#include "reload/reload_spec.h"
#include "tests/support/http_listener.h"
#include "tests/support/skip.h"
#include "tests/support/test_loop.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/state/volume_paths.h"
#include "volumemanager/test_pods.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

kube::Pod MakePod(const std::string& uid, const std::string& cm, bool optional = false,
                  bool mounted = true) {
  return PodReadingConfigMap(uid, cm, {optional, mounted, /*with_scratch=*/true});
}

// A pod whose container mounts "cfg" (ConfigMap `app`) and "extra" (ConfigMap `other`), with a
// reload action to `port`: standalone, a pod without an IP is called on 127.0.0.1.
kube::Pod ReloadingPod(const std::string& uid, uint16_t port, const std::string& delay) {
  kube::Pod pod = PodReadingConfigMap(uid, "app");
  kube::Volume extra;
  extra.name = "extra";
  kube::ConfigMapVolumeSource src;
  src.name = "other";
  src.default_mode = 0644;
  extra.source = src;
  pod.spec.volumes.push_back(extra);
  pod.spec.containers[0].volume_mounts.push_back(
      kube::VolumeMount{"extra", "/etc/extra", "", true, ""});
  pod.metadata.annotations[reload::kReloadAnnotation] =
      "http://:" + std::to_string(port) + "/-/reload";
  pod.metadata.annotations[reload::kReloadDelayAnnotation] = delay;
  return pod;
}

class VolumeManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volume-manager-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto j = OwnershipJournal::Open(root_ + "-state");
    ASSERT_TRUE(j.ok()) << j.status().message();
    journal_ = std::move(j->journal);
    registry_ = plugins::PluginRegistry::NewDefault();
  }
  void TearDown() override {
    if (manager_) {
      bool stopped = false;
      manager_->Stop([&] { stopped = true; });
      RunUntil([&] { return stopped; });
      EXPECT_TRUE(stopped);
      manager_.reset();
    }
    EXPECT_TRUE(loop_.Close()) << "a handle was left open";
    journal_.reset();
    fs::remove_all(root_);
    fs::remove_all(root_ + "-state");
  }

  // A write as an earlier run of the daemon made it (recorded in the journal).
  base::Result<atomicwriter::WriteResult> EarlierRunSetUp(const std::string& uid,
                                                          const atomicwriter::Payload& p) {
    SetUpRequest r{VolumeLocation{root_, uid, "kubernetes.io~configmap", "cfg"}, p, nullptr, false};
    r.journal = journal_.get();
    return SetUpVolume(*atomicwriter::PosixEnv(), r);
  }

  void StartManager(bool kubelet_owns_volumes = false) {
    VolumeManagerOptions o;
    o.kubelet_owns_volumes = kubelet_owns_volumes;
    o.root_dir = root_;
    o.sync_frequency = sync_frequency_;
    o.journal = journal_.get();
    o.unpublished_grace = std::chrono::milliseconds(0);
    o.node_allocatable = node_allocatable_;
    o.tmpfs = tmpfs_;
    o.on_mount_failure = [this](const kube::Pod& pod, const std::string& volume,
                                const std::string& error) {
      mount_failures_.push_back(pod.metadata.name + "/" + volume + ": " + error);
    };
    o.reload.on_result = [this](const kube::Pod& pod, bool ok, const std::string& message) {
      reloads_.push_back(pod.metadata.name + (ok ? ": ok: " : ": failed: ") + message);
    };
    if (with_tokens_) o.tokens = &tokens_;
    if (policy_objects_) {
      o.read_policy = &policy_objects_->policy();
      o.on_policy_refusal = [this](const kube::Pod& pod, const std::string& volumes) {
        policy_reports_.push_back(pod.metadata.name + ": " + volumes);
      };
    }
    cache::ObjectManager* objects =
        policy_objects_ ? static_cast<cache::ObjectManager*>(policy_objects_.get()) : &objects_;
    manager_ = std::make_unique<VolumeManager>(loop_.get(), o, objects, registry_.get(),
                                               [this] { return sources_seen_; });
    objects_.SetChangeHandler([this](const kube::ObjectRef& r) { manager_->OnObjectChanged(r); });
    tokens_.SetChangeHandler([this](const kube::TokenRef& r) { manager_->OnTokenChanged(r); });
    manager_->Start();
  }

  // Runs the loop for `ms` (several reconciler passes).
  void RunFor(int ms) { loop_.RunFor(std::chrono::milliseconds(ms)); }
  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    return loop_.RunUntil(done, limit);
  }

  // Creates or replaces ConfigMap ns/name.
  void Put(const std::string& ns, const std::string& name,
           std::map<std::string, std::string> data) {
    kube::ConfigMap cm;
    cm.metadata.namespace_ = ns;
    cm.metadata.name = name;
    cm.data = std::move(data);
    objects_.SetConfigMap(std::move(cm));
  }

  void Send(podconfig::PodOp op, std::vector<kube::Pod> pods) {
    std::vector<podconfig::PodPtr> shared;
    for (kube::Pod& pod : pods) shared.push_back(std::make_shared<const kube::Pod>(std::move(pod)));
    manager_->OnPodUpdate(podconfig::PodUpdate{op, std::move(shared), "file"});
  }

  std::string Dir(const std::string& uid, const std::string& vol = "cfg",
                  const std::string& plugin = "kubernetes.io~configmap") const {
    return VolumeDir(root_, uid, plugin, vol);
  }

  // What the kubelet does at a pod's first sync: the volume dir, and its content.
  void KubeletSetsUp(const std::string& dir, const atomicwriter::Payload& payload) {
    fs::create_directories(dir);
    auto w = atomicwriter::AtomicWriter::Open(dir, {});
    ASSERT_TRUE(w.ok()) << w.status().message();
    auto r = (*w)->Write(payload, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  // Whether the pod's next resync waits for its disk check (10 min away), not the sync period.
  bool Deferred(const std::string& uid) const {
    const auto next = manager_->next_resync(uid);
    return next && *next > std::chrono::steady_clock::now() + std::chrono::minutes(9);
  }
  uint64_t MountTableChanges() const { return manager_->dir_watcher().stats().mount_table_changes; }
  std::map<std::string, std::string> Content(const std::string& uid) const {
    return atomicwriter::VisibleContent(Dir(uid));
  }

  std::string root_;
  std::unique_ptr<OwnershipJournal> journal_;
  vmtest::TestLoop loop_;
  std::unique_ptr<plugins::PluginRegistry> registry_;
  // Gets of objects the pod did not register first fail, as with the real managers.
  cache::FakeObjectManager objects_;
  // The read policy in front of objects_ (as the cluster daemon puts it), when a test sets one.
  std::unique_ptr<cache::PolicyObjectManager> policy_objects_;
  // What on_policy_refusal reported (a Normal Event in cluster mode): "<pod>: <volumes>".
  std::vector<std::string> policy_reports_;
  // Service account tokens (cluster mode), given to the manager with `with_tokens_`.
  cache::FakeTokenManager tokens_;
  bool with_tokens_ = false;
  bool sources_seen_ = true;
  kube::ResourceList node_allocatable_;
  bool tmpfs_ = true;
  std::chrono::milliseconds sync_frequency_ = std::chrono::hours(1);
  std::unique_ptr<VolumeManager> manager_;
  // What on_mount_failure reported (a FailedMount Event in cluster mode): "<pod>/<volume>: <err>".
  std::vector<std::string> mount_failures_;
  // Each reload run's report (a Reloaded or ReloadFailed Event in cluster mode):
  // "<pod>: ok: <message>" or "<pod>: failed: <message>".
  std::vector<std::string> reloads_;
};

using Files = std::map<std::string, std::string>;

// Idle costs nothing: once every volume is current, no pass runs until something is due, and an
// object change is served at once.
TEST_F(VolumeManagerTest, IdleRunsNoPassAndAnObjectChangeIsServedAtOnce) {
  Put("default", "app", {{"level", "info"}});
  StartManager();
  constexpr int kPods = 40;
  std::vector<kube::Pod> pods;
  for (int i = 0; i < kPods; ++i) pods.push_back(MakePod("idle-" + std::to_string(i), "app"));
  Send(podconfig::PodOp::kAdd, std::move(pods));
  ASSERT_TRUE(RunUntil([&] {
    return manager_->reconciler().count_in(VolumePhase::kIdle) == static_cast<size_t>(kPods);
  }));
  RunFor(250);  // the last completions' passes
  const ReconcilerPassStats before = manager_->reconciler().pass_stats();
  RunFor(550);
  const ReconcilerPassStats& after = manager_->reconciler().pass_stats();
  // No tick at all: nothing is due before the resyncs.
  EXPECT_EQ(after.passes, before.passes);
  EXPECT_EQ(after.volumes_visited, before.volumes_visited);
  // Only the pods' resyncs, an hour away, are timed work.
  ASSERT_TRUE(manager_->NextTimedWork().has_value());
  EXPECT_GT(*manager_->NextTimedWork(),
            std::chrono::steady_clock::now() + std::chrono::minutes(59));
  // An object change is work again, at once.
  Put("default", "app", {{"level", "debug"}});
  ASSERT_TRUE(RunUntil([&] { return Content("idle-0") == Files{{"level", "debug"}}; }));
  EXPECT_GE(manager_->reconciler().pass_stats().volumes_visited - before.volumes_visited, kPods);
}

// The pods' periodic resyncs fall on a grid (sync_frequency / 30, at most 2 s): pods due within
// one step share one pass, so the loop wakes once a step however many pods the node runs.
TEST_F(VolumeManagerTest, PodResyncsShareTheGridsLines) {
  Put("default", "app", {{"level", "info"}});
  sync_frequency_ = std::chrono::minutes(1);
  StartManager();
  EXPECT_EQ(manager_->ResyncGrid(), std::chrono::seconds(2));
  constexpr int kPods = 200;
  std::vector<kube::Pod> pods;
  for (int i = 0; i < kPods; ++i) pods.push_back(MakePod("grid-" + std::to_string(i), "app"));
  const auto before = std::chrono::steady_clock::now();
  Send(podconfig::PodOp::kAdd, std::move(pods));
  const std::vector<std::chrono::steady_clock::time_point> times = manager_->resync_times();
  // The jitter spreads them over 30 s: at most 16 lines of 2 s, each a multiple of the step.
  EXPECT_LE(times.size(), 16u);
  EXPECT_GE(times.size(), 2u) << "still spread by the jitter";
  for (const auto& t : times) {
    EXPECT_EQ(t.time_since_epoch() % std::chrono::seconds(2), std::chrono::nanoseconds(0));
    EXPECT_GE(t, before + std::chrono::minutes(1));
    EXPECT_LE(t, before + std::chrono::seconds(92));
  }
  // A short period keeps a grid no finer than the reconcile period.
  manager_->SetSyncFrequency(std::chrono::milliseconds(900));
  EXPECT_EQ(manager_->ResyncGrid(), std::chrono::milliseconds(100));
}

// Under a strategy that announces every change (Watch), a resync leaves alone the volumes whose
// objects announced nothing and whose disk was verified recently (their remount would find the
// same inputs), and the pod's next resync waits for the first disk check due. Under Get and Cache
// (no announcements) it marks each one, as the kubelet does, every sync period.
TEST_F(VolumeManagerTest, AResyncVisitsOnlyWhatNoAnnouncementCovers) {
  Put("default", "app", {{"level", "info"}});
  objects_.SetAnnouncesEveryChange(true);
  sync_frequency_ = std::chrono::milliseconds(200);
  StartManager();
  constexpr int kPods = 5;
  auto add_pods = [&](const std::string& prefix) {
    std::vector<kube::Pod> pods;
    for (int i = 0; i < kPods; ++i) pods.push_back(MakePod(prefix + std::to_string(i), "app"));
    Send(podconfig::PodOp::kAdd, std::move(pods));
  };
  add_pods("announced-");
  // A resync before a pod's volume is mounted finds nothing to look at; each pod's first resync
  // after it finds its volume current, and is the last for 10 min.
  ASSERT_TRUE(RunUntil([&] { return manager_->resync_stats().volumes_current >= kPods; }));
  RunFor(300);  // another sync period: no resync comes
  EXPECT_EQ(manager_->resync_stats().volumes_marked, 0);
  EXPECT_EQ(manager_->resync_stats().volumes_current, kPods);
  // Next at the disk check, 10 min after the write, not 200-300 ms from now.
  ASSERT_FALSE(manager_->resync_times().empty());
  EXPECT_GT(manager_->resync_times().front(),
            std::chrono::steady_clock::now() + std::chrono::minutes(9));
  // A change is announced, and served at once.
  Put("default", "app", {{"level", "debug"}});
  ASSERT_TRUE(RunUntil([&] { return Content("announced-0") == Files{{"level", "debug"}}; }));

  objects_.SetAnnouncesEveryChange(false);
  add_pods("polled-");
  const VolumeManager::ResyncStats before = manager_->resync_stats();
  ASSERT_TRUE(RunUntil([&] {
    return manager_->resync_stats().volumes_marked >= before.volumes_marked + 3 * kPods;
  }));
  EXPECT_EQ(manager_->resync_stats().volumes_current, before.volumes_current);
}

TEST_F(VolumeManagerTest, MountsAndFollowsObjectChangesAtOnce) {
  Put("default", "app", {{"level", "info"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app"), MakePod("u2", "app")});
  ASSERT_TRUE(RunUntil([&] {
    return Content("u1") == Files{{"level", "info"}} && Content("u2") == Files{{"level", "info"}};
  }));
  // Only the configMap volume: emptyDir is not ours.
  EXPECT_FALSE(fs::exists(root_ + "/pods/u1/volumes/kubernetes.io~empty-dir"));
  EXPECT_EQ(objects_.registrations().at("u1").size(), 1u);

  Put("default", "app", {{"level", "debug"}});
  ASSERT_TRUE(RunUntil([&] {
    return Content("u1") == Files{{"level", "debug"}} && Content("u2") == Files{{"level", "debug"}};
  }));
  // Two first mounts and one update each; nothing rewritten twice.
  EXPECT_TRUE(RunUntil([&] { return manager_->stats().versions_published == 4; }));
  RunFor(200);
  EXPECT_EQ(manager_->stats().versions_published, 4);
}

// A container without a CPU limit shows the node's allocatable CPU in a downward API file, as
// configured: the setting reaches every payload build on the pool.
TEST_F(VolumeManagerTest, TheNodeAllocatableStandsInForAnUnsetLimit) {
  node_allocatable_ = {{"cpu", *kube::Quantity::Parse("4")}};
  tmpfs_ = false;  // the test's dir is removed as a plain tree
  StartManager();
  kube::Pod pod = MakePod("u1", "app");
  pod.spec.volumes = {
      {"info",
       kube::DownwardAPIVolumeSource{
           {{"cpu", std::nullopt,
             kube::ResourceFieldSelector{pod.spec.containers[0].name, "limits.cpu", std::nullopt},
             std::nullopt}},
           0644}}};
  pod.spec.containers[0].volume_mounts = {kube::VolumeMount{"info", "/etc/info", "", true, ""}};
  Send(podconfig::PodOp::kAdd, {pod});
  EXPECT_TRUE(RunUntil([&] {
    return atomicwriter::VisibleContent(Dir("u1", "info", "kubernetes.io~downward-api")) ==
           Files{{"cpu", "4"}};
  }));
}

TEST_F(VolumeManagerTest, AChangeThatLeavesThePayloadAloneTouchesNoDisk) {
  Put("default", "app", {{"level", "info"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_ok == 1; }));
  const std::string ts = manager_->actual().Find(VolumeKey{"u1", "cfg"})->ts_dir;
  Put("default", "app", {{"level", "info"}});  // e.g. a label edit on the ConfigMap
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().remounts_unchanged == 1; }));
  EXPECT_EQ(manager_->stats().mounts_ok, 1);  // no operation ran
  const MountedVolume* m = manager_->actual().Find(VolumeKey{"u1", "cfg"});
  EXPECT_FALSE(m->remount_required);
  EXPECT_EQ(m->ts_dir, ts);
  Put("default", "app", {{"level", "warn"}});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"level", "warn"}}; }));
}

TEST_F(VolumeManagerTest, UnmountedVolumesAreIgnored) {
  Put("default", "app", {{"k", "v"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app", false, /*mounted=*/false)});
  RunFor(300);
  EXPECT_FALSE(fs::exists(Dir("u1")));
  EXPECT_TRUE(manager_->desired().volumes().empty());
}

TEST_F(VolumeManagerTest, MissingObjectFailsUntilItAppears) {
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "late")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_failed > 0; }));
  EXPECT_FALSE(fs::exists(Dir("u1")));  // a failed first mount leaves no directory
  Put("default", "late", {{"k", "v"}});
  // Backoff (500 ms after the first failure) delays the retry, then it mounts.
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v"}}; }));
}

TEST_F(VolumeManagerTest, AnObjectChangeEndsTheBackoffOfAVolumeThatFailedToMount) {
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "late")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_failed > 0; }));
  const VolumeKey key{"u1", "cfg"};
  const ExponentialBackoff* backoff = manager_->executor().Backoff(key);
  ASSERT_NE(backoff, nullptr);
  EXPECT_FALSE(backoff->Ready(std::chrono::steady_clock::now()));  // waiting out 500 ms
  Put("default", "late", {{"k", "v"}});
  // The change itself lets the volume retry: no wait for the rest of its backoff.
  backoff = manager_->executor().Backoff(key);
  ASSERT_NE(backoff, nullptr);
  EXPECT_TRUE(backoff->Ready(std::chrono::steady_clock::now()));
  EXPECT_EQ(backoff->delay(), std::chrono::milliseconds(500));  // kept for a next failure
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v"}}; }));
}

TEST_F(VolumeManagerTest, AMountWaitsForItsObjectsToBeFetched) {
  objects_.DeferFetches(true);
  Put("default", "app", {{"k", "v1"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return objects_.pending_fetches() == 1; }));
  RunFor(300);  // passes meanwhile neither write nor fetch again
  EXPECT_FALSE(fs::exists(Dir("u1")));
  EXPECT_EQ(objects_.fetches().size(), 1u);
  EXPECT_EQ(objects_.fetches()[0].mode, cache::ObjectManager::FetchMode::kStrategy);
  EXPECT_EQ(objects_.fetches()[0].refs,
            (std::vector<kube::ObjectRef>{{kube::ObjectKind::kConfigMap, "default", "app"}}));
  objects_.CompleteFetches();
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  // A change is fetched again before the remount writes it.
  Put("default", "app", {{"k", "v2"}});
  ASSERT_TRUE(RunUntil([&] { return objects_.pending_fetches() == 1; }));
  EXPECT_EQ(Content("u1"), (Files{{"k", "v1"}}));
  objects_.CompleteFetches();
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v2"}}; }));
  EXPECT_EQ(manager_->reconciler().fetch_state_count(), 0u);
}

TEST_F(VolumeManagerTest, BesideTheKubeletOnlyVolumesItSetUpAreRefreshedAndNothingIsCreated) {
  Put("default", "app", {{"k", "v1"}});
  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().kubelet_setup_checks >= 2; }));
  EXPECT_FALSE(fs::exists(root_ + "/pods"));  // not even the pod dir
  EXPECT_EQ(manager_->reconciler().waiting_for_kubelet_count(), 1u);
  EXPECT_TRUE(objects_.fetches().empty());  // waiting costs no object reads

  // The kubelet sets it up from an older cache; the daemon's next look refreshes it.
  KubeletSetsUp(Dir("u1"), {{"k", {"v0", 0644, std::nullopt}}});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  Put("default", "app", {{"k", "v2"}});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v2"}}; }));
  EXPECT_FALSE(journal_->Owns(
      OwnedKind::kVolume, OwnershipJournal::VolumePath("u1", "kubernetes.io~configmap", "cfg")));

  // The pod goes: the kubelet tears the volume down, not the daemon.
  Send(podconfig::PodOp::kRemove, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().released_to_kubelet == 1; }));
  RunFor(200);
  EXPECT_EQ(Content("u1"), (Files{{"k", "v2"}}));
  EXPECT_EQ(manager_->stats().teardowns_ok + manager_->stats().teardowns_not_owned, 0);
}

// Issue 44, item 5: beside the kubelet, a volume that reads an object the daemon is configured
// not to read (--no-secrets, --object-namespaces) is configured policy, not a failure: it is left
// to the kubelet (no object requested, no failure, the kubelet's content untouched), and the pod
// is told once, naming each such volume and why; the pod's other volumes are refreshed as usual.
TEST_F(VolumeManagerTest, BesideTheKubeletVolumesThePolicyRefusesAreLeftToItAndEachPodToldOnce) {
  cache::ReadPolicy policy;
  policy.secrets = false;
  policy.namespaces = {"default"};
  policy_objects_ = std::make_unique<cache::PolicyObjectManager>(&objects_, policy);
  Put("default", "app", {{"k", "v1"}});
  Put("other", "app", {{"k", "v1"}});
  kube::Pod pod = MakePod("u1", "app");
  kube::SecretVolumeSource tls;
  tls.secret_name = "tls";
  kube::VolumeProjection cm_source, secret_source;
  cm_source.config_map = kube::ConfigMapProjection{"app", {}, std::nullopt};
  secret_source.secret = kube::SecretProjection{"db", {}, /*optional=*/true};
  pod.spec.volumes.push_back({"tls", tls});
  pod.spec.volumes.push_back(
      {"bundle", kube::ProjectedVolumeSource{{cm_source, secret_source}, 0644}});
  for (const char* v : {"tls", "bundle"}) {
    pod.spec.containers[0].volume_mounts.push_back(
        kube::VolumeMount{v, std::string("/etc/") + v, "", true, ""});
  }
  kube::Pod elsewhere = MakePod("u2", "app");
  elsewhere.metadata.namespace_ = "other";
  KubeletSetsUp(Dir("u1"), {{"k", {"v0", 0644, std::nullopt}}});
  KubeletSetsUp(Dir("u1", "tls", "kubernetes.io~secret"), {{"t", {"kubelet", 0600, std::nullopt}}});
  KubeletSetsUp(Dir("u2"), {{"k", {"v0", 0644, std::nullopt}}});

  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {pod, elsewhere});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  EXPECT_EQ(policy_reports_,
            (std::vector<std::string>{
                "web-u1: volume \"tls\": " +
                    policy.Refusal({kube::ObjectKind::kSecret, "default", "tls"}) +
                    "; volume \"bundle\": " +
                    policy.Refusal({kube::ObjectKind::kSecret, "default", "db"}),
                "web-u2: volume \"cfg\": " +
                    policy.Refusal({kube::ObjectKind::kConfigMap, "other", "app"})}));
  EXPECT_EQ(manager_->populator().left_by_policy().size(), 3u);
  EXPECT_EQ(manager_->populator().left_by_policy().at({"u1", "tls"}),
            "secret default/tls is not read: the daemon reads no Secrets (--no-secrets; chart: "
            "rbac.secrets: false)");
  EXPECT_TRUE(manager_->populator().left_to_kubelet().empty());
  // Nothing of theirs is registered, fetched or failing.
  EXPECT_EQ(objects_.registrations().size(), 1u);
  EXPECT_EQ(objects_.registrations().at("u1"),
            (std::vector<kube::ObjectRef>{{kube::ObjectKind::kConfigMap, "default", "app"}}));
  for (const auto& fetch : objects_.fetches()) {
    for (const kube::ObjectRef& ref : fetch.refs) EXPECT_EQ(policy.Refusal(ref), "");
  }

  // A status update, a resync and an object change: still said once, never a failure.
  pod.status.phase = "Running";
  Send(podconfig::PodOp::kUpdate, {pod});
  Put("default", "app", {{"k", "v2"}});
  Put("other", "app", {{"k", "v2"}});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v2"}}; }));
  RunFor(200);
  EXPECT_EQ(policy_reports_.size(), 2u);
  EXPECT_TRUE(mount_failures_.empty()) << mount_failures_.front();
  EXPECT_EQ(manager_->stats().mounts_failed, 0);
  EXPECT_EQ(Content("u2"), (Files{{"k", "v0"}})) << "the kubelet's content changed";
  EXPECT_EQ(atomicwriter::VisibleContent(Dir("u1", "tls", "kubernetes.io~secret")),
            (Files{{"t", "kubelet"}}));

  // The pod goes and comes back (a new pod of that UID): told again, once.
  Send(podconfig::PodOp::kRemove, {elsewhere});
  EXPECT_EQ(manager_->populator().left_by_policy().size(), 2u);
  Send(podconfig::PodOp::kAdd, {elsewhere});
  EXPECT_EQ(policy_reports_.size(), 3u);
}

// Where the daemon owns the volumes nobody else writes them: a volume reading an object the
// policy refuses fails (the pod cannot start, its owner has something to do), naming the policy;
// still nothing is requested.
TEST_F(VolumeManagerTest, InSelfOwnershipAVolumeThePolicyRefusesFailsNamingIt) {
  cache::ReadPolicy policy;
  policy.secrets = false;
  policy_objects_ = std::make_unique<cache::PolicyObjectManager>(&objects_, policy);
  kube::Pod pod = MakePod("u1", "app");
  kube::SecretVolumeSource tls;
  tls.secret_name = "tls";
  pod.spec.volumes.push_back({"tls", tls});
  pod.spec.containers[0].volume_mounts.push_back(
      kube::VolumeMount{"tls", "/etc/tls", "", true, ""});
  Put("default", "app", {{"k", "v1"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {pod});
  ASSERT_TRUE(RunUntil([&] { return !mount_failures_.empty(); }));
  EXPECT_EQ(mount_failures_.front(),
            "web-u1/tls: secret default/tls is not read: the daemon reads no Secrets "
            "(--no-secrets; chart: rbac.secrets: false)");
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  EXPECT_TRUE(policy_reports_.empty());
  EXPECT_TRUE(manager_->populator().left_by_policy().empty());
  EXPECT_EQ(objects_.registrations().at("u1"),
            (std::vector<kube::ObjectRef>{{kube::ObjectKind::kConfigMap, "default", "app"}}));
}

TEST_F(VolumeManagerTest, BesideTheKubeletAnObjectNotReadYetIsWaitedForNotAFailure) {
  const kube::ObjectRef app{kube::ObjectKind::kConfigMap, "default", "app"};
  Put("default", "app", {{"k", "v1"}});
  objects_.SetUnread(app);  // its watch's first list has not landed
  KubeletSetsUp(Dir("u1"), {{"k", {"v0", 0644, std::nullopt}}});
  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return !objects_.fetches().empty(); }));
  RunFor(300);
  EXPECT_EQ(manager_->stats().mounts_failed, 0) << "a FailedMount on a pod the kubelet set up";
  EXPECT_GE(manager_->stats().waits_for_first_read, 1);
  EXPECT_EQ(Content("u1"), (Files{{"k", "v0"}}));  // the kubelet's content stays
  // The first read lands and notifies: the volume is refreshed at once.
  objects_.MarkRead(app);
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  EXPECT_EQ(manager_->stats().mounts_failed, 0);
}

// An object the daemon may not read (403) beside the kubelet: each attempt is one failure (one
// FailedMount report with the API's text), the volume counts as failing with the API's status
// as its last error, the retries back off exponentially (the kubelet set-up check before a retry
// once reset the backoff: 500 ms for ever), the kubelet's content stays; once readable the volume
// is refreshed and no longer failing.
TEST_F(VolumeManagerTest, BesideTheKubeletARefusedObjectIsAFailureThatBacksOffAndKeepsTheDisk) {
  const kube::ObjectRef app{kube::ObjectKind::kConfigMap, "default", "app"};
  const std::string refusal =
      "configmaps \"app\" is forbidden: User \"system:node:n1\" cannot get resource "
      "\"configmaps\" in API group \"\" in the namespace \"default\"";
  Put("default", "app", {{"k", "v1"}});
  objects_.SetError(app, base::Status::Error(refusal).WithApiStatus(403, "Forbidden"));
  KubeletSetsUp(Dir("u1"), {{"k", {"v0", 0644, std::nullopt}}});
  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  const VolumeKey key{"u1", "cfg"};
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_failed >= 3; }));
  EXPECT_EQ(mount_failures_.size(), static_cast<size_t>(manager_->stats().mounts_failed))
      << "one report per failed attempt";
  EXPECT_EQ(mount_failures_.front(), "web-u1/cfg: " + refusal);
  const base::Status last = manager_->executor().LastErrorStatus(key);
  EXPECT_EQ(last.api_code(), 403);
  EXPECT_EQ(last.api_reason(), "Forbidden");
  const ExponentialBackoff* backoff = manager_->executor().Backoff(key);
  ASSERT_NE(backoff, nullptr);
  EXPECT_GE(backoff->delay(), std::chrono::milliseconds(2000)) << "the backoff did not grow";
  EXPECT_EQ(manager_->stats().waits_for_first_read, 0);
  EXPECT_EQ(Content("u1"), (Files{{"k", "v0"}}));

  objects_.MarkRead(app);  // allowed again: the read lands and notifies
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  // The files are in place when the pool thread renames; the loop hears of the success after.
  ASSERT_TRUE(RunUntil([&] {
    const ExponentialBackoff* b = manager_->executor().Backoff(key);
    return manager_->executor().LastErrorStatus(key).ok() &&
           (b == nullptr || b->delay().count() == 0);
  })) << "still failing";
}

TEST_F(VolumeManagerTest, BesideTheKubeletASwapItDidNotMakeIsDecidedByAFreshRead) {
  Put("default", "app", {{"k", "v1"}});
  KubeletSetsUp(Dir("u1"), {{"k", {"v1", 0644, std::nullopt}}});
  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] {
    return manager_->dir_watcher().state({"u1", "cfg"}) == VolumeDirWatcher::State::kArmed &&
           manager_->stats().swaps_verified >= 1;
  }));
  EXPECT_EQ(manager_->stats().foreign_swaps, 0);
  auto fresh_fetches = [&] {
    int n = 0;
    for (const auto& f : objects_.fetches()) n += f.mode == cache::ObjectManager::FetchMode::kFresh;
    return n;
  };
  EXPECT_EQ(fresh_fetches(), 0);

  // The kubelet's sync writes what its lagging cache holds: corrected at once, after a fresh read.
  KubeletSetsUp(Dir("u1"), {{"k", {"v0", 0644, std::nullopt}}});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().foreign_swaps == 1; }));
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  EXPECT_EQ(fresh_fetches(), 1);
  // The daemon's own swaps are not taken for another writer's.
  Put("default", "app", {{"k", "v2"}});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v2"}}; }));
  RunFor(300);
  EXPECT_EQ(manager_->stats().foreign_swaps, 1);
  EXPECT_EQ(fresh_fetches(), 1);

  // The kubelet tears the volume down (its pod is going): the daemon stops refreshing it.
  fs::remove_all(Dir("u1"));
  ASSERT_TRUE(RunUntil([&] { return manager_->reconciler().waiting_for_kubelet_count() == 1; }));
  EXPECT_EQ(manager_->dir_watcher().state({"u1", "cfg"}), VolumeDirWatcher::State::kUnknown);
  RunFor(200);
  EXPECT_FALSE(fs::exists(Dir("u1")));
}

// Beside the kubelet under Watch, a resync of a watched volume whose objects announced nothing
// only checks that the dir's path still leads to the watched inode: no verification, no remount.
// While the mount table is unchanged that check cannot fail, so the pod's next resync is its disk
// check. A tmpfs the kubelet mounts over the dir says nothing to inotify, but the mount brings
// the pod back to the sync period; that resync's check finds the tmpfs, and the kubelet's older
// content in it is corrected.
TEST_F(VolumeManagerTest, BesideTheKubeletAResyncChecksTheWatchAndFindsATmpfsMountedOver) {
  Put("default", "app", {{"k", "v1"}});
  KubeletSetsUp(Dir("u1"), {{"k", {"v1", 0644, std::nullopt}}});
  objects_.SetAnnouncesEveryChange(true);
  sync_frequency_ = std::chrono::milliseconds(200);
  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] {
    return manager_->dir_watcher().state({"u1", "cfg"}) == VolumeDirWatcher::State::kArmed &&
           manager_->resync_stats().volumes_current >= 1;
  }));
  ASSERT_TRUE(manager_->dir_watcher().FollowsMountTable()) << "/proc/self/mountinfo is polled";
  // A mount by another process (tests run in parallel) brings the pod back to the sync period,
  // as it should: the window is taken again, up to 20 times, until the table stays unchanged.
  long verified = 0, marked = 0, current = 0;
  size_t fetches = 0;
  bool quiet = false;
  for (int attempt = 0; attempt < 20 && !quiet; ++attempt) {
    ASSERT_TRUE(RunUntil([&] { return Deferred("u1"); }));
    const uint64_t changes = MountTableChanges();
    verified = manager_->stats().swaps_verified;
    marked = manager_->resync_stats().volumes_marked;
    current = manager_->resync_stats().volumes_current;
    fetches = objects_.fetches().size();
    RunFor(500);  // more than two sync periods: no resync, no check, no verification
    quiet = MountTableChanges() == changes;
  }
  ASSERT_TRUE(quiet) << "the mount table changed in each of 20 windows of 0.5 s";
  EXPECT_GE(manager_->resync_stats().pods_deferred, 1);
  EXPECT_EQ(manager_->resync_stats().volumes_current, current);
  EXPECT_EQ(manager_->resync_stats().volumes_marked, marked);
  EXPECT_EQ(manager_->stats().swaps_verified, verified);
  EXPECT_EQ(objects_.fetches().size(), fetches);
  EXPECT_TRUE(Deferred("u1"));

  const std::string dir = Dir("u1");
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) {
    VM_SKIP_NEEDS_ROOT(std::string("mount tmpfs: ") + std::strerror(errno));
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{dir};
  KubeletSetsUp(dir, {{"k", {"v0", 0644, std::nullopt}}});
  ASSERT_TRUE(RunUntil([&] {
    return manager_->stats().foreign_swaps == 1 && Content("u1") == Files{{"k", "v1"}};
  }));
  EXPECT_GE(manager_->resync_stats().pods_brought_back, 1);
  EXPECT_GT(manager_->resync_stats().volumes_marked, marked);
  // Watched again, on the tmpfs (re-armed as the rewrite completed): with no resync for an hour,
  // the kubelet's next swap there is reported by the watch.
  manager_->SetSyncFrequency(std::chrono::hours(1));
  RunFor(400);  // the rewrite's completion, and the resync already due at the old period
  ASSERT_EQ(manager_->dir_watcher().state({"u1", "cfg"}), VolumeDirWatcher::State::kArmed);
  KubeletSetsUp(dir, {{"k", {"v0", 0644, std::nullopt}}});
  ASSERT_TRUE(RunUntil([&] {
    return manager_->stats().foreign_swaps == 2 && Content("u1") == Files{{"k", "v1"}};
  }));
}

// A pod waiting for its disk check comes back to the sync period when one of its watches is lost
// (the dir moved away: the watch no longer covers the path until the verification re-arms it),
// and is deferred again once its next resync finds every watch holding.
TEST_F(VolumeManagerTest, BesideTheKubeletALostWatchBringsItsPodBackToTheSyncPeriod) {
  Put("default", "app", {{"k", "v1"}});
  KubeletSetsUp(Dir("u1"), {{"k", {"v1", 0644, std::nullopt}}});
  KubeletSetsUp(Dir("u2"), {{"k", {"v1", 0644, std::nullopt}}});
  objects_.SetAnnouncesEveryChange(true);
  sync_frequency_ = std::chrono::milliseconds(200);
  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app"), MakePod("u2", "app")});
  ASSERT_TRUE(manager_->dir_watcher().FollowsMountTable());
  ASSERT_TRUE(RunUntil([&] { return Deferred("u1") && Deferred("u2"); }));
  const uint64_t changes = MountTableChanges();
  const long brought_back = manager_->resync_stats().pods_brought_back;
  const long current = manager_->resync_stats().volumes_current;

  const std::string away = Dir("u1") + ".away";
  fs::rename(Dir("u1"), away);
  fs::rename(away, Dir("u1"));
  ASSERT_TRUE(RunUntil([&] { return !Deferred("u1"); }));
  // Only u1's resync is back at the sync period; u2's still waits (unless another process's
  // mount, tests running in parallel, brought every pod back meanwhile).
  if (MountTableChanges() == changes) {
    EXPECT_TRUE(Deferred("u2"));
    EXPECT_EQ(manager_->resync_stats().pods_brought_back, brought_back + 1);
  }
  // Verified and watched again; the next resync finds the watch holding and defers u1 again.
  ASSERT_TRUE(RunUntil([&] {
    return manager_->dir_watcher().state({"u1", "cfg"}) == VolumeDirWatcher::State::kArmed &&
           Deferred("u1") && Deferred("u2");
  }));
  EXPECT_GE(manager_->resync_stats().volumes_current, current + 1);
  EXPECT_EQ(Content("u1"), (Files{{"k", "v1"}}));
}

TEST_F(VolumeManagerTest, BesideTheKubeletPodDerivedContentStaysTheKubelets) {
  Put("default", "app", {{"k", "v1"}});
  kube::Pod pod = MakePod("u1", "app");
  pod.metadata.labels = {{"app", "web"}};
  kube::DownwardAPIVolumeFile labels{"labels", kube::ObjectFieldSelector{"v1", "metadata.labels"},
                                     std::nullopt, std::nullopt};
  kube::VolumeProjection cm_source, labels_source, token_source, certificate_source;
  cm_source.config_map = kube::ConfigMapProjection{"app", {}, std::nullopt};
  labels_source.downward_api = kube::DownwardAPIProjection{{labels}};
  token_source.service_account_token = kube::ServiceAccountTokenProjection{"", 3600, "token"};
  // A kind this code does not know: the kubelet's business, no failure of the daemon's.
  certificate_source.unsupported_kind = "podCertificate";
  pod.spec.volumes.push_back(
      {"all", kube::ProjectedVolumeSource{{cm_source, labels_source}, 0644}});
  pod.spec.volumes.push_back(
      {"kube-api-access", kube::ProjectedVolumeSource{{token_source, cm_source}, 0644}});
  pod.spec.volumes.push_back({"info", kube::DownwardAPIVolumeSource{{labels}, 0644}});
  pod.spec.volumes.push_back(
      {"cert", kube::ProjectedVolumeSource{{cm_source, certificate_source}, 0644}});
  for (const char* v : {"all", "kube-api-access", "info", "cert"}) {
    pod.spec.containers[0].volume_mounts.push_back(
        kube::VolumeMount{v, std::string("/etc/") + v, "", true, ""});
  }
  // The kubelet's copy of the pod carries an annotation-derived label line the API's lacks.
  const std::string kubelet_labels = "app=\"web\"\nseen-by=\"kubelet\"";
  KubeletSetsUp(
      Dir("u1", "all", "kubernetes.io~projected"),
      {{"k", {"v0", 0644, std::nullopt}}, {"labels", {kubelet_labels, 0644, std::nullopt}}});
  KubeletSetsUp(Dir("u1", "kube-api-access", "kubernetes.io~projected"),
                {{"token", {"jwt", 0644, std::nullopt}}, {"k", {"v0", 0644, std::nullopt}}});
  KubeletSetsUp(Dir("u1", "info", "kubernetes.io~downward-api"),
                {{"labels", {kubelet_labels, 0644, std::nullopt}}});
  KubeletSetsUp(Dir("u1"), {{"k", {"v1", 0644, std::nullopt}}});

  StartManager(/*kubelet_owns_volumes=*/true);
  Send(podconfig::PodOp::kAdd, {pod});
  ASSERT_TRUE(RunUntil([&] {
    return atomicwriter::VisibleContent(Dir("u1", "all", "kubernetes.io~projected")) ==
           Files{{"k", "v1"}, {"labels", kubelet_labels}};
  }));
  EXPECT_EQ(manager_->populator().left_to_kubelet(),
            (std::set<VolumeKey>{{"u1", "cert"}, {"u1", "info"}, {"u1", "kube-api-access"}}));
  Put("default", "app", {{"k", "v2"}});
  ASSERT_TRUE(RunUntil([&] {
    return atomicwriter::VisibleContent(Dir("u1", "all", "kubernetes.io~projected")) ==
           Files{{"k", "v2"}, {"labels", kubelet_labels}};
  }));
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v2"}}; }));
  // The volumes only the kubelet can produce are untouched, though one reads the ConfigMap.
  EXPECT_EQ(atomicwriter::VisibleContent(Dir("u1", "kube-api-access", "kubernetes.io~projected")),
            (Files{{"token", "jwt"}, {"k", "v0"}}));
  EXPECT_EQ(atomicwriter::VisibleContent(Dir("u1", "info", "kubernetes.io~downward-api")),
            (Files{{"labels", kubelet_labels}}));
}

// A pod's kube-api-access volume (a token, its CA ConfigMap, its namespace) where the daemon owns
// the volumes: nothing is written before the token is there (its fetch is waited for, as an
// object's), then the three together; a renewed token rewrites the volume at once, the other files
// as they were, and is no change for the pod's reload action (a new CA is); a token that can no
// longer be had fails the volume (FailedMount naming the account) and keeps the last content.
TEST_F(VolumeManagerTest, SelfOwnedTokenVolumeWaitsForItsTokenAndFollowsItsRenewal) {
  tmpfs_ = false;  // the test's dir is removed as a plain tree
  with_tokens_ = true;
  vmtest::Listener app("HTTP/1.1 200 OK\r\n\r\n");
  Put("default", "kube-root-ca.crt", {{"ca.crt", "CA"}});
  kube::Pod pod = PodReadingConfigMap("u1", "app");
  pod.spec.service_account_name = "web";
  pod.metadata.annotations[reload::kReloadAnnotation] =
      "http://:" + std::to_string(app.port()) + "/-/reload";
  pod.metadata.annotations[reload::kReloadDelayAnnotation] = "0";
  kube::VolumeProjection token, ca, ns;
  token.service_account_token = kube::ServiceAccountTokenProjection{"", 3607, "token"};
  ca.config_map = kube::ConfigMapProjection{"kube-root-ca.crt", {{"ca.crt", "ca.crt", {}}}, {}};
  ns.downward_api = kube::DownwardAPIProjection{
      {{"namespace", kube::ObjectFieldSelector{"v1", "metadata.namespace"}, std::nullopt,
        std::nullopt}}};
  pod.spec.volumes = {{"kube-api-access", kube::ProjectedVolumeSource{{token, ca, ns}, 0644}}};
  pod.spec.containers[0].volume_mounts = {kube::VolumeMount{
      "kube-api-access", "/var/run/secrets/kubernetes.io/serviceaccount", "", true, ""}};
  const kube::TokenRef ref = kube::TokenRefFor(pod, *token.service_account_token);
  EXPECT_EQ(ref.expiration_seconds, 3607);
  const std::string dir = Dir("u1", "kube-api-access", "kubernetes.io~projected");

  tokens_.Hold(true);
  StartManager();
  Send(podconfig::PodOp::kAdd, {pod});
  ASSERT_TRUE(RunUntil([&] { return tokens_.held_count() == 1; }));
  EXPECT_EQ(tokens_.registered().at("u1"), std::vector<kube::TokenRef>{ref});
  RunFor(300);
  EXPECT_FALSE(fs::exists(dir));  // waits for the token
  tokens_.Set(ref, "TOKEN-1");
  tokens_.Release();
  ASSERT_TRUE(RunUntil([&] {
    return atomicwriter::VisibleContent(dir) ==
           Files{{"token", "TOKEN-1"}, {"ca.crt", "CA"}, {"namespace", "default"}};
  }));
  EXPECT_TRUE(mount_failures_.empty());

  tokens_.Hold(false);
  tokens_.Set(ref, "TOKEN-2");
  ASSERT_TRUE(RunUntil([&] {
    return atomicwriter::VisibleContent(dir) ==
           Files{{"token", "TOKEN-2"}, {"ca.crt", "CA"}, {"namespace", "default"}};
  }));
  // A renewal is no change for the reload action; a new CA is.
  RunFor(300);
  EXPECT_TRUE(app.requests().empty());
  EXPECT_TRUE(reloads_.empty());
  Put("default", "kube-root-ca.crt", {{"ca.crt", "CA-2"}});
  ASSERT_TRUE(RunUntil([&] { return reloads_.size() == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(app.requests().size(), 1u);
  EXPECT_EQ(atomicwriter::VisibleContent(dir),
            (Files{{"token", "TOKEN-2"}, {"ca.crt", "CA-2"}, {"namespace", "default"}}));
  const std::string version = manager_->actual().Find({"u1", "kube-api-access"})->ts_dir;

  tokens_.Fail(ref,
               "token for service account \"default/web\" expired at 2026-12-01T00:00:00Z "
               "and its refresh failed: 403 Forbidden: no");
  ASSERT_TRUE(RunUntil([&] { return !mount_failures_.empty(); }));
  EXPECT_EQ(mount_failures_.front(),
            "web-u1/kube-api-access: serviceAccountToken source (path \"token\"): token for "
            "service account \"default/web\" expired at 2026-12-01T00:00:00Z and its refresh "
            "failed: 403 Forbidden: no");
  EXPECT_EQ(manager_->actual().Find({"u1", "kube-api-access"})->ts_dir, version);
  EXPECT_EQ(atomicwriter::VisibleContent(dir),
            (Files{{"token", "TOKEN-2"}, {"ca.crt", "CA-2"}, {"namespace", "default"}}));

  // Gone with its pod.
  Send(podconfig::PodOp::kRemove, {pod});
  EXPECT_TRUE(tokens_.registered().empty());
}

// Without a token manager (standalone mode) a token source fails its volume, naming the source;
// a source only the kubelet can produce fails it too, saying where it can be set up.
TEST_F(VolumeManagerTest, SelfOwnedVolumesWithSourcesItCannotProduceFailNamingThem) {
  tmpfs_ = false;
  kube::Pod pod = PodReadingConfigMap("u1", "app");
  pod.spec.service_account_name = "web";
  kube::VolumeProjection token, certificate;
  token.service_account_token = kube::ServiceAccountTokenProjection{"", 3600, "token"};
  certificate.unsupported_kind = "podCertificate";
  pod.spec.volumes = {{"sa", kube::ProjectedVolumeSource{{token}, 0644}},
                      {"cert", kube::ProjectedVolumeSource{{certificate}, 0644}}};
  pod.spec.containers[0].volume_mounts = {kube::VolumeMount{"sa", "/sa", "", true, ""},
                                          kube::VolumeMount{"cert", "/cert", "", true, ""}};
  StartManager();
  Send(podconfig::PodOp::kAdd, {pod});
  ASSERT_TRUE(RunUntil([&] { return mount_failures_.size() >= 2; }));
  std::sort(mount_failures_.begin(), mount_failures_.end());
  EXPECT_EQ(mount_failures_[0],
            "web-u1/cert: podCertificate source is not supported by volumemanager: only the "
            "kubelet can produce it, so the volume can be set up only on a node whose kubelet owns "
            "the pod's volumes (--volume-ownership kubelet)");
  EXPECT_EQ(mount_failures_[1],
            "web-u1/sa: serviceAccountToken source (path \"token\"): no token source configured; "
            "service account tokens need an API server (cluster mode)");
  EXPECT_FALSE(fs::exists(Dir("u1", "sa", "kubernetes.io~projected")));
}

TEST_F(VolumeManagerTest, OptionalMissingObjectMountsAnEmptyVolume) {
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "absent", /*optional=*/true)});
  ASSERT_TRUE(RunUntil([&] { return fs::exists(Dir("u1") + "/..data"); }));
  EXPECT_TRUE(Content("u1").empty());
}

TEST_F(VolumeManagerTest, DeletedObjectKeepsTheLastGoodContent) {
  Put("default", "app", {{"k", "v1"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  objects_.Delete({kube::ObjectKind::kConfigMap, "default", "app"});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_failed > 0; }));
  EXPECT_EQ(Content("u1"), (Files{{"k", "v1"}}));
  const MountedVolume* m = manager_->actual().Find(VolumeKey{"u1", "cfg"});
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->last_error().find("not found"), std::string::npos) << m->last_error();
}

// Issue 42, item 1: a volume whose object was deleted after its pod started fails, and keeps
// failing (backing off) for as long as the object is missing; a change of another volume of the
// pod is told all the same, and the run names the failing volume. Waiting for the failing one
// blocked every reload of the pod, for ever.
TEST_F(VolumeManagerTest, AFailingVolumeNeverHoldsBackTheReloadOfTheOthers) {
  vmtest::Listener app("HTTP/1.1 200 OK\r\n\r\n");
  Put("default", "app", {{"k", "v1"}});
  Put("default", "other", {{"k", "o1"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {ReloadingPod("u1", app.port(), "0")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_ok == 2; }));
  objects_.Delete({kube::ObjectKind::kConfigMap, "default", "other"});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_failed >= 1; }));
  EXPECT_EQ(atomicwriter::VisibleContent(Dir("u1", "extra")), (Files{{"k", "o1"}}))
      << "a failed remount keeps the last good content";

  Put("default", "app", {{"k", "v2"}});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v2"}}; }));
  EXPECT_TRUE(RunUntil([&] { return !app.requests().empty(); }, std::chrono::seconds(5)))
      << "the application was never told: the reload waits for the failing volume \"extra\"";
  ASSERT_TRUE(RunUntil([&] { return reloads_.size() == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(app.requests().size(), 1u);
  EXPECT_THAT(reloads_[0], ::testing::StartsWith("web-u1: ok: POST http://:"));
  EXPECT_THAT(reloads_[0], ::testing::HasSubstr("failing volumes not waited for: extra"));
  EXPECT_TRUE(manager_->reload().View().at("u1").pending_volumes.empty());
}

// Issue 42, item 2: a volume can become current with no operation (a remount whose read finds
// the inputs it last wrote ends on the loop). A reload waiting for that volume runs then, not at
// the pod's next operation (beside the kubelet, the disk check 10 minutes away).
TEST_F(VolumeManagerTest, AVolumeMadeCurrentWithoutAnOperationLetsTheWaitingReloadRun) {
  vmtest::Listener app("HTTP/1.1 200 OK\r\n\r\n");
  Put("default", "app", {{"k", "v1"}});
  Put("default", "other", {{"k", "o1"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {ReloadingPod("u1", app.port(), "300ms")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_ok == 2; }));

  Put("default", "app", {{"k", "v2"}});  // "cfg" written: its reload is due 300 ms later
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_ok == 3; }));
  EXPECT_EQ(Content("u1"), (Files{{"k", "v2"}}));
  // Meanwhile "other" is announced changed with the same content (an edit of its metadata):
  // "extra" is remounted once its read lands, and that read is held past the window's end.
  objects_.DeferFetches(true);
  Put("default", "other", {{"k", "o1"}});
  ASSERT_TRUE(RunUntil([&] { return objects_.pending_fetches() == 1; }));
  RunFor(500);
  EXPECT_TRUE(app.requests().empty()) << "\"extra\" is still being read";
  const long unchanged = manager_->stats().remounts_unchanged;
  objects_.CompleteFetches();  // the same inputs: current, on the loop, without an operation
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().remounts_unchanged == unchanged + 1; }));
  EXPECT_TRUE(RunUntil([&] { return !app.requests().empty(); }, std::chrono::seconds(5)))
      << "the application was never told: nothing woke the reload waiting for \"extra\"";
  ASSERT_TRUE(RunUntil([&] { return reloads_.size() == 1; }, std::chrono::seconds(5)));
  EXPECT_THAT(reloads_[0], ::testing::StartsWith("web-u1: ok: POST http://:"));
  EXPECT_EQ(manager_->stats().mounts_ok, 3) << "no operation made \"extra\" current";
}

TEST_F(VolumeManagerTest, RemovedPodIsTornDownOnlyAfterAllSourcesAreSeen) {
  Put("default", "app", {{"k", "v"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return fs::exists(Dir("u1")); }));
  sources_seen_ = false;
  Send(podconfig::PodOp::kRemove, {MakePod("u1", "app")});
  RunFor(300);
  EXPECT_TRUE(fs::exists(Dir("u1")));
  EXPECT_EQ(objects_.registrations().count("u1"), 0u);
  sources_seen_ = true;
  ASSERT_TRUE(RunUntil([&] { return !fs::exists(root_ + "/pods/u1"); }));
}

// A removed pod is unregistered at once (cache/object_manager.h): its teardown reads no object,
// and neither does a teardown that failed and is retried, so nothing waits for it. The version
// dir made immutable (root) or read-only fails the first teardowns.
TEST_F(VolumeManagerTest, ARemovedPodIsUnregisteredAtOnceAndItsRetriedTeardownReadsNoObject) {
  Put("default", "app", {{"k", "v"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v"}}; }));
  EXPECT_EQ(objects_.registrations().count("u1"), 1u);
  const std::string version = Dir("u1") + "/" + fs::read_symlink(Dir("u1") + "/..data").string();
  const int fd = ::open(version.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int flags = 0;
  const bool immutable = ::geteuid() == 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && [&] {
    int set = flags | FS_IMMUTABLE_FL;
    return ::ioctl(fd, FS_IOC_SETFLAGS, &set) == 0;
  }();
  if (!immutable) fs::permissions(version, fs::perms::owner_read | fs::perms::owner_exec);
  const int gets = objects_.gets();
  const size_t fetches = objects_.fetches().size();

  Send(podconfig::PodOp::kRemove, {MakePod("u1", "app")});
  EXPECT_EQ(objects_.registrations().count("u1"), 0u) << "unregistered with the removal";
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().teardowns_failed >= 2; }))
      << "the teardown failed and was retried";
  EXPECT_TRUE(fs::exists(Dir("u1")));
  if (immutable) {
    ASSERT_EQ(::ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
  } else {
    fs::permissions(version, fs::perms::owner_all);
  }
  ::close(fd);
  // The dir goes on the pool before the completion counts it on the loop: wait for both.
  ASSERT_TRUE(RunUntil(
      [&] { return manager_->stats().teardowns_ok == 1 && !fs::exists(root_ + "/pods/u1"); }));
  EXPECT_EQ(objects_.gets(), gets) << "a teardown reads no object";
  EXPECT_EQ(objects_.fetches().size(), fetches);
}

TEST_F(VolumeManagerTest, RestartVerifiesWithoutRewritingAndRemovesOrphans) {
  Put("default", "app", {{"k", "v"}});
  // What an earlier run left: a current volume of a pod that still exists, and one of a pod
  // deleted while the daemon was down.
  atomicwriter::Payload p;
  p["k"] = atomicwriter::FileProjection{"v", 0644, std::nullopt};
  auto kept = EarlierRunSetUp("u1", p);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(EarlierRunSetUp("gone", p).ok());
  // And one the daemon never set up (the kubelet's): never adopted, never removed.
  fs::create_directories(Dir("kubelets") + "/..2025_01_01_00_00_00.1");
  fs::create_directory_symlink("..2025_01_01_00_00_00.1", Dir("kubelets") + "/..data");
  sources_seen_ = false;
  StartManager();
  ASSERT_TRUE(RunUntil([&] { return manager_->reconstructed(); }));
  RunFor(300);
  EXPECT_TRUE(fs::exists(Dir("gone")));  // sources not seen yet: nothing is torn down
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  sources_seen_ = true;
  ASSERT_TRUE(RunUntil([&] { return !fs::exists(root_ + "/pods/gone"); }));
  ASSERT_TRUE(RunUntil([&] {
    const MountedVolume* m = manager_->actual().Find(VolumeKey{"u1", "cfg"});
    return m != nullptr && !m->uncertain;
  }));
  EXPECT_EQ(manager_->actual().Find(VolumeKey{"u1", "cfg"})->ts_dir, kept->ts_dir);
  EXPECT_EQ(manager_->stats().versions_published, 0);
  EXPECT_TRUE(fs::exists(Dir("kubelets") + "/..data"));
  EXPECT_EQ(manager_->actual().Find(VolumeKey{"kubelets", "cfg"}), nullptr);
}

TEST_F(VolumeManagerTest, AVolumeItDidNotSetUpIsRefreshedButLeftInPlaceWhenItsPodGoes) {
  // The kubelet set the volume up; the daemon serves the same pod.
  fs::create_directories(Dir("u1"));
  Put("default", "app", {{"k", "v1"}});
  StartManager();
  Send(podconfig::PodOp::kAdd, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return Content("u1") == Files{{"k", "v1"}}; }));
  Send(podconfig::PodOp::kRemove, {MakePod("u1", "app")});
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().teardowns_not_owned == 1; }));
  EXPECT_EQ(Content("u1"), (Files{{"k", "v1"}}));
  EXPECT_EQ(manager_->stats().teardowns_ok, 0);
  EXPECT_EQ(manager_->actual().Find(VolumeKey{"u1", "cfg"}), nullptr);
}

// The desired state keeps the pod object of the update, not a copy of it (one copy of each pod in
// the daemon, shared with PodConfig and the source).
TEST_F(VolumeManagerTest, DesiredVolumesShareThePodObjectOfTheUpdate) {
  Put("default", "app", {{"k", "v"}});
  StartManager();
  auto pod = std::make_shared<const kube::Pod>(MakePod("u1", "app"));
  manager_->OnPodUpdate(podconfig::PodUpdate{podconfig::PodOp::kAdd, {pod}, "file"});
  ASSERT_EQ(manager_->desired().volumes().size(), 1u);
  EXPECT_EQ(manager_->desired().volumes().begin()->second.pod, pod);
  EXPECT_EQ(manager_->populator().FindPod("u1"), pod);
}

TEST_F(VolumeManagerTest, StopWaitsForInFlightWrites) {
  Put("default", "app", {{"k", "v"}});
  StartManager();
  std::vector<kube::Pod> pods;
  for (int i = 0; i < 50; ++i) pods.push_back(MakePod("p" + std::to_string(i), "app"));
  Send(podconfig::PodOp::kAdd, pods);
  bool stopped = false;
  ASSERT_TRUE(RunUntil([&] { return manager_->stats().mounts_ok > 0; }));
  manager_->Stop([&] { stopped = true; });
  ASSERT_TRUE(RunUntil([&] { return stopped; }));
  // Every write that was started finished: each volume dir that exists is complete, and every
  // volume the manager recorded as mounted is on disk.
  int complete = 0;
  for (int i = 0; i < 50; ++i) {
    const std::string uid = "p" + std::to_string(i);
    if (fs::exists(Dir(uid))) {
      EXPECT_EQ(Content(uid), (Files{{"k", "v"}})) << uid;
      ++complete;
    }
  }
  EXPECT_GE(complete, 1);
  EXPECT_EQ(complete, static_cast<int>(manager_->actual().volumes().size()));
  manager_.reset();
}

}  // namespace
}  // namespace volumemanager
