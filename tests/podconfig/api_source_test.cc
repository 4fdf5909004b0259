// The API pod source against kube-test-apiserver, merged by a real PodConfig: which pods it
// delivers (this node's, no mirror pods), when (only after the first list; one delivery per
// burst), what a graceful deletion looks like, a pod that cannot be decoded, and an outage.
#include "podconfig/api_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kubeclient/auth/credentials.h"
#include "podconfig/pod_config.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace podconfig {
namespace {

using kube_testing::TestApiServerProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using vmtest::LogCapture;
using vmtest::TestLoop;

const char kNode[] = "node-1";

std::string PodsPath(const std::string& ns) { return "/api/v1/namespaces/" + ns + "/pods"; }

nlohmann::json PodJson(const std::string& name, const std::string& node,
                       const std::string& ns = "shop") {
  nlohmann::json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "web"}}}}},
      {"spec",
       {{"containers",
         {{{"name", "app"},
           {"image", "web:1"},
           {"volumeMounts", {{{"name", "cfg"}, {"mountPath", "/etc/app"}}}}}}},
        {"volumes", {{{"name", "cfg"}, {"configMap", {{"name", "app-config"}}}}}}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

class ApiSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto creds = kubeclient::LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok());
    auto http = kubeclient::HttpClient::Create(runner_.get(), *creds);
    ASSERT_TRUE(http.ok());
    http_ = std::move(*http);
    kubeclient::RetryPolicy policy;
    policy.backoff.initial = std::chrono::milliseconds(20);
    policy.backoff.cap = std::chrono::milliseconds(100);
    api_ = std::make_unique<kubeclient::ApiClient>(http_.get(), policy);
    config_ = std::make_unique<PodConfig>([this](const PodUpdate& u) { updates_.push_back(u); });
  }

  void TearDown() override {
    source_.Stop();
    api_.reset();
    http_.reset();
    EXPECT_TRUE(runner_.Close()) << "a libuv handle was left open";
  }

  void StartSource() {
    ApiSourceOptions options;
    options.node_name = kNode;
    options.reflector.relist_backoff.initial = std::chrono::milliseconds(50);
    options.reflector.relist_backoff.cap = std::chrono::milliseconds(200);
    options.reflector.reconnect_backoff.initial = std::chrono::milliseconds(50);
    options.reflector.reconnect_backoff.cap = std::chrono::milliseconds(200);
    options.reflector.min_watch_timeout = std::chrono::seconds(30);
    options.reflector.max_watch_timeout = std::chrono::seconds(31);
    options.reflector.resync_period = std::chrono::milliseconds(0);
    options.reflector.short_watch = std::chrono::milliseconds(200);
    PodConfig::Sink sink = config_->RegisterSource(kApiSource);
    ASSERT_TRUE(source_
                    .Start(api_.get(), options,
                           [this, sink](std::vector<PodPtr> pods) {
                             set_sizes_.push_back(pods.size());
                             sink(std::move(pods));
                           })
                    .ok());
  }

  void Create(const nlohmann::json& pod) {
    auto reply = server_.Api("POST", PodsPath(pod["metadata"]["namespace"]), pod);
    ASSERT_EQ(reply.code, 201) << reply.raw;
  }
  void Delete(const std::string& ns, const std::string& name, const std::string& query = "") {
    auto reply = server_.Api("DELETE", PodsPath(ns) + "/" + name + query);
    ASSERT_EQ(reply.code, 200) << reply.raw;
  }
  nlohmann::json Get(const std::string& ns, const std::string& name) {
    return server_.Api("GET", PodsPath(ns) + "/" + name).body;
  }
  void Put(const nlohmann::json& pod) {
    auto reply = server_.Api(
        "PUT",
        PodsPath(pod["metadata"]["namespace"]) + "/" + pod["metadata"]["name"].get<std::string>(),
        pod);
    ASSERT_EQ(reply.code, 200) << reply.raw;
  }

  // The names ("namespace/name") of the source's current pods, as PodConfig holds them.
  std::set<std::string> Names() {
    std::set<std::string> names;
    for (const auto& [uid, pod] : config_->PodsOf(kApiSource)) {
      names.insert(pod->metadata.NamespacedName());
    }
    return names;
  }
  bool WaitForNames(const std::set<std::string>& want) {
    return runner_.RunUntil([&] { return Names() == want; });
  }

  // The number of GETs of the pod collection (lists and watches) the server answered.
  int PodCollectionRequests() {
    int n = 0;
    const kube_testing::HttpReply reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      if (r["path"] == "/api/v1/pods" && r["method"] == "GET") ++n;
    }
    return n;
  }

  TestApiServerProcess server_;
  TestLoop runner_;
  std::unique_ptr<kubeclient::HttpClient> http_;
  std::unique_ptr<kubeclient::ApiClient> api_;
  std::unique_ptr<PodConfig> config_;
  std::vector<PodUpdate> updates_;
  std::vector<size_t> set_sizes_;
  ApiSource source_;
};

TEST_F(ApiSourceTest, DeliversOnlyThisNodesPodsAndNoMirrorPods) {
  Create(PodJson("web-0", kNode));
  Create(PodJson("web-1", kNode, "other"));
  Create(PodJson("elsewhere", "node-2"));
  Create(PodJson("unscheduled", ""));
  nlohmann::json mirror = PodJson("static-web-node-1", kNode);
  mirror["metadata"]["annotations"] = {{"kubernetes.io/config.mirror", "abc123"}};
  Create(mirror);
  StartSource();
  ASSERT_TRUE(WaitForNames({"shop/web-0", "other/web-1"}));
  EXPECT_TRUE(config_->SourceSeen(kApiSource));
  // Every delivered pod is this node's and carries the server's defaults and the source.
  for (const auto& [uid, pod] : config_->PodsOf(kApiSource)) {
    EXPECT_EQ(pod->spec.node_name, kNode);
    EXPECT_FALSE(uid.empty());
    EXPECT_EQ(pod->metadata.annotations.at(kConfigSourceAnnotation), kApiSource);
  }
  // The server filtered by node; the source itself left the mirror pod out.
  EXPECT_EQ(source_.stats().mirror_skipped, 1);

  // Pods bound later arrive through the watch; a mirror pod created later is left out too.
  Create(PodJson("web-2", kNode));
  nlohmann::json mirror2 = PodJson("static-db-node-1", kNode);
  mirror2["metadata"]["annotations"] = {{"kubernetes.io/config.mirror", "def456"}};
  Create(mirror2);
  Create(PodJson("elsewhere-2", "node-2"));
  ASSERT_TRUE(WaitForNames({"shop/web-0", "other/web-1", "shop/web-2"}));
  ASSERT_TRUE(runner_.RunUntil([&] { return source_.stats().mirror_skipped == 2; }));
  EXPECT_EQ(Names(), (std::set<std::string>{"shop/web-0", "other/web-1", "shop/web-2"}));
}

TEST_F(ApiSourceTest, FirstDeliveryOnlyAfterTheFirstCompleteList) {
  Create(PodJson("web-0", kNode));
  // Every list fails (and is retried) until the fault is cleared.
  server_.Admin("POST", "faults",
                {{"verb", "list"}, {"resource", "pods"}, {"status", 500}, {"times", -1}});
  config_->RegisterSource(kFileSource)({});  // a manifest dir with no pods: seen at once
  StartSource();
  ASSERT_TRUE(runner_.RunUntil([&] { return PodCollectionRequests() >= 4; }));
  EXPECT_FALSE(config_->SourceSeen(kApiSource));
  EXPECT_FALSE(config_->AllSourcesSeen());
  EXPECT_FALSE(source_.synced());
  EXPECT_THAT(set_sizes_, IsEmpty());

  server_.Admin("DELETE", "faults");
  ASSERT_TRUE(runner_.RunUntil([&] { return config_->SourceSeen(kApiSource); }));
  EXPECT_TRUE(config_->AllSourcesSeen());
  EXPECT_THAT(set_sizes_, ElementsAre(1u));  // the first delivery is the complete list
  EXPECT_EQ(Names(), std::set<std::string>{"shop/web-0"});
}

TEST_F(ApiSourceTest, AnEmptyListIsSeenWithNoPods) {
  StartSource();
  ASSERT_TRUE(runner_.RunUntil([&] { return config_->SourceSeen(kApiSource); }));
  EXPECT_THAT(set_sizes_, ElementsAre(0u));
  ASSERT_EQ(updates_.size(), 1u);  // PodConfig's empty ADD: the source is ready
  EXPECT_EQ(updates_[0].op, PodOp::kAdd);
  EXPECT_THAT(updates_[0].pods, IsEmpty());
}

TEST_F(ApiSourceTest, ABurstIsOneDelivery) {
  constexpr int kPods = 300;
  for (int i = 0; i < kPods; ++i) Create(PodJson("web-" + std::to_string(i), kNode));
  StartSource();
  ASSERT_TRUE(runner_.RunUntil([&] { return config_->PodsOf(kApiSource).size() == kPods; }));
  runner_.RunFor(std::chrono::milliseconds(100));
  // One list of 300 pods: one delivery, one ADD of all of them.
  EXPECT_THAT(set_sizes_, ElementsAre(static_cast<size_t>(kPods)));
  ASSERT_EQ(updates_.size(), 1u);
  EXPECT_EQ(updates_[0].pods.size(), static_cast<size_t>(kPods));

  // 60 changes queued on the server while the loop does not run, sent as one chunk: they reach
  // the loop in a few reads, and each read is at most one delivery, not one per event.
  server_.Admin("POST", "settings", {{"chunk_mode", "batch"}});
  runner_.RunFor(std::chrono::milliseconds(50));
  const size_t before = set_sizes_.size();
  constexpr int kChanges = 60;
  for (int i = 0; i < kChanges; ++i) Create(PodJson("late-" + std::to_string(i), kNode));
  ASSERT_TRUE(
      runner_.RunUntil([&] { return config_->PodsOf(kApiSource).size() == kPods + kChanges; }));
  runner_.RunFor(std::chrono::milliseconds(100));
  EXPECT_LT(set_sizes_.size() - before, static_cast<size_t>(kChanges / 2))
      << "deliveries for " << kChanges << " watch events";
}

TEST_F(ApiSourceTest, UpdateThenGracefulDeletionThenRemoval) {
  Create(PodJson("web-0", kNode));
  Create(PodJson("web-1", kNode));
  StartSource();
  ASSERT_TRUE(WaitForNames({"shop/web-0", "shop/web-1"}));
  updates_.clear();

  nlohmann::json pod = Get("shop", "web-0");
  pod["metadata"]["labels"]["tier"] = "front";
  Put(pod);
  ASSERT_TRUE(runner_.RunUntil([&] { return !updates_.empty(); }));
  ASSERT_EQ(updates_.size(), 1u);
  EXPECT_EQ(updates_[0].op, PodOp::kUpdate);
  ASSERT_EQ(updates_[0].pods.size(), 1u);
  EXPECT_EQ(updates_[0].pods[0]->metadata.labels.at("tier"), "front");
  updates_.clear();

  // A graceful delete: the pod stays, with its deletionTimestamp (PodConfig's DELETE) ...
  Delete("shop", "web-0");
  ASSERT_TRUE(runner_.RunUntil([&] { return !updates_.empty(); }));
  ASSERT_EQ(updates_.size(), 1u);
  EXPECT_EQ(updates_[0].op, PodOp::kDelete);
  ASSERT_EQ(updates_[0].pods.size(), 1u);
  EXPECT_EQ(updates_[0].pods[0]->metadata.name, "web-0");
  EXPECT_TRUE(updates_[0].pods[0]->metadata.deletion_timestamp.has_value());
  EXPECT_EQ(Names(), (std::set<std::string>{"shop/web-0", "shop/web-1"}));
  updates_.clear();

  // ... until the kubelet's final delete (grace 0) removes it.
  Delete("shop", "web-0", "?gracePeriodSeconds=0");
  ASSERT_TRUE(WaitForNames({"shop/web-1"}));
  ASSERT_EQ(updates_.size(), 1u);
  EXPECT_EQ(updates_[0].op, PodOp::kRemove);
  EXPECT_EQ(updates_[0].pods[0]->metadata.name, "web-0");
}

TEST_F(ApiSourceTest, APodThatCannotBeDecodedIsNamedAndSkipped) {
  LogCapture log;
  Create(PodJson("good", kNode));
  nlohmann::json bad = PodJson("bad", kNode);
  bad["spec"]["volumes"][0]["configMap"]["defaultMode"] = "hunter2-mode";  // not an integer
  Create(bad);
  StartSource();
  ASSERT_TRUE(runner_.RunUntil([&] { return config_->SourceSeen(kApiSource); }));
  EXPECT_EQ(Names(), std::set<std::string>{"shop/good"});
  EXPECT_EQ(source_.stats().decode_failures, 1);
  EXPECT_THAT(log.text(), HasSubstr("shop/bad"));
  EXPECT_THAT(log.text(), HasSubstr("defaultMode"));
  EXPECT_THAT(log.text(), Not(HasSubstr("hunter2")));

  // A decoded pod whose next version cannot be decoded keeps its last decoded version.
  nlohmann::json good = Get("shop", "good");
  good["metadata"]["labels"]["v"] = "2";
  good["spec"]["volumes"][0]["configMap"]["optional"] = "hunter2-optional";  // not a bool
  Put(good);
  ASSERT_TRUE(runner_.RunUntil([&] { return source_.stats().decode_failures == 2; }));
  runner_.RunFor(std::chrono::milliseconds(50));
  ASSERT_EQ(config_->PodsOf(kApiSource).size(), 1u);
  EXPECT_EQ(config_->PodsOf(kApiSource).begin()->second->metadata.labels.count("v"), 0u);
  EXPECT_THAT(log.text(), Not(HasSubstr("hunter2")));

  // Fixed, it is delivered again; the one that never decoded arrives once it does.
  good = Get("shop", "good");
  good["spec"]["volumes"][0]["configMap"].erase("optional");
  Put(good);
  bad = Get("shop", "bad");
  bad["spec"]["volumes"][0]["configMap"]["defaultMode"] = 420;
  Put(bad);
  ASSERT_TRUE(WaitForNames({"shop/good", "shop/bad"}));
  ASSERT_TRUE(runner_.RunUntil([&] {
    return config_->PodsOf(kApiSource).size() == 2 &&
           std::any_of(config_->PodsOf(kApiSource).begin(), config_->PodsOf(kApiSource).end(),
                       [](const auto& e) { return e.second->metadata.labels.count("v") == 1; });
  }));
}

TEST_F(ApiSourceTest, AnOutageKeepsTheLastStateAndRecovers) {
  Create(PodJson("web-0", kNode));
  Create(PodJson("web-1", kNode));
  StartSource();
  ASSERT_TRUE(WaitForNames({"shop/web-0", "shop/web-1"}));
  const size_t deliveries = set_sizes_.size();

  // The API goes away: every list and watch fails, open watches are reset.
  server_.Admin("POST", "faults",
                {{"verb", "list"}, {"resource", "pods"}, {"status", 503}, {"times", -1}});
  server_.Admin("POST", "faults",
                {{"verb", "watch"}, {"resource", "pods"}, {"status", 503}, {"times", -1}});
  server_.Admin("DELETE", "requests");
  server_.Admin("POST", "drop-watches", {{"abort", true}});
  ASSERT_TRUE(runner_.RunUntil([&] { return PodCollectionRequests() >= 6; }));
  // Meanwhile the pods change on the server (the faults match lists and watches only).
  Delete("shop", "web-0", "?gracePeriodSeconds=0");
  Create(PodJson("web-2", kNode));
  runner_.RunUntil([&] { return PodCollectionRequests() >= 10; });
  EXPECT_EQ(set_sizes_.size(), deliveries) << "a delivery during the outage";
  EXPECT_EQ(Names(), (std::set<std::string>{"shop/web-0", "shop/web-1"}));

  // Back: one relist brings both changes, in one delivery.
  server_.Admin("DELETE", "faults");
  ASSERT_TRUE(WaitForNames({"shop/web-1", "shop/web-2"}));
  runner_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(set_sizes_.size(), deliveries + 1);
}

TEST_F(ApiSourceTest, AStoppedServerKeepsTheLastState) {
  Create(PodJson("web-0", kNode));
  StartSource();
  ASSERT_TRUE(WaitForNames({"shop/web-0"}));
  const size_t deliveries = set_sizes_.size();
  const int waits = source_.reflector()->stats().backoff_waits;
  server_.Stop();  // the watch ends; every later list or watch is refused
  // Three refused attempts. Which kind depends on how the watch saw the end: a clean end relists,
  // a broken stream re-watches, and a refused watch is tried again without a relist, as client-go
  // does. Either way nothing may be delivered.
  ASSERT_TRUE(
      runner_.RunUntil([&] { return source_.reflector()->stats().backoff_waits >= waits + 3; }));
  EXPECT_EQ(set_sizes_.size(), deliveries);
  EXPECT_EQ(Names(), std::set<std::string>{"shop/web-0"});
  EXPECT_TRUE(config_->SourceSeen(kApiSource));
}

TEST_F(ApiSourceTest, StopFromTheSinkEndsDeliveries) {
  Create(PodJson("web-0", kNode));
  ApiSourceOptions options;
  options.node_name = kNode;
  int calls = 0;
  ASSERT_TRUE(source_
                  .Start(api_.get(), options,
                         [&](std::vector<PodPtr>) {
                           ++calls;
                           source_.Stop();
                         })
                  .ok());
  ASSERT_TRUE(runner_.RunUntil([&] { return calls == 1; }));
  Create(PodJson("web-1", kNode));
  runner_.RunFor(std::chrono::milliseconds(200));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(source_.synced());
}

TEST(ApiSourceOptionsTest, AnEmptyNodeNameIsRefused) {
  TestLoop runner;
  kubeclient::Credentials creds;
  creds.server = "https://127.0.0.1:1";
  auto http = kubeclient::HttpClient::Create(runner.get(), creds);
  ASSERT_TRUE(http.ok());
  kubeclient::ApiClient api(http->get());
  ApiSource source;
  base::Status s = source.Start(&api, ApiSourceOptions{}, [](std::vector<PodPtr>) {});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("node name"));
}

}  // namespace
}  // namespace podconfig
