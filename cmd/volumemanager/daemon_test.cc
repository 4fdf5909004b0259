// Daemon's lifecycle on a real loop with manifest directories: Start, ready once the start-up scan
// and the pod source are done, the pod's volume written, the heap trimmed after that bulk work,
// Stop's callback after that; and a start failure that names its flag and exit code.
#include "cmd/volumemanager/daemon.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/test_loop.h"

namespace volumemanager {
namespace {

using ::testing::HasSubstr;

constexpr char kPod[] = R"(apiVersion: v1
kind: Pod
metadata: {name: web, uid: web-uid}
spec:
  containers:
    - name: app
      image: nginx
      volumeMounts: [{name: cfg, mountPath: /etc/app}]
  volumes:
    - name: cfg
      configMap: {name: app-config}
)";

constexpr char kConfigMap[] = R"(apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {greeting: hello}
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

config::DaemonConfig Config(const vmtest::TempDir& root, const vmtest::TempDir& pods,
                            const vmtest::TempDir& objects) {
  config::DaemonConfig cfg;
  cfg.root_dir = root.path() + "/root";  // created by Start
  cfg.state_dir = root.path() + "/state";
  cfg.node_name = "node-1";
  cfg.pod_manifest_path = pods.path();
  cfg.object_manifest_path = objects.path();
  cfg.tmpfs = false;
  return cfg;
}

TEST(DaemonTest, StartReadyWriteStop) {
  vmtest::TempDir root, pods, objects;
  vmtest::WriteFile(pods.File("web.yaml"), kPod);
  vmtest::WriteFile(objects.File("app-config.yaml"), kConfigMap);
  const config::DaemonConfig cfg = Config(root, pods, objects);
  const std::string file =
      cfg.root_dir + "/pods/web-uid/volumes/kubernetes.io~configmap/cfg/greeting";

  vmtest::TestLoop loop;
  Daemon daemon(loop.get(), cfg);
  daemon.set_heap_trim_quiet(std::chrono::milliseconds(10));
  EXPECT_FALSE(daemon.ready());
  auto error = daemon.Start();
  ASSERT_FALSE(error) << error->message;
  // Nothing is written before the node's lock is held: the root dir comes once it is.
  EXPECT_FALSE(std::filesystem::exists(cfg.root_dir));
  ASSERT_TRUE(loop.RunUntil([&] { return daemon.holding_lock() && daemon.ready(); }));
  EXPECT_TRUE(std::filesystem::is_directory(cfg.root_dir + "/pods"));
  ASSERT_TRUE(loop.RunUntil([&] { return std::filesystem::exists(file); }));
  EXPECT_EQ(ReadFile(file), "hello");
  // The start-up reads and the pod's mount are bulk work: the heap is trimmed once they are over.
  ASSERT_TRUE(loop.RunUntil([&] { return daemon.heap_trimmer().trims() >= 1; }));

  bool stopped = false;
  daemon.Stop([&] { stopped = true; });
  EXPECT_TRUE(daemon.stopping());
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
  // A second Stop does nothing (its callback never runs), and the volume stays.
  bool again = false;
  daemon.Stop([&] { again = true; });
  loop.RunUntil([&] { return again; }, std::chrono::milliseconds(50));
  EXPECT_FALSE(again);
  EXPECT_EQ(ReadFile(file), "hello");
}

TEST(DaemonTest, NotReadyWhileAPodSourceHasNotDelivered) {
  vmtest::TempDir root, pods, objects;
  vmtest::WriteFile(pods.File("web.yaml"), kPod);
  vmtest::WriteFile(objects.File("app-config.yaml"), kConfigMap);
  config::DaemonConfig cfg = Config(root, pods, objects);
  cfg.manifest_url = "http://127.0.0.1:1/pods";  // refused: this source never delivers
  const std::string file =
      cfg.root_dir + "/pods/web-uid/volumes/kubernetes.io~configmap/cfg/greeting";
  vmtest::TestLoop loop;
  Daemon daemon(loop.get(), cfg);
  auto error = daemon.Start();
  ASSERT_FALSE(error) << error->message;
  // The file source's pod is mounted (mounting does not wait for the other sources)...
  ASSERT_TRUE(loop.RunUntil([&] { return std::filesystem::exists(file); }));
  // ...but the desired state is not known to be complete.
  EXPECT_FALSE(daemon.ready());
  bool stopped = false;
  daemon.Stop([&] { stopped = true; });
  ASSERT_TRUE(loop.RunUntil([&] { return stopped; }));
}

TEST(DaemonTest, StartFailureNamesTheFlagAndTheExitCode) {
  vmtest::TempDir root, pods, objects;
  config::DaemonConfig cfg = Config(root, pods, objects);
  cfg.root_dir = root.path() + "/no/such/parent";
  vmtest::TestLoop loop;
  Daemon daemon(loop.get(), cfg);
  auto error = daemon.Start();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->exit_code, 1);
  EXPECT_THAT(error->message, HasSubstr("--root-dir: mkdir " + cfg.root_dir));

  cfg = Config(root, pods, objects);
  cfg.node_allocatable["cpu"] = "lots";
  Daemon bad_flag(loop.get(), cfg);
  error = bad_flag.Start();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->exit_code, 2);
  EXPECT_THAT(error->message, HasSubstr("--node-allocatable: cpu=lots"));
}

}  // namespace
}  // namespace volumemanager
