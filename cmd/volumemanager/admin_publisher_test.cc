// The admin endpoints of a real Daemon on a real loop running on its own thread, as in the binary:
// /healthz fails while the loop thread is blocked (and only then), the other endpoints keep
// answering from the last snapshot, and everything recovers when the loop does.
#include "cmd/volumemanager/admin_publisher.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cache/fake_object_manager.h"
#include "tests/support/test_loop.h"

namespace volumemanager {
namespace {

struct Reply {
  long status = 0;
  std::string body;
};

Reply Get(const std::string& url) {
  Reply r;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* out) {
        static_cast<std::string*>(out)->append(p, size * n);
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  if (curl_easy_perform(curl) == CURLE_OK)
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_cleanup(curl);
  return r;
}

// Polls `url` until its status is `status` (an upper bound against hangs, not a timing check).
Reply WaitForStatus(const std::string& url, long status) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  Reply r;
  while (std::chrono::steady_clock::now() < deadline) {
    r = Get(url);
    if (r.status == status) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return r;
}

constexpr char kPod[] = R"(apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, uid: web-uid}
spec:
  containers:
    - name: app
      image: nginx
      volumeMounts: [{name: cfg, mountPath: /etc/app}]
  volumes:
    - name: cfg
      configMap: {name: app-config}
)";

TEST(AdminPublisherTest, HealthzFailsWhileTheLoopIsBlockedAndOtherEndpointsStillAnswer) {
  vmtest::TempDir root, pods, objects;
  vmtest::WriteFile(pods.File("web.yaml"), kPod);
  vmtest::WriteFile(objects.File("cm.yaml"),
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config, namespace: "
                    "default}\ndata: {greeting: hello}\n");
  config::DaemonConfig cfg;
  cfg.root_dir = root.path() + "/root";
  cfg.state_dir = root.path() + "/state";
  cfg.node_name = "node-1";
  cfg.pod_manifest_path = pods.path();
  cfg.object_manifest_path = objects.path();
  cfg.tmpfs = false;

  vmtest::TestLoop loop;
  Daemon daemon(loop.get(), cfg);
  ASSERT_FALSE(daemon.Start());
  AdminPublisher admin(loop.get(), &daemon, nlohmann::json{{"test", true}});
  ASSERT_TRUE(admin.Start("127.0.0.1:0", "127.0.0.1:0").ok());
  const std::string probe = "http://" + admin.server()->healthz_address();

  // The test's hands on the loop thread: a blocker and a stopper.
  struct Control {
    uv_async_t block{};
    uv_async_t stop{};
    std::promise<void> blocked;
    std::promise<void> release;
    Daemon* daemon = nullptr;
  } control;
  control.daemon = &daemon;
  uv_async_init(loop.get(), &control.block, [](uv_async_t* a) {
    auto* c = static_cast<Control*>(a->data);
    c->blocked.set_value();
    c->release.get_future().wait();  // the loop thread is stuck here
  });
  control.block.data = &control;
  uv_async_init(loop.get(), &control.stop, [](uv_async_t* a) {
    auto* c = static_cast<Control*>(a->data);
    c->daemon->Stop([c] {
      uv_close(reinterpret_cast<uv_handle_t*>(&c->block), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&c->stop), nullptr);
    });
  });
  control.stop.data = &control;
  std::thread loop_thread([&] { uv_run(loop.get(), UV_RUN_DEFAULT); });

  EXPECT_EQ(Get(probe + "/healthz").body, "ok");
  WaitForStatus(probe + "/readyz", 200);
  // Wait for the mount to show in the metrics, so that the snapshot kept below has it.
  const std::string mounted =
      "storage_operation_duration_seconds_count{operation_name=\"volume_mount\",status="
      "\"success\",volume_plugin=\"kubernetes.io/configmap\"} 1";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Get(probe + "/metrics").body.find(mounted) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(Get(probe + "/metrics").body.find(mounted), std::string::npos);

  uv_async_send(&control.block);
  control.blocked.get_future().wait();
  Reply unhealthy = WaitForStatus(probe + "/healthz", 500);
  EXPECT_EQ(unhealthy.status, 500);
  EXPECT_NE(unhealthy.body.find("[-]loop failed: the event loop has not answered for"),
            std::string::npos)
      << unhealthy.body;
  // Still answered, from the last snapshot published.
  Reply metrics = Get(probe + "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find(mounted), std::string::npos);
  EXPECT_EQ(Get(probe + "/readyz").status, 200);

  control.release.set_value();
  EXPECT_EQ(WaitForStatus(probe + "/healthz", 200).body, "ok");

  uv_async_send(&control.stop);
  loop_thread.join();
  admin.Stop();
  EXPECT_TRUE(loop.Close()) << "a handle was left open";
}

// A Daemon whose objects come from a fake that answers fetches only when the test says so, as a
// cluster-mode cache whose first list has not completed.
class SlowObjectsDaemon : public Daemon {
 public:
  using Daemon::Daemon;
  cache::FakeObjectManager fake;

 protected:
  std::optional<StartError> StartObjectSource() override {
    fake.DeferFetches(true);
    kube::ConfigMap cm;
    cm.metadata.name = "app-config";
    cm.metadata.namespace_ = "default";
    cm.data["greeting"] = "hello";
    fake.SetConfigMap(cm);
    fake.SetChangeHandler([this](const kube::ObjectRef& ref) { OnObjectChanged(ref); });
    return std::nullopt;
  }
  cache::ObjectManager* object_manager() override { return &fake; }
};

const server::ReadinessCheck* FindCheck(const std::vector<server::ReadinessCheck>& checks,
                                        const std::string& name) {
  for (const server::ReadinessCheck& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// A daemon on `root` with the one pod kPod in the pod manifest dir `pods`, on a disk.
config::DaemonConfig OnePodConfig(const vmtest::TempDir& root, const vmtest::TempDir& pods) {
  vmtest::WriteFile(pods.File("web.yaml"), kPod);
  config::DaemonConfig cfg;
  cfg.root_dir = root.path() + "/root";
  cfg.state_dir = root.path() + "/state";
  cfg.node_name = "node-1";
  cfg.pod_manifest_path = pods.path();
  cfg.tmpfs = false;
  return cfg;
}

TEST(ReadinessTest, NotReadyUntilEveryVolumesObjectsAreFetchedAndItsContentWritten) {
  vmtest::TempDir root, pods;
  config::DaemonConfig cfg = OnePodConfig(root, pods);
  vmtest::TestLoop loop;
  SlowObjectsDaemon daemon(loop.get(), cfg);
  ASSERT_FALSE(daemon.Start());
  // The pod source and the start-up scan are done, the volume's fetch is not.
  ASSERT_TRUE(loop.RunUntil([&] { return daemon.ready() && daemon.fake.pending_fetches() > 0; }));
  auto checks = daemon.ReadinessChecks();
  const server::ReadinessCheck* synced = FindCheck(checks, "volumes-synced");
  ASSERT_NE(synced, nullptr);
  EXPECT_FALSE(synced->ok);
  EXPECT_EQ(synced->detail,
            "1 of 1 volumes not yet fetched and written or checked since start (pod "
            "default/web-node-1 volume cfg)");
  EXPECT_TRUE(FindCheck(checks, "pod-source-file")->ok);
  EXPECT_TRUE(FindCheck(checks, "volume-reconstruction")->ok);

  daemon.fake.CompleteFetches();
  ASSERT_TRUE(
      loop.RunUntil([&] { return FindCheck(daemon.ReadinessChecks(), "volumes-synced")->ok; }));
  bool stopped = false;
  daemon.Stop([&] { stopped = true; });
  EXPECT_FALSE(FindCheck(daemon.ReadinessChecks(), "shutdown")->ok);
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
}

// Beside the kubelet, a volume the kubelet has not set up is never mounted by the daemon: its
// set-up check (an operation that succeeds and leaves nothing behind in the executor) counts as
// looking at it, and the daemon becomes ready.
TEST(ReadinessTest, AVolumeTheKubeletHasNotSetUpCountsAsCheckedOnceItsSetUpCheckEnded) {
  vmtest::TempDir root, pods;
  config::DaemonConfig cfg = OnePodConfig(root, pods);
  cfg.volume_ownership = config::VolumeOwnership::kKubelet;
  vmtest::TestLoop loop;
  SlowObjectsDaemon daemon(loop.get(), cfg);
  ASSERT_FALSE(daemon.Start());
  ASSERT_TRUE(loop.RunUntil([&] {
    return daemon.volume_manager() != nullptr &&
           daemon.volume_manager()->stats().kubelet_setup_checks > 0 &&
           daemon.volume_manager()->executor().in_flight() == 0;
  }));
  EXPECT_TRUE(daemon.volume_manager()->actual().volumes().empty());  // nothing mounted
  EXPECT_EQ(daemon.volume_manager()->executor().size(), 0u);         // nothing remembered there
  EXPECT_TRUE(FindCheck(daemon.ReadinessChecks(), "volumes-synced")->ok)
      << FindCheck(daemon.ReadinessChecks(), "volumes-synced")->detail;
  bool stopped = false;
  daemon.Stop([&] { stopped = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
}

}  // namespace
}  // namespace volumemanager
