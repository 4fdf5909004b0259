// ReloadController with a fake host (which volumes exist and are current) and real HTTP listeners
// on loopback addresses; the end-to-end behaviour with the daemon is in tests/e2e/test_reload.py.
#include "reload/reload_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>

#include "base/rfc3339.h"
#include "tests/support/http_listener.h"
#include "tests/support/test_loop.h"

namespace reload {
namespace {

using ::testing::HasSubstr;
using vmtest::Listener;

class FakeHost : public ReloadHost {
 public:
  std::vector<std::string> RefreshedVolumes(const std::string&) const override { return volumes; }
  VolumeProgress Progress(const std::string&, const std::string& volume) const override {
    if (writing.count(volume) != 0) return VolumeProgress::kWriting;
    if (failing.count(volume) != 0) return VolumeProgress::kFailing;
    return VolumeProgress::kSettled;
  }
  std::vector<std::string> ObjectVersions(const std::string&,
                                          const std::vector<std::string>&) const override {
    return {"configmap/default/app@7"};
  }
  std::vector<std::string> volumes = {"config", "certs"};
  std::set<std::string> writing;  // newer content on its way
  std::set<std::string> failing;  // backing off after a failed attempt
};

struct Result {
  bool ok;
  std::string message;
};

class ReloadControllerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (controller_) {
      bool closed = false;
      controller_->Close([&] { closed = true; });
      EXPECT_TRUE(loop_.RunUntil([&] { return closed; }));
      controller_.reset();
    }
    EXPECT_TRUE(loop_.Close()) << "a handle was left open";
  }

  ReloadController& Controller(bool cluster_mode = false) {
    ReloadControllerOptions o;
    o.cluster_mode = cluster_mode;
    o.retry_initial = std::chrono::milliseconds(10);
    o.min_interval = std::chrono::milliseconds(0);
    o.http.timeout = std::chrono::milliseconds(2000);
    o.node_addresses = [] { return std::vector<std::string>{"127.0.0.1", "192.0.2.1"}; };
    // Pods at documentation addresses are served by listeners on 127.0.0.2.
    o.http.connect_address_for_testing = [](const std::string& ip) {
      return ip.starts_with("198.51.100.") ? std::string("127.0.0.2") : ip;
    };
    o.on_result = [this](const kube::Pod&, bool ok, const std::string& m) {
      results_.push_back({ok, m});
    };
    o.on_annotation_error = [this](const kube::Pod&, const std::string& e) {
      annotation_errors_.push_back(e);
    };
    o.on_policy_refusal = [this](const kube::Pod&, const std::string& r) {
      policy_refusals_.push_back(r);
    };
    if (signal_) o.send_signals = signal_;
    o.observe = observe_;
    controller_ = std::make_unique<ReloadController>(loop_.get(), o, &host_);
    return *controller_;
  }

  static std::shared_ptr<const kube::Pod> Pod(const std::string& uid, const std::string& reload,
                                              const std::string& delay = "20ms",
                                              const std::string& ip = "") {
    auto p = std::make_shared<kube::Pod>();
    p->metadata.name = "pod-" + uid;
    p->metadata.namespace_ = "default";
    p->metadata.uid = uid;
    if (!reload.empty()) p->metadata.annotations[kReloadAnnotation] = reload;
    if (!delay.empty()) p->metadata.annotations[kReloadDelayAnnotation] = delay;
    p->status.phase = "Running";
    p->status.pod_ip = ip;
    p->status.host_ip = "192.0.2.1";
    return p;
  }
  static std::string Url(const Listener& l, const std::string& path = "/-/reload") {
    return "http://:" + std::to_string(l.port()) + path;
  }
  void Swap(const std::string& uid, const std::string& volume) {
    controller_->OnContentSwapped(
        VolumeSwap{uid, volume, false, "..v", std::chrono::steady_clock::now()});
  }
  // Runs the loop for `ms` (to see that nothing happens).
  void Idle(int ms) {
    loop_.RunUntil([] { return false; }, std::chrono::milliseconds(ms));
  }

  vmtest::TestLoop loop_;
  FakeHost host_;
  std::function<std::vector<base::Result<std::string>>(const std::vector<ContainerSignal>&)>
      signal_;
  bool observe_ = false;
  std::unique_ptr<ReloadController> controller_;
  std::vector<Result> results_;
  std::vector<std::string> annotation_errors_;
  std::vector<std::string> policy_refusals_;
};

TEST_F(ReloadControllerTest, NothingWithoutAChange) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller().OnPod(Pod("a", Url(l)));
  Idle(150);
  EXPECT_TRUE(l.requests().empty()) << "first set-up is no change";
  EXPECT_TRUE(results_.empty());
}

TEST_F(ReloadControllerTest, ABurstInsideTheWindowIsOneCall) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller().OnPod(Pod("a", Url(l), "300ms"));
  for (int i = 0; i < 20; ++i) Swap("a", i % 2 == 0 ? "config" : "certs");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  Idle(400);
  EXPECT_EQ(l.requests().size(), 1u);
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_TRUE(results_[0].ok);
  EXPECT_THAT(results_[0].message,
              HasSubstr("POST http://:" + std::to_string(l.port()) + "/-/reload: HTTP 200"));
  EXPECT_THAT(results_[0].message, HasSubstr("configmap/default/app@7"));
  const auto view = controller_->View();
  ASSERT_EQ(view.count("a"), 1u);
  ASSERT_TRUE(view.at("a").last.has_value());
  EXPECT_EQ(view.at("a").last->volumes, (std::vector<std::string>{"certs", "config"}));
  EXPECT_EQ(controller_->action_counts().at({"http", "success"}), 1);
  EXPECT_EQ(controller_->latency().count(), 1u);
}

TEST_F(ReloadControllerTest, WaitsWhileATriggeringVolumesNewerContentIsOnItsWay) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller().OnPod(Pod("a", Url(l), "0"));
  host_.writing = {"certs"};
  Swap("a", "config");
  Idle(150);
  EXPECT_TRUE(l.requests().empty()) << "certs is still being written";
  EXPECT_EQ(controller_->View().at("a").waiting_for, std::vector<std::string>{"certs"});
  host_.writing.clear();
  controller_->OnVolumeActivity("a");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_EQ(l.requests().size(), 1u);
  EXPECT_TRUE(controller_->View().at("a").waiting_for.empty());
  EXPECT_THAT(results_[0].message, ::testing::Not(HasSubstr("failing")));
}

// Issue 42, item 1: a triggering volume that fails (its object refused, missing or deleted) may
// fail for as long as that lasts; it never holds back the news of the others, and the run says
// it was failing (Event, /debug/state).
TEST_F(ReloadControllerTest, AFailingVolumeIsNotWaitedForAndTheRunNamesIt) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller().OnPod(Pod("a", Url(l), "0"));
  host_.failing = {"certs"};
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_EQ(l.requests().size(), 1u);
  EXPECT_TRUE(results_[0].ok);
  EXPECT_THAT(results_[0].message, HasSubstr("; failing volumes not waited for: certs"));
  const auto view = controller_->View();
  ASSERT_TRUE(view.at("a").last.has_value());
  EXPECT_EQ(view.at("a").last->volumes, std::vector<std::string>{"config"});
  EXPECT_EQ(view.at("a").last->failing_volumes, std::vector<std::string>{"certs"});
  EXPECT_TRUE(view.at("a").pending_volumes.empty());

  // A failing volume whose retry runs is on its way again: waited for, as any other.
  host_.failing.clear();
  host_.writing = {"certs"};
  Swap("a", "config");
  Idle(150);
  EXPECT_EQ(results_.size(), 1u);
  host_.writing.clear();
  controller_->OnVolumeActivity("a");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 2; }));
  EXPECT_THAT(results_[1].message, ::testing::Not(HasSubstr("failing")));
}

TEST_F(ReloadControllerTest, OnlyTheNamedVolumesTrigger) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  auto pod = std::make_shared<kube::Pod>(*Pod("a", Url(l), "0"));
  pod->metadata.annotations[kReloadVolumesAnnotation] = "certs";
  Controller().OnPod(pod);
  host_.writing = {"config"};  // not a trigger: not waited for either
  Swap("a", "config");
  Idle(100);
  EXPECT_TRUE(l.requests().empty());
  Swap("a", "certs");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
}

TEST_F(ReloadControllerTest, BadAnnotationsAreReportedOnceAndDoNothing) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller();
  auto bad = Pod("a", "http://evil.example:80/");
  controller_->OnPod(bad);
  controller_->OnPod(bad);  // the same value again: not reported again
  ASSERT_EQ(annotation_errors_.size(), 1u);
  EXPECT_THAT(annotation_errors_[0], HasSubstr("the host must be empty"));
  EXPECT_EQ(controller_->annotation_errors(), 1u);
  Swap("a", "config");
  Idle(100);
  EXPECT_TRUE(results_.empty());

  auto unknown = std::make_shared<kube::Pod>(*Pod("b", Url(l)));
  unknown->metadata.annotations[kReloadVolumesAnnotation] = "kube-api-access-x";
  controller_->OnPod(unknown);
  ASSERT_EQ(annotation_errors_.size(), 2u);
  EXPECT_THAT(annotation_errors_[1], HasSubstr("volume \"kube-api-access-x\" is not a configMap"));

  controller_->OnPod(Pod("c", "signal:SIGHUP"));
  ASSERT_EQ(annotation_errors_.size(), 3u);
  EXPECT_THAT(annotation_errors_[2], HasSubstr("signal actions need cluster mode"));
}

TEST_F(ReloadControllerTest, TerminatingOrStoppedPodsAreNotCalled) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller(/*cluster_mode=*/true);
  auto terminating = std::make_shared<kube::Pod>(*Pod("a", Url(l), "0", "198.51.100.2"));
  terminating->metadata.deletion_timestamp = "2026-11-28T00:00:00Z";
  controller_->OnPod(terminating);
  auto pending = std::make_shared<kube::Pod>(*Pod("b", Url(l), "0", "198.51.100.2"));
  pending->status.phase = "Pending";
  controller_->OnPod(pending);
  Swap("a", "config");
  Swap("b", "config");
  Idle(150);
  EXPECT_TRUE(l.requests().empty());
  EXPECT_EQ(controller_->action_counts().at({"http", "skipped"}), 2);
}

TEST_F(ReloadControllerTest, ContainersThatStartedAfterTheChangeNeedNoReload) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller();
  auto fresh = std::make_shared<kube::Pod>(*Pod("a", Url(l), "0"));
  fresh->status.container_statuses.push_back({"app", "containerd://1", "2200-01-01T00:00:00Z"});
  controller_->OnPod(fresh);
  Swap("a", "config");
  Idle(150);
  EXPECT_TRUE(l.requests().empty());
  auto old = std::make_shared<kube::Pod>(*Pod("b", Url(l), "0"));
  old->status.container_statuses.push_back({"app", "containerd://2", "2020-01-01T00:00:00Z"});
  controller_->OnPod(old);
  Swap("b", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
}

// A startedAt with a zone offset is read at its offset. It was read as UTC whatever its offset:
// "<an hour from now>+02:00", an hour ago, looked like a start after the change (no reload), and
// "<an hour ago>-02:00", an hour from now, like a start before it (a reload for nothing).
TEST_F(ReloadControllerTest, AStartTimesZoneOffsetIsApplied) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller();
  // "2026-11-30T13:00:00Z" at an offset: the same clock reading, another instant.
  const auto at_offset = [](std::chrono::system_clock::time_point local, const char* offset) {
    std::string text = base::FormatRfc3339(local);
    text.pop_back();  // the 'Z'
    return text + offset;
  };
  const auto now = std::chrono::system_clock::now();
  auto later = std::make_shared<kube::Pod>(*Pod("a", Url(l), "0"));
  later->status.container_statuses.push_back(
      {"app", "containerd://1", at_offset(now - std::chrono::hours(1), "-02:00")});
  controller_->OnPod(later);
  Swap("a", "config");
  Idle(150);
  EXPECT_TRUE(l.requests().empty()) << "started an hour after the change";
  auto earlier = std::make_shared<kube::Pod>(*Pod("b", Url(l), "0"));
  earlier->status.container_statuses.push_back(
      {"app", "containerd://2", at_offset(now + std::chrono::hours(1), "+02:00")});
  controller_->OnPod(earlier);
  Swap("b", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }))
      << "started an hour before the change";
  EXPECT_TRUE(results_[0].ok) << results_[0].message;
  EXPECT_EQ(l.requests().size(), 1u);
}

// Pods at documentation addresses (198.51.100.0/24), reached through a loopback listener that
// stands in for them (HttpCallerOptions::connect_address_for_testing): cluster mode never calls
// loopback itself.
TEST_F(ReloadControllerTest, ClusterModeCallsOnlyThePodsOwnIp) {
  Listener pod_listener("HTTP/1.1 200 OK\r\n\r\n", "127.0.0.2");
  Controller(/*cluster_mode=*/true);
  controller_->OnPod(Pod("a", Url(pod_listener), "0", "198.51.100.7"));
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_TRUE(results_[0].ok) << results_[0].message;
  EXPECT_THAT(pod_listener.requests().at(0), HasSubstr("Host: 198.51.100.7:"));

  // (A hostNetwork pod is refused earlier: AHostNetworkPodsHttpActionIsRefusedOnceWhenThe...)
  controller_->OnPod(Pod("c", Url(pod_listener), "0", "192.0.2.1"));         // a node address
  controller_->OnPod(Pod("d", Url(pod_listener), "0", "::ffff:127.0.0.2"));  // loopback
  Swap("c", "config");
  Swap("d", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 3; }));
  EXPECT_EQ(pod_listener.requests().size(), 1u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(results_[i].ok);
    EXPECT_THAT(results_[i].message, HasSubstr("refused:"));
  }
  EXPECT_EQ(controller_->action_counts().at({"http", "refused"}), 2);
}

// Issue 42, item 6b: a hostNetwork pod's own IP is the node's, so its HTTP action can never be
// made (cluster mode). It was refused only at the first change, a ReloadFailed per change; it is
// said once, when the pod appears. Issue 44, item 5: the daemon's own rule, not the pod's
// mistake: a policy refusal (a Normal Event), not an annotation error (a Warning).
TEST_F(ReloadControllerTest, AHostNetworkPodsHttpActionIsRefusedOnceWhenThePodAppears) {
  Listener pod_listener("HTTP/1.1 200 OK\r\n\r\n", "127.0.0.2");
  Controller(/*cluster_mode=*/true);
  auto host_network =
      std::make_shared<kube::Pod>(*Pod("b", Url(pod_listener), "0", "198.51.100.8"));
  host_network->spec.host_network = true;
  controller_->OnPod(host_network);
  ASSERT_EQ(policy_refusals_.size(), 1u) << "refused when the pod appears, before any change";
  EXPECT_THAT(policy_refusals_[0], HasSubstr("annotation volumemanager.io/reload"));
  EXPECT_THAT(policy_refusals_[0], HasSubstr("hostNetwork"));
  EXPECT_TRUE(annotation_errors_.empty()) << annotation_errors_[0];
  EXPECT_EQ(controller_->annotation_errors(), 0u);
  EXPECT_EQ(controller_->policy_refusals(), 1u);
  EXPECT_EQ(controller_->View().at("b").policy_refusal, policy_refusals_[0]);
  EXPECT_EQ(controller_->View().at("b").annotation_error, "");

  // A status update (the same annotations and spec) says nothing again; changes touch nothing.
  auto later = std::make_shared<kube::Pod>(*host_network);
  later->status.pod_ip = "198.51.100.9";
  controller_->OnPod(later);
  Swap("b", "config");
  Swap("b", "config");
  Idle(200);
  EXPECT_EQ(policy_refusals_.size(), 1u);
  EXPECT_TRUE(annotation_errors_.empty());
  EXPECT_TRUE(results_.empty()) << results_[0].message;
  EXPECT_TRUE(pod_listener.requests().empty());

  // A bad annotation on such a pod is still the pod's mistake: an annotation error.
  auto bad = std::make_shared<kube::Pod>(*later);
  bad->metadata.annotations[kReloadDelayAnnotation] = "soon";
  controller_->OnPod(bad);
  ASSERT_EQ(annotation_errors_.size(), 1u);
  EXPECT_EQ(controller_->annotation_errors(), 1u);
  EXPECT_EQ(controller_->policy_refusals(), 0u);
}

// Standalone, the manifests are the node administrator's: a hostNetwork pod is called at its
// podIP, or 127.0.0.1 (PodActionAddress), as any other.
TEST_F(ReloadControllerTest, StandaloneCallsAHostNetworkPod) {
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller(/*cluster_mode=*/false);
  auto host_network = std::make_shared<kube::Pod>(*Pod("a", Url(l), "0"));
  host_network->spec.host_network = true;
  controller_->OnPod(host_network);
  EXPECT_TRUE(annotation_errors_.empty());
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_TRUE(results_[0].ok) << results_[0].message;
  EXPECT_EQ(l.requests().size(), 1u);
}

TEST_F(ReloadControllerTest, RetriesAreBounded) {
  Listener failing("HTTP/1.1 503 Service Unavailable\r\n\r\n");
  Listener client_error("HTTP/1.1 404 Not Found\r\n\r\n");
  Controller();
  controller_->OnPod(Pod("a", Url(failing), "0"));
  controller_->OnPod(Pod("b", Url(client_error), "0"));
  Swap("a", "config");
  Swap("b", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 2; }));
  EXPECT_EQ(failing.requests().size(), 4u) << "max_attempts";
  EXPECT_EQ(client_error.requests().size(), 1u) << "a 4xx is final";
  EXPECT_EQ(controller_->action_counts().at({"http", "failure"}), 2);
}

TEST_F(ReloadControllerTest, ARetryGoesNowhereWhenThePodsIpChanged) {
  Listener failing("HTTP/1.1 503 Service Unavailable\r\n\r\n", "127.0.0.2");
  Controller(/*cluster_mode=*/true);
  controller_->OnPod(Pod("a", Url(failing), "0", "198.51.100.2"));
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return failing.requests().size() == 1; }));
  controller_->OnPod(Pod("a", Url(failing), "0", "198.51.100.3"));  // the IP went to another pod
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_THAT(results_[0].message,
              HasSubstr("the pod's IP changed from 198.51.100.2 to 198.51.100.3"));
  EXPECT_EQ(failing.requests().size(), 1u);
}

TEST_F(ReloadControllerTest, AHangingListenerDelaysNoOtherPod) {
  Listener hung("");
  Listener quick("HTTP/1.1 200 OK\r\n\r\n");
  Controller();
  controller_->OnPod(Pod("a", Url(hung), "0"));
  controller_->OnPod(Pod("b", Url(quick), "0"));
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return hung.requests().size() == 1; }));
  Swap("b", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_TRUE(results_[0].ok);
  EXPECT_EQ(quick.requests().size(), 1u);
  hung.Release();
}

TEST_F(ReloadControllerTest, ChangesDuringARunGiveOneMoreRun) {
  Listener held("HTTP/1.1 200 OK\r\n\r\n", "127.0.0.1", /*hold=*/true);
  Controller();
  controller_->OnPod(Pod("a", Url(held), "0"));
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return held.requests().size() == 1; }));
  for (int i = 0; i < 5; ++i) Swap("a", "certs");
  held.Release();
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 2; }));
  Idle(100);
  EXPECT_EQ(results_.size(), 2u);
  EXPECT_EQ(held.requests().size(), 2u);
}

TEST_F(ReloadControllerTest, SignalsGoToTheContainersThatMountAChangedVolume) {
  std::vector<ContainerSignal> sent;
  std::mutex mu;
  signal_ = [&](const std::vector<ContainerSignal>& requests) {
    std::lock_guard<std::mutex> l(mu);
    std::vector<base::Result<std::string>> out;
    for (const ContainerSignal& r : requests) {
      sent.push_back(r);
      out.emplace_back("PID 1 of container " + r.container_name);
    }
    return out;
  };
  Controller(/*cluster_mode=*/true);
  auto pod = std::make_shared<kube::Pod>(*Pod("a", "signal:SIGHUP", "0", "127.0.0.2"));
  kube::Container web;
  web.name = "web";
  kube::VolumeMount config_mount;
  config_mount.name = "config";
  config_mount.mount_path = "/etc/web";
  web.volume_mounts.push_back(config_mount);
  kube::Container sidecar;
  sidecar.name = "sidecar";
  kube::VolumeMount certs_mount;
  certs_mount.name = "certs";
  certs_mount.mount_path = "/certs";
  sidecar.volume_mounts.push_back(certs_mount);
  pod->spec.containers = {web, sidecar};
  pod->status.container_statuses = {{"web", "containerd://aa", "2020-01-01T00:00:00Z"},
                                    {"sidecar", "containerd://bb", "2020-01-01T00:00:00Z"}};
  controller_->OnPod(pod);
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_TRUE(results_[0].ok) << results_[0].message;
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].container_name, "web");
  EXPECT_EQ(sent[0].container_id, "containerd://aa");
  EXPECT_EQ(sent[0].signal, SIGHUP);
}

// Issue 42, item 4: one ConfigMap shared by eight pods with a signal action. Each pod's attempt
// used to scan /proc on its own, each on a thread of the libuv pool, queued ahead of volume writes:
// eight scans, and while they ran (here: held) a write waited. Now the attempts of one turn go in
// one call, on the batcher's own thread, and the pool stays free.
TEST_F(ReloadControllerTest, OneScanServesEveryPodOfAChangeAndNoScanHoldsThePool) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::vector<size_t> calls;  // requests per call
  signal_ = [&](const std::vector<ContainerSignal>& requests) {
    std::unique_lock<std::mutex> l(mu);
    calls.push_back(requests.size());
    cv.notify_all();
    cv.wait(l, [&] { return released; });
    std::vector<base::Result<std::string>> out;
    for (const ContainerSignal& r : requests) out.emplace_back("PID 1 of " + r.pod_uid);
    return out;
  };
  struct Release {
    std::mutex& mu;
    std::condition_variable& cv;
    bool& released;
    ~Release() {
      std::lock_guard<std::mutex> l(mu);
      released = true;
      cv.notify_all();
    }
  } release{mu, cv, released};
  Controller(/*cluster_mode=*/true);
  constexpr int kPods = 8;
  for (int i = 0; i < kPods; ++i) {
    auto pod = std::make_shared<kube::Pod>(
        *Pod("p" + std::to_string(i), "signal:SIGHUP", "0", "127.0.0.2"));
    kube::Container web;
    web.name = "web";
    kube::VolumeMount mount;
    mount.name = "config";
    mount.mount_path = "/etc/web";
    web.volume_mounts.push_back(mount);
    pod->spec.containers = {web};
    pod->status.container_statuses = {
        {"web", "containerd://" + std::to_string(i), "2020-01-01T00:00:00Z"}};
    controller_->OnPod(pod);
  }
  for (int i = 0; i < kPods; ++i) Swap("p" + std::to_string(i), "config");
  ASSERT_TRUE(loop_.RunUntil([&] {
    std::lock_guard<std::mutex> l(mu);
    return !calls.empty();
  }));

  // A volume write queued while the scan runs: it must not wait for the scan.
  struct Write {
    uv_work_t req{};
    bool done = false;
  } write;
  write.req.data = &write;
  uv_queue_work(
      loop_.get(), &write.req, [](uv_work_t*) {},
      [](uv_work_t* req, int) { static_cast<Write*>(req->data)->done = true; });
  const bool write_ran = loop_.RunUntil([&] { return write.done; }, std::chrono::seconds(2));
  {
    std::lock_guard<std::mutex> l(mu);
    released = true;
    cv.notify_all();
  }
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == kPods && write.done; }));
  EXPECT_TRUE(write_ran) << "a volume write waited for the signal scans";
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(calls, std::vector<size_t>{kPods}) << "one scan of /proc for the pods of one change";
  for (const Result& r : results_) EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(ReloadControllerTest, ObserveModeReportsARunAndCallsNothing) {
  std::atomic<int> signals{0};
  signal_ = [&](const std::vector<ContainerSignal>& requests) {
    signals += static_cast<int>(requests.size());
    return std::vector<base::Result<std::string>>(requests.size(), std::string("sent"));
  };
  observe_ = true;
  Listener l("HTTP/1.1 200 OK\r\n\r\n");
  Controller(/*cluster_mode=*/true);
  auto pod =
      std::make_shared<kube::Pod>(*Pod("a", Url(l) + ", signal:SIGHUP", "0", "198.51.100.2"));
  kube::Container web;
  web.name = "web";
  kube::VolumeMount config_mount;
  config_mount.name = "config";
  config_mount.mount_path = "/etc/web";
  web.volume_mounts.push_back(config_mount);
  pod->spec.containers = {web};
  pod->status.container_statuses = {{"web", "containerd://aa", "2020-01-01T00:00:00Z"}};
  controller_->OnPod(pod);
  Swap("a", "config");
  // The run that would start is counted as observed, once per action.
  ASSERT_TRUE(loop_.RunUntil([&] {
    const auto& counts = controller_->action_counts();
    return counts.count({"http", "observed"}) && counts.count({"signal", "observed"});
  }));
  Idle(200);
  EXPECT_TRUE(l.requests().empty()) << "observe mode sent a reload request";
  EXPECT_EQ(signals.load(), 0) << "observe mode sent a signal";
  EXPECT_TRUE(results_.empty());
  EXPECT_EQ(controller_->action_counts().at({"http", "observed"}), 1);
  EXPECT_TRUE(controller_->View().at("a").pending_volumes.empty());
}

TEST_F(ReloadControllerTest, SignalsAreRefusedWhereNotEnabled) {
  Controller(/*cluster_mode=*/true);
  auto pod = std::make_shared<kube::Pod>(*Pod("a", "signal:SIGUSR1", "0", "127.0.0.2"));
  controller_->OnPod(pod);
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_FALSE(results_[0].ok);
  EXPECT_THAT(results_[0].message, HasSubstr("signal actions are not enabled on this node"));
}

// An attempt's kind is its producer's code (base::StatusCode kRefused, kNotSent), not its text:
// each way an action is refused or not sent counts as "refused", not as "failure". (An address
// not allowed: ClusterModeCallsOnlyThePodsOwnIp.)
TEST_F(ReloadControllerTest, ASignalWhereSignalsAreNotEnabledCountsAsRefused) {
  Controller(/*cluster_mode=*/true);
  controller_->OnPod(std::make_shared<kube::Pod>(*Pod("a", "signal:SIGUSR1", "0", "127.0.0.2")));
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_FALSE(results_[0].ok);
  EXPECT_EQ(controller_->action_counts().at({"signal", "refused"}), 1);
  EXPECT_EQ(controller_->action_counts().count({"signal", "failure"}), 0u);
}

TEST_F(ReloadControllerTest, ASignalWithNoRunningContainerCountsAsRefused) {
  signal_ = [](const std::vector<ContainerSignal>& requests) {
    return std::vector<base::Result<std::string>>(requests.size(), std::string("sent"));
  };
  Controller(/*cluster_mode=*/true);
  auto pod = std::make_shared<kube::Pod>(*Pod("a", "signal:SIGHUP", "0", "127.0.0.2"));
  kube::Container web;
  web.name = "web";
  kube::VolumeMount mount;
  mount.name = "config";
  mount.mount_path = "/etc/web";
  web.volume_mounts.push_back(mount);
  pod->spec.containers = {web};  // no containerStatuses: not running
  controller_->OnPod(pod);
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 1; }));
  EXPECT_FALSE(results_[0].ok);
  EXPECT_THAT(results_[0].message, HasSubstr("no running container to signal"));
  EXPECT_EQ(controller_->action_counts().at({"signal", "refused"}), 1);
  EXPECT_EQ(controller_->action_counts().count({"signal", "failure"}), 0u);
}

TEST_F(ReloadControllerTest, ARetryNotSentCountsAsRefusedNotAsFailure) {
  Listener failing("HTTP/1.1 503 Service Unavailable\r\n\r\n", "127.0.0.2");
  Controller(/*cluster_mode=*/true);
  controller_->OnPod(Pod("a", Url(failing), "0", "198.51.100.2"));
  controller_->OnPod(Pod("b", Url(failing), "0", "198.51.100.4"));
  Swap("a", "config");
  Swap("b", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return failing.requests().size() >= 2; }));
  controller_->OnPod(Pod("a", Url(failing), "0", "198.51.100.3"));  // the IP changed
  auto terminating = std::make_shared<kube::Pod>(*Pod("b", Url(failing), "0", "198.51.100.4"));
  terminating->metadata.deletion_timestamp = "2026-11-28T00:00:00Z";
  controller_->OnPod(terminating);
  ASSERT_TRUE(loop_.RunUntil([&] { return results_.size() == 2; }));
  for (const Result& r : results_) {
    EXPECT_FALSE(r.ok);
    EXPECT_THAT(r.message, HasSubstr("not sent: ")) << r.message;
  }
  EXPECT_EQ(controller_->action_counts().at({"http", "refused"}), 2);
  EXPECT_EQ(controller_->action_counts().count({"http", "failure"}), 0u);
}

TEST_F(ReloadControllerTest, RemovedPodsAreForgotten) {
  Listener held("");
  Controller();
  controller_->OnPod(Pod("a", Url(held), "0"));
  Swap("a", "config");
  ASSERT_TRUE(loop_.RunUntil([&] { return held.requests().size() == 1; }));
  controller_->OnPodRemoved("a");
  EXPECT_EQ(controller_->pod_count(), 0u);
  held.Release();
  Idle(100);
  EXPECT_TRUE(results_.empty());
  controller_->OnPod(Pod("b", "", ""));  // no annotation: nothing kept
  EXPECT_EQ(controller_->pod_count(), 0u);
}

}  // namespace
}  // namespace reload
