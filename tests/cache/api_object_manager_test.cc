// ApiObjectManager against kube-test-apiserver: each strategy's gets and fetches, not-found, a 403
// on one object only, an outage that keeps every object, watch events reaching the change
// handler, reflectors counted by pod and stopped with the last, immutable objects (stopped watch,
// recreated object picked up), Fetch(kFresh) replacing a stale revision, shared requests, the
// refusal grace and the reconnect grace, and a Stop that completes every pending fetch once.
#include "cache/api_object_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "kube/object_decoder.h"
#include "kubeclient/auth/credentials.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/test_loop.h"

namespace cache {
namespace {

using kube::ObjectKind;
using kube::ObjectRef;
using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;
using vmtest::TestLoop;
using FetchMode = ObjectManager::FetchMode;

const std::string kNs = "shop";
const std::string kCms = "/api/v1/namespaces/shop/configmaps";
const std::string kSecrets = "/api/v1/namespaces/shop/secrets";
const std::string kNodeUser = "system:node:node-1";

ObjectRef Cm(const std::string& name) { return {ObjectKind::kConfigMap, kNs, name}; }
ObjectRef Secret(const std::string& name) { return {ObjectKind::kSecret, kNs, name}; }

class ApiObjectManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    // The manager talks as a user of its own, so a test can restrict it (ACL) while its own
    // set-up calls keep the admin token.
    server_.Admin("POST", "tokens", {{"token", "node-token"}, {"user", kNodeUser}});
    auto creds = kubeclient::LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    creds_ = *creds;
    creds_.token = "node-token";
  }

  void TearDown() override {
    manager_.reset();
    api_.reset();
    http_.reset();
    EXPECT_TRUE(loop_.Close()) << "a libuv handle was left open";
  }

  void Start(ChangeDetectionStrategy strategy,
             const std::function<void(ApiObjectManagerOptions&)>& tweak = nullptr) {
    manager_.reset();
    api_.reset();
    http_.reset();
    auto http = kubeclient::HttpClient::Create(loop_.get(), creds_);
    ASSERT_TRUE(http.ok()) << http.status().message();
    http_ = std::move(*http);
    kubeclient::RetryPolicy policy;
    policy.max_transient_retries = 1;
    policy.backoff.initial = std::chrono::milliseconds(10);
    policy.backoff.cap = std::chrono::milliseconds(20);
    api_ = std::make_unique<kubeclient::ApiClient>(http_.get(), policy,
                                                   kubeclient::RateLimiterOptions{}, reachability_);
    ApiObjectManagerOptions options;
    options.strategy = strategy;
    options.reflector.relist_backoff.initial = std::chrono::milliseconds(50);
    options.reflector.relist_backoff.cap = std::chrono::milliseconds(200);
    options.reflector.reconnect_backoff.initial = std::chrono::milliseconds(50);
    options.reflector.reconnect_backoff.cap = std::chrono::milliseconds(200);
    options.reflector.short_watch = std::chrono::milliseconds(200);
    options.clock = [this] { return now_; };
    if (tweak) tweak(options);
    manager_ = std::make_unique<ApiObjectManager>(api_.get(), options);
    manager_->SetChangeHandler([this](const ObjectRef& ref) {
      changes_.push_back(ref);
      // The contract: the change is visible to gets when the handler runs.
      auto revision = manager_->GetRevision(ref);
      seen_in_handler_.push_back(revision.ok() ? Value(*revision) : revision.status().message());
    });
  }

  // --- the server --------------------------------------------------------------------------
  void PutConfigMap(const std::string& name, const std::string& value, bool immutable = false) {
    nlohmann::json cm = {{"apiVersion", "v1"},
                         {"kind", "ConfigMap"},
                         {"metadata", {{"name", name}, {"namespace", kNs}}},
                         {"data", {{"a", value}}}};
    if (immutable) cm["immutable"] = true;
    auto current = server_.Api("GET", kCms + "/" + name);
    if (current.code == 404) {
      ASSERT_EQ(server_.Api("POST", kCms, cm).code, 201);
      return;
    }
    cm["metadata"]["resourceVersion"] = current.body["metadata"]["resourceVersion"];
    ASSERT_EQ(server_.Api("PUT", kCms + "/" + name, cm).code, 200);
  }
  void Label(const std::string& name) {
    auto current = server_.Api("GET", kCms + "/" + name).body;
    current["metadata"]["labels"]["edited"] = std::to_string(++labels_);
    ASSERT_EQ(server_.Api("PUT", kCms + "/" + name, current).code, 200);
  }
  void PutSecret(const std::string& name, const std::string& base64_value) {
    nlohmann::json secret = {{"apiVersion", "v1"},
                             {"kind", "Secret"},
                             {"metadata", {{"name", name}, {"namespace", kNs}}},
                             {"data", {{"key", base64_value}}}};
    ASSERT_EQ(server_.Api("POST", kSecrets, secret).code, 201);
  }
  void DeleteConfigMap(const std::string& name) {
    ASSERT_EQ(server_.Api("DELETE", kCms + "/" + name).code, 200);
  }
  // Only these configmap names may be read by the manager's user (get, list, watch).
  void AllowOnly(const std::vector<std::string>& names) {
    nlohmann::json rules = nlohmann::json::array();
    rules.push_back(
        {{"verbs", {"get", "list", "watch"}}, {"resources", {"configmaps"}}, {"names", names}});
    rules.push_back({{"verbs", {"get", "list", "watch"}}, {"resources", {"secrets"}}});
    server_.Admin("POST", "acl", {{"user", kNodeUser}, {"rules", rules}});
  }
  // GETs of one object (watch=false) or list/watch requests of its collection in the log.
  std::vector<nlohmann::json> Requests(const std::string& path) {
    std::vector<nlohmann::json> out;
    const kube_testing::HttpReply reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      if (r["path"] == path && r.value("user", "") == kNodeUser) out.push_back(r);
    }
    return out;
  }
  // The lists (not watches) of one object's collection narrowed to it.
  size_t Lists(const std::string& name) {
    size_t n = 0;
    for (const auto& r : Requests(kCms)) {
      n += !r["query"].contains("watch") &&
           r["query"].value("fieldSelector", "") == "metadata.name=" + name;
    }
    return n;
  }
  int Watches(const std::string& path) {
    int n = 0;
    for (const auto& r : Requests(path)) n += r["query"].contains("watch") ? 1 : 0;
    return n;
  }
  int OpenWatches() { return server_.Admin("GET", "state").body["watches"].get<int>(); }

  // --- the manager -------------------------------------------------------------------------
  // Fetches and runs the loop until `done` ran; false when it did not.
  bool FetchAndWait(const std::vector<ObjectRef>& refs, FetchMode mode = FetchMode::kStrategy) {
    bool done = false;
    manager_->Fetch(refs, mode, [&] { done = true; });
    return loop_.RunUntil([&] { return done; });
  }
  // "a" of a ConfigMap, "key" of a Secret, "<absent>", or the get's error.
  static std::string Value(const ObjectRevision& r) {
    if (r.config_map) {
      auto it = r.config_map->data.find("a");
      return it == r.config_map->data.end() ? "<no a>" : it->second;
    }
    if (r.secret) {
      auto it = r.secret->data.find("key");
      return it == r.secret->data.end() ? "<no key>" : it->second;
    }
    return "<absent>";
  }
  std::string Get(const ObjectRef& ref) {
    auto r = manager_->GetRevision(ref);
    return r.ok() ? Value(*r) : "error: " + r.status().message();
  }
  int ChangesOf(const ObjectRef& ref) {
    return static_cast<int>(std::count(changes_.begin(), changes_.end(), ref));
  }

  TestApiServerProcess server_;
  TestLoop loop_;
  kubeclient::Credentials creds_;
  std::unique_ptr<kubeclient::HttpClient> http_;
  std::unique_ptr<kubeclient::ApiClient> api_;
  std::unique_ptr<ApiObjectManager> manager_;
  std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
  kubeclient::ReachabilityOptions reachability_;  // the ApiClient's (Start)
  std::vector<ObjectRef> changes_;
  std::vector<std::string> seen_in_handler_;
  int labels_ = 0;
};

// Get: each Fetch reads the API server; gets answer from the last read; a missing object is
// nullptr; unregistered objects and objects never read fail; no change handler.
TEST_F(ApiObjectManagerTest, GetStrategyReadsAtEachFetchAndServesTheLastRead) {
  PutConfigMap("app", "v1");
  PutSecret("tls", "c2VjcmV0");  // "secret"
  Start(ChangeDetectionStrategy::kGet);
  manager_->RegisterPod("pod-1", {Cm("app"), Secret("tls"), Cm("missing")});
  EXPECT_THAT(Get(Cm("app")), HasSubstr("has not been read from the API server yet"));
  EXPECT_EQ(Get(Cm("other")), "error: object \"shop\"/\"other\" not registered");

  ASSERT_TRUE(FetchAndWait({Cm("app"), Secret("tls"), Cm("missing")}));
  EXPECT_EQ(Get(Cm("app")), "v1");
  EXPECT_EQ(Get(Secret("tls")), "secret");
  EXPECT_EQ(Get(Cm("missing")), "<absent>");
  auto missing = manager_->GetConfigMap(kNs, "missing");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, nullptr);
  // The digest is the one of the decoded object.
  auto revision = manager_->GetRevision(Cm("app"));
  ASSERT_TRUE(revision.ok());
  EXPECT_EQ(revision->digest, ContentDigest(*revision->config_map));

  PutConfigMap("app", "v2");
  EXPECT_EQ(Get(Cm("app")), "v1") << "a get is not a read";
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v2");
  const auto gets = Requests(kCms + "/app");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_FALSE(gets[1]["query"].contains("resourceVersion")) << "Get reads are quorum reads";
  EXPECT_TRUE(changes_.empty());
}

// Cache: the TTL, invalidation by new references only (kubelet >= 1.29), resourceVersion=0 for
// refreshes of a good object, and a cached NotFound read again at every fetch.
TEST_F(ApiObjectManagerTest, CacheStrategyHonoursTheTtlAndNewReferences) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kCache,
        [](ApiObjectManagerOptions& o) { o.cache_ttl = std::chrono::seconds(60); });
  manager_->RegisterPod("pod-1", {Cm("app"), Cm("missing")});
  ASSERT_TRUE(FetchAndWait({Cm("app"), Cm("missing")}));
  EXPECT_EQ(Get(Cm("app")), "v1");
  EXPECT_EQ(Requests(kCms + "/app").size(), 1u);
  EXPECT_FALSE(Requests(kCms + "/app")[0]["query"].contains("resourceVersion"));

  PutConfigMap("app", "v2");
  now_ += std::chrono::seconds(59);
  ASSERT_TRUE(FetchAndWait({Cm("app"), Cm("missing")}));
  EXPECT_EQ(Get(Cm("app")), "v1") << "younger than the TTL";
  EXPECT_EQ(Requests(kCms + "/app").size(), 1u);
  EXPECT_EQ(Requests(kCms + "/missing").size(), 2u) << "a cached NotFound is read again";

  manager_->RegisterPod("pod-1", {Cm("app"), Cm("missing")});  // a re-registration: nothing new
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Requests(kCms + "/app").size(), 1u);

  manager_->RegisterPod("pod-2", {Cm("app")});  // a new reference invalidates
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v2");
  auto gets = Requests(kCms + "/app");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_EQ(gets[1]["query"].value("resourceVersion", ""), "0") << "a refresh reads the cache";

  PutConfigMap("app", "v3");
  now_ += std::chrono::seconds(60);  // the TTL ran out
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v3");
  EXPECT_EQ(Requests(kCms + "/app").size(), 3u);
  EXPECT_TRUE(changes_.empty());
}

// Watch: the initial list, then events: a content change calls the handler at once (a metadata
// change does not), a deletion and a re-creation too; gets see each change in the handler.
TEST_F(ApiObjectManagerTest, WatchEventsCallTheHandlerOnContentChanges) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kWatch);
  manager_->RegisterPod("pod-1", {Cm("app"), Cm("late")});
  ASSERT_TRUE(FetchAndWait({Cm("app"), Cm("late")}));
  EXPECT_EQ(Get(Cm("app")), "v1");
  EXPECT_EQ(Get(Cm("late")), "<absent>");
  auto lists = Requests(kCms);
  ASSERT_FALSE(lists.empty());
  EXPECT_EQ(lists[0]["query"].value("fieldSelector", ""), "metadata.name=app");
  changes_.clear();
  seen_in_handler_.clear();

  PutConfigMap("app", "v2");
  ASSERT_TRUE(loop_.RunUntil([&] { return ChangesOf(Cm("app")) == 1; }));
  EXPECT_EQ(seen_in_handler_, (std::vector<std::string>{"v2"}));
  Label("app");  // a new resourceVersion, the same content
  PutConfigMap("app", "v3");
  ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == "v3"; }));
  EXPECT_EQ(ChangesOf(Cm("app")), 2) << "the label edit called the handler";

  DeleteConfigMap("app");
  ASSERT_TRUE(loop_.RunUntil([&] { return ChangesOf(Cm("app")) == 3; }));
  EXPECT_EQ(Get(Cm("app")), "<absent>");
  PutConfigMap("late", "created");
  ASSERT_TRUE(loop_.RunUntil([&] { return ChangesOf(Cm("late")) == 1; }));
  EXPECT_EQ(Get(Cm("late")), "created");
  EXPECT_EQ(seen_in_handler_.back(), "created");
  // Each object has its own watch; nothing but these two objects was asked for.
  EXPECT_EQ(manager_->RunningReflectors(), 2u);
  EXPECT_TRUE(Requests(kCms + "/app").empty()) << "Watch needs no GET";
}

// A small object is decoded on the loop at once (no round trip through the pool); one whose data
// exceeds inline_decode_bytes is decoded on the pool, as is every object with the limit at 0.
TEST_F(ApiObjectManagerTest, SmallObjectsAreDecodedOnTheLoopAndLargeOnesOnThePool) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kWatch,
        [](ApiObjectManagerOptions& o) { o.inline_decode_bytes = 1024; });
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v1");
  EXPECT_EQ(manager_->stats().decodes, 0u);
  EXPECT_EQ(manager_->stats().inline_decodes, 1u);

  PutConfigMap("app", "v2");
  ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == "v2"; }));
  EXPECT_EQ(manager_->stats().decodes, 0u);
  EXPECT_EQ(manager_->stats().inline_decodes, 2u);

  const std::string large(2000, 'x');
  PutConfigMap("app", large);
  ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == large; }));
  EXPECT_EQ(manager_->stats().decodes, 1u);
  EXPECT_EQ(manager_->stats().inline_decodes, 2u);
  // A small revision after it is served in order, and decoded on the loop again.
  PutConfigMap("app", "v3");
  ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == "v3"; }));
  EXPECT_EQ(manager_->stats().inline_decodes, 3u);

  Start(ChangeDetectionStrategy::kWatch,
        [](ApiObjectManagerOptions& o) { o.inline_decode_bytes = 0; });
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v3");
  EXPECT_EQ(manager_->stats().decodes, 1u);
  EXPECT_EQ(manager_->stats().inline_decodes, 0u);
}

// Watch: one reflector per object whatever the number of pods, stopped with the last pod.
TEST_F(ApiObjectManagerTest, WatchReflectorsAreCountedByPodAndStoppedWithTheLast) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kWatch);
  manager_->RegisterPod("pod-1", {Cm("app")});
  manager_->RegisterPod("pod-2", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  ASSERT_TRUE(loop_.RunUntil([&] { return OpenWatches() == 1; }));
  EXPECT_EQ(manager_->RunningReflectors(), 1u);
  EXPECT_EQ(manager_->stats().reflectors_started, 1u);

  manager_->UnregisterPod("pod-1");
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(OpenWatches(), 1);
  EXPECT_EQ(Get(Cm("app")), "v1");

  manager_->RegisterPod("pod-2", {});  // pod-2 stops referencing it
  EXPECT_EQ(manager_->RunningReflectors(), 0u);
  EXPECT_EQ(manager_->ReferencedObjectCount(), 0u);
  ASSERT_TRUE(loop_.RunUntil([&] { return OpenWatches() == 0; }));
  EXPECT_EQ(Get(Cm("app")), "error: object \"shop\"/\"app\" not registered");
  PutConfigMap("app", "v2");
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(ChangesOf(Cm("app")), 1) << "only the initial list's: no pod references it now";
}

// Watch: a new object whose list does not come within the sync timeout fails its gets with the
// kubelet's text (secret and configmap), and the list arriving later calls the handler.
TEST_F(ApiObjectManagerTest, WatchGetsFailWithTheKubeletTextUntilTheInitialList) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kWatch,
        [](ApiObjectManagerOptions& o) { o.sync_timeout = std::chrono::milliseconds(100); });
  server_.Admin("POST", "faults", {{"verb", "list"}, {"delay", 1.5}, {"times", 2}});
  manager_->RegisterPod("pod-1", {Cm("app"), Secret("tls")});
  ASSERT_TRUE(FetchAndWait({Cm("app"), Secret("tls")}));
  EXPECT_EQ(Get(Cm("app")),
            "error: failed to sync configmap cache: timed out waiting for the condition");
  EXPECT_EQ(Get(Secret("tls")),
            "error: failed to sync secret cache: timed out waiting for the condition");
  ASSERT_TRUE(loop_.RunUntil([&] { return ChangesOf(Cm("app")) == 1; }));
  EXPECT_EQ(Get(Cm("app")), "v1");
  ASSERT_TRUE(loop_.RunUntil([&] { return ChangesOf(Secret("tls")) == 1; }));
  EXPECT_EQ(Get(Secret("tls")), "<absent>");
}

// A 403 on one object fails only that object's gets; an object that becomes forbidden keeps its
// last good revision; an API outage keeps every object served. For each strategy.
struct ForbiddenCase {
  ChangeDetectionStrategy strategy;
  const char* forbidden_error;  // what a get of the never-readable object says
  const char* b_after;          // b, read well, then refused
};

class ForbiddenAndOutageTest : public ApiObjectManagerTest,
                               public ::testing::WithParamInterface<ForbiddenCase> {};

TEST_P(ForbiddenAndOutageTest, AForbiddenObjectFailsAloneAndAnOutageKeepsEveryObject) {
  const ForbiddenCase& c = GetParam();
  PutConfigMap("a", "a1");
  PutConfigMap("b", "b1");
  PutConfigMap("denied", "d1");
  AllowOnly({"a", "b"});
  Start(c.strategy, [](ApiObjectManagerOptions& o) {
    o.cache_ttl = std::chrono::milliseconds(0);
    o.sync_timeout = std::chrono::milliseconds(300);
  });
  const std::vector<ObjectRef> refs = {Cm("a"), Cm("b"), Cm("denied")};
  manager_->RegisterPod("pod-1", refs);
  ASSERT_TRUE(FetchAndWait(refs));
  // Under Watch the fetch gives up after the sync timeout (300 ms, for the outage below); on a
  // loaded machine (CI, a sanitizer) the lists, the refused one included, may answer later.
  ASSERT_TRUE(loop_.RunUntil([&] {
    return Get(Cm("a")) == "a1" && Get(Cm("b")) == "b1" &&
           Get(Cm("denied")).find(c.forbidden_error) != std::string::npos;
  })) << Get(Cm("a"))
      << " / " << Get(Cm("b")) << " / " << Get(Cm("denied"));
  EXPECT_EQ(manager_->GetRevision(Cm("denied")).status().api_code(), 403);
  EXPECT_EQ(manager_->GetRevision(Cm("denied")).status().api_reason(), "Forbidden");

  // b becomes forbidden after it was read: its last good revision stays.
  AllowOnly({"a"});
  PutConfigMap("a", "a2");
  PutConfigMap("b", "b2");
  if (c.strategy == ChangeDetectionStrategy::kWatch) {
    // b's watch was authorized when it was set up and carries b2; cut it, so that b's
    // reflector has to watch (and list) again, and is refused.
    ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("a")) == "a2" && Get(Cm("b")) == "b2"; }));
    server_.Admin("POST", "drop-watches", {{"abort", true}});
    PutConfigMap("b", "b3");
  }
  ASSERT_TRUE(FetchAndWait(refs));
  loop_.RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(Get(Cm("a")), "a2");
  EXPECT_EQ(Get(Cm("b")), c.b_after);

  // The API server goes away: every object keeps being served.
  server_.Stop();
  ASSERT_TRUE(FetchAndWait(refs));
  ASSERT_TRUE(FetchAndWait(refs, FetchMode::kFresh));
  loop_.RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(Get(Cm("a")), "a2");
  EXPECT_EQ(Get(Cm("b")), c.b_after);
  EXPECT_THAT(Get(Cm("denied")), ::testing::StartsWith("error: "));
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ForbiddenAndOutageTest,
    ::testing::Values(
        ForbiddenCase{ChangeDetectionStrategy::kGet, "configmaps \"denied\" is forbidden", "b1"},
        ForbiddenCase{ChangeDetectionStrategy::kCache, "configmaps \"denied\" is forbidden", "b1"},
        ForbiddenCase{ChangeDetectionStrategy::kWatch,
                      "configmaps \"denied\" is forbidden: User \"system:node:node-1\" cannot "
                      "list resource",
                      "b2"}),
    [](const ::testing::TestParamInfo<ForbiddenCase>& param) {
      return std::string(ChangeDetectionStrategyName(param.param.strategy));
    });

// A refusal of an object never read well is the object's error at once, with its HTTP code and
// reason, for each strategy: a fetch completes without waiting for the Watch strategy's sync
// timeout (an hour here), the change handler runs (Watch: a volume beside the kubelet waits for
// the first read and must hear of it), the refusal is counted by code, the retries are logged
// as one warning, and once the object may be read it is served.
class RefusalTest : public ApiObjectManagerTest,
                    public ::testing::WithParamInterface<ChangeDetectionStrategy> {};

TEST_P(RefusalTest, ARefusalIsTheObjectsErrorAtOnceWithItsStatus) {
  const ChangeDetectionStrategy strategy = GetParam();
  PutConfigMap("denied", "d1");
  AllowOnly({"other"});
  Start(strategy, [](ApiObjectManagerOptions& o) {
    o.cache_ttl = std::chrono::milliseconds(0);
    o.sync_timeout = std::chrono::hours(1);
  });
  manager_->RegisterPod("pod-1", {Cm("denied")});
  ASSERT_TRUE(FetchAndWait({Cm("denied")})) << "the fetch waited for the sync timeout";
  auto got = manager_->GetRevision(Cm("denied"));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(),
              HasSubstr("configmaps \"denied\" is forbidden: User \"system:node:node-1\""));
  EXPECT_EQ(got.status().api_code(), 403);
  EXPECT_EQ(got.status().api_reason(), "Forbidden");
  EXPECT_FALSE(manager_->Unread(Cm("denied")));
  const std::pair<int, std::string> forbidden{403, "Forbidden"};
  EXPECT_EQ(manager_->stats().read_errors.count(forbidden), 1u);
  // The pod was just bound (the injected clock stands still): the refusal was retried first.
  const size_t reads = strategy == ChangeDetectionStrategy::kWatch
                           ? Lists("denied")
                           : Requests(kCms + "/denied").size();
  EXPECT_GE(reads, 1u + ApiObjectManager::kRefusalRetries);
  if (strategy == ChangeDetectionStrategy::kWatch) {
    EXPECT_EQ(ChangesOf(Cm("denied")), 1) << "a volume waiting for the first read hears of it";
    // The reflector goes on relisting under its backoff; the manager's error stays.
    ASSERT_TRUE(loop_.RunUntil([&] { return Lists("denied") >= reads + 2; }));
  } else {
    ASSERT_TRUE(FetchAndWait({Cm("denied")}));
    ASSERT_TRUE(FetchAndWait({Cm("denied")}));
    EXPECT_EQ(Requests(kCms + "/denied").size(), reads + 2)
        << "the refusal grace's retries are spent: one GET per fetch";
  }
  EXPECT_EQ(manager_->GetRevision(Cm("denied")).status().api_code(), 403);

  AllowOnly({"denied"});
  if (strategy == ChangeDetectionStrategy::kWatch) {
    ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("denied")) == "d1"; }));
    EXPECT_EQ(ChangesOf(Cm("denied")), 2);
  } else {
    ASSERT_TRUE(FetchAndWait({Cm("denied")}));
    EXPECT_EQ(Get(Cm("denied")), "d1");
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, RefusalTest,
                         ::testing::Values(ChangeDetectionStrategy::kGet,
                                           ChangeDetectionStrategy::kCache,
                                           ChangeDetectionStrategy::kWatch),
                         [](const ::testing::TestParamInfo<ChangeDetectionStrategy>& param) {
                           return std::string(ChangeDetectionStrategyName(param.param));
                         });

// The refusal grace, on the injected clock: a 403 within kRefusalGraceWindow of a pod newly
// referencing the object is read again (the authorizer may not have seen the binding yet) and,
// when the next read is allowed, never becomes an error; past the window the first 403 counts.
class RefusalGraceTest : public ApiObjectManagerTest,
                         public ::testing::WithParamInterface<ChangeDetectionStrategy> {};

TEST_P(RefusalGraceTest, A403RightAfterABindingIsRetriedAndOneLaterIsNot) {
  const ChangeDetectionStrategy strategy = GetParam();
  const bool watch = strategy == ChangeDetectionStrategy::kWatch;
  PutConfigMap("app", "v1");
  PutConfigMap("later", "l1");
  Start(strategy, [](ApiObjectManagerOptions& o) {
    o.cache_ttl = std::chrono::milliseconds(0);
    o.sync_timeout = std::chrono::hours(1);
  });
  const nlohmann::json refuse_once = {{"verb", watch ? "list" : "get"},
                                      {"resource", "configmaps"},
                                      {"user", kNodeUser},
                                      {"status", 403},
                                      {"reason", "Forbidden"},
                                      {"times", 1}};
  // Just bound: the one refusal is retried, the object served, no error ever seen.
  server_.Admin("POST", "faults", refuse_once);
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v1");
  EXPECT_TRUE(manager_->stats().read_errors.empty());

  // Bound long ago (by the injected clock) when refused: the refusal is the error at once.
  server_.Admin("DELETE", "faults", nullptr);
  server_.Admin("POST", "faults", refuse_once);
  manager_->RegisterPod("pod-2", {Cm("later")});
  now_ += ApiObjectManager::kRefusalGraceWindow;
  ASSERT_TRUE(FetchAndWait({Cm("later")}));
  EXPECT_EQ(manager_->GetRevision(Cm("later")).status().api_code(), 403);
  EXPECT_EQ(manager_->stats().read_errors.size(), 1u);
  EXPECT_EQ(watch ? Lists("later") : Requests(kCms + "/later").size(), 1u)
      << "a refusal past the grace window was read again";
}

INSTANTIATE_TEST_SUITE_P(Strategies, RefusalGraceTest,
                         ::testing::Values(ChangeDetectionStrategy::kGet,
                                           ChangeDetectionStrategy::kCache,
                                           ChangeDetectionStrategy::kWatch),
                         [](const ::testing::TestParamInfo<ChangeDetectionStrategy>& param) {
                           return std::string(ChangeDetectionStrategyName(param.param));
                         });

// The reconnect grace: right after the API server answers again following an outage, its Node
// authorizer may refuse reads until its graph has filled. A 403 then, of an object served before
// the outage or of one referenced since, is read again within the client's grace_retry_delay
// (Get, Cache: the fetch waiting; Watch: the reflector's relist) for as long as it lasts: no
// error, nothing in read_errors, the object served as soon as a read is allowed. Past the grace,
// a 403 is the object's error at once.
class ReconnectGraceTest : public ApiObjectManagerTest,
                           public ::testing::WithParamInterface<ChangeDetectionStrategy> {};

TEST_P(ReconnectGraceTest, A403RightAfterTheServerAnswersAgainIsReadAgainWithoutFailing) {
  const ChangeDetectionStrategy strategy = GetParam();
  const bool watch = strategy == ChangeDetectionStrategy::kWatch;
  PutConfigMap("app", "v1");
  PutConfigMap("late", "l1");
  PutConfigMap("after", "a1");
  reachability_.probe_interval = std::chrono::milliseconds(200);
  auto offset = std::make_shared<std::chrono::milliseconds>(0);
  reachability_.clock = [offset] { return std::chrono::steady_clock::now() + *offset; };
  Start(strategy, [](ApiObjectManagerOptions& o) {
    o.cache_ttl = std::chrono::milliseconds(0);
    o.sync_timeout = std::chrono::hours(1);
  });
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  PutConfigMap("app", "v2");
  if (watch) {
    ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == "v2"; }));
  }
  // Only the reconnect grace applies from here (the injected clock is past the pod's).
  now_ += ApiObjectManager::kRefusalGraceWindow;

  server_.Admin("POST", "outage", {{"down", true}});
  // Something waits for the server, so the client probes it: a read's retry (Get, Cache), the
  // reflector's re-watch (Watch).
  if (!watch) manager_->Fetch({Cm("app")}, FetchMode::kFresh, [] {});
  ASSERT_TRUE(loop_.RunUntil([&] {
    return api_->reachability().state() == kubeclient::ServerReachability::State::kNotAnswering;
  }));
  nlohmann::json refuse = {{"user", kNodeUser},
                           {"resource", "configmaps"},
                           {"status", 403},
                           {"reason", "Forbidden"},
                           {"message",
                            "configmaps is forbidden: User \"system:node:node-1\" cannot get "
                            "resource \"configmaps\" in API group \"\" in the namespace "
                            "\"shop\": no relationship found between node 'node-1' and this "
                            "object"}};
  if (watch) {
    refuse["verb"] = "watch";
    refuse["times"] = 1;
    server_.Admin("POST", "faults", refuse);
    refuse["verb"] = "list";
  } else {
    refuse["verb"] = "get";
    refuse["path"] = kCms + "/app";
  }
  refuse["times"] = watch ? 1 : 2;
  server_.Admin("POST", "faults", refuse);
  server_.Admin("POST", "outage", {{"down", false}});

  // Served before the outage: refused twice, read again, never an error.
  if (watch) {
    ASSERT_TRUE(
        loop_.RunUntil([&] { return manager_->stats().refusals_retried_after_reconnect == 2; }));
    PutConfigMap("app", "v3");
    ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == "v3"; })) << "not watched again";
  } else {
    ASSERT_TRUE(FetchAndWait({Cm("app")}));
    EXPECT_EQ(Get(Cm("app")), "v2");
    EXPECT_EQ(manager_->stats().refusals_retried_after_reconnect, 2u);
  }
  EXPECT_EQ(api_->reachability().stats().reconnects, 1u);
  EXPECT_TRUE(manager_->stats().read_errors.empty());

  // Referenced since, never read: held while refused (Get, Cache: the fetch waits; Watch: no
  // error while the reflector relists), then served; the volume never sees an error.
  server_.Admin("DELETE", "faults");
  refuse.erase("path");
  refuse["verb"] = watch ? "list" : "get";
  refuse["times"] = 2;
  server_.Admin("POST", "faults", refuse);
  manager_->RegisterPod("pod-2", {Cm("late")});
  now_ += ApiObjectManager::kRefusalGraceWindow;
  ASSERT_TRUE(FetchAndWait({Cm("late")}));
  EXPECT_EQ(Get(Cm("late")), "l1");
  EXPECT_EQ(manager_->stats().refusals_retried_after_reconnect, 4u);
  EXPECT_TRUE(manager_->stats().read_errors.empty());
  EXPECT_EQ(manager_->stats().refusals_retried, 0u) << "the pod's grace applied";

  // Past the grace (by the client's clock): the first 403 is the error.
  *offset = api_->reachability().options().reconnect_grace;
  refuse["times"] = 1;
  server_.Admin("POST", "faults", refuse);
  manager_->RegisterPod("pod-3", {Cm("after")});
  now_ += ApiObjectManager::kRefusalGraceWindow;
  ASSERT_TRUE(FetchAndWait({Cm("after")}));
  EXPECT_EQ(manager_->GetRevision(Cm("after")).status().api_code(), 403);
  EXPECT_EQ(manager_->stats().read_errors.size(), 1u);
  EXPECT_EQ(manager_->stats().refusals_retried_after_reconnect, 4u);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ReconnectGraceTest,
                         ::testing::Values(ChangeDetectionStrategy::kGet,
                                           ChangeDetectionStrategy::kCache,
                                           ChangeDetectionStrategy::kWatch),
                         [](const ::testing::TestParamInfo<ChangeDetectionStrategy>& param) {
                           return std::string(ChangeDetectionStrategyName(param.param));
                         });

// Watch: an immutable object's reflector stops; the cached copy is served; a pod newly
// referencing it reads it again, so one deleted and recreated (another UID) is picked up before
// that pod's mount, and a recreated mutable one is watched again.
TEST_F(ApiObjectManagerTest, ImmutableObjectsStopTheirWatchAndARecreatedOneIsPickedUp) {
  PutConfigMap("frozen", "v1", /*immutable=*/true);
  Start(ChangeDetectionStrategy::kWatch);
  manager_->RegisterPod("pod-1", {Cm("frozen")});
  ASSERT_TRUE(FetchAndWait({Cm("frozen")}));
  EXPECT_EQ(Get(Cm("frozen")), "v1");
  ASSERT_TRUE(loop_.RunUntil([&] { return manager_->RunningReflectors() == 0; }));
  EXPECT_EQ(manager_->stats().immutable_stops, 1u);
  ASSERT_TRUE(loop_.RunUntil([&] { return OpenWatches() == 0; }));

  DeleteConfigMap("frozen");
  PutConfigMap("frozen", "v2", /*immutable=*/true);
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(Get(Cm("frozen")), "v1") << "not watched: the cached copy";

  changes_.clear();
  manager_->RegisterPod("pod-2", {Cm("frozen")});
  ASSERT_TRUE(FetchAndWait({Cm("frozen")}));  // pod-2's mount waits for the re-check
  EXPECT_EQ(Get(Cm("frozen")), "v2");
  EXPECT_EQ(ChangesOf(Cm("frozen")), 1) << "pod-1's volume must learn of it too";
  EXPECT_EQ(manager_->RunningReflectors(), 0u) << "still immutable";

  DeleteConfigMap("frozen");
  PutConfigMap("frozen", "v3");  // recreated mutable
  ASSERT_TRUE(FetchAndWait({Cm("frozen")}, FetchMode::kFresh));
  EXPECT_EQ(Get(Cm("frozen")), "v3");
  EXPECT_EQ(manager_->RunningReflectors(), 1u);
  ASSERT_TRUE(FetchAndWait({Cm("frozen")}));
  PutConfigMap("frozen", "v4");
  ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("frozen")) == "v4"; }));
}

// Fetch(kFresh) reads past a cache: a newer revision replaces the cached one and calls the
// handler; the same revision again changes nothing.
TEST_F(ApiObjectManagerTest, FreshFetchReplacesAStaleCachedRevision) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kCache,
        [](ApiObjectManagerOptions& o) { o.cache_ttl = std::chrono::hours(1); });
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  PutConfigMap("app", "v2");
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  EXPECT_EQ(Get(Cm("app")), "v1") << "cached for the TTL";
  EXPECT_TRUE(changes_.empty());

  ASSERT_TRUE(FetchAndWait({Cm("app")}, FetchMode::kFresh));
  EXPECT_EQ(Get(Cm("app")), "v2");
  EXPECT_EQ(ChangesOf(Cm("app")), 1);
  const auto gets = Requests(kCms + "/app");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_FALSE(gets[1]["query"].contains("resourceVersion")) << "a quorum read";
  ASSERT_TRUE(FetchAndWait({Cm("app")}, FetchMode::kFresh));
  EXPECT_EQ(ChangesOf(Cm("app")), 1) << "nothing new";

  // Watch: a fresh read that finds what the watch already delivered changes nothing either.
  PutConfigMap("w", "w1");
  Start(ChangeDetectionStrategy::kWatch);
  manager_->RegisterPod("pod-1", {Cm("w")});
  ASSERT_TRUE(FetchAndWait({Cm("w")}));
  changes_.clear();
  ASSERT_TRUE(FetchAndWait({Cm("w")}, FetchMode::kFresh));
  EXPECT_EQ(Get(Cm("w")), "w1");
  EXPECT_TRUE(changes_.empty());
}

// Watch: a fresh read runs ahead of a stalled watch; when the watch catches up, replaying the
// revisions in between, none older than the one served replaces it: no new -> old -> new flapping.
TEST_F(ApiObjectManagerTest, AWatchCatchingUpNeverServesARevisionOlderThanAFreshRead) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kWatch);
  server_.Admin("POST", "faults", {{"verb", "watch"}, {"watch", {{"stall", true}}}, {"times", 1}});
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  ASSERT_TRUE(loop_.RunUntil([&] { return Watches(kCms) == 1; }));
  changes_.clear();
  seen_in_handler_.clear();
  PutConfigMap("app", "v2");
  PutConfigMap("app", "v3");
  loop_.RunFor(std::chrono::milliseconds(300));  // the watch is stalled, and not "very short"
  EXPECT_EQ(Get(Cm("app")), "v1");

  ASSERT_TRUE(FetchAndWait({Cm("app")}, FetchMode::kFresh));
  EXPECT_EQ(Get(Cm("app")), "v3");
  server_.Admin("POST", "drop-watches");  // the stalled watch ends; the next one replays v2, v3
  ASSERT_TRUE(loop_.RunUntil([&] { return Watches(kCms) == 2; }));
  loop_.RunFor(std::chrono::milliseconds(300));
  PutConfigMap("app", "v4");
  ASSERT_TRUE(loop_.RunUntil([&] { return Get(Cm("app")) == "v4"; }));
  EXPECT_EQ(seen_in_handler_, (std::vector<std::string>{"v3", "v4"}));
}

// Concurrent fetches of one object share one request (Get, Cache with TTL 0, kFresh), and each
// fetch's `done` runs exactly once.
TEST_F(ApiObjectManagerTest, ConcurrentFetchesShareOneRequest) {
  for (int i = 0; i < 10; ++i) PutConfigMap("cm" + std::to_string(i), "v");
  std::vector<ObjectRef> refs;
  for (int i = 0; i < 10; ++i) refs.push_back(Cm("cm" + std::to_string(i)));
  for (ChangeDetectionStrategy strategy :
       {ChangeDetectionStrategy::kGet, ChangeDetectionStrategy::kCache}) {
    SCOPED_TRACE(ChangeDetectionStrategyName(strategy));
    server_.Admin("DELETE", "requests");
    Start(strategy, [](ApiObjectManagerOptions& o) { o.cache_ttl = std::chrono::milliseconds(0); });
    manager_->RegisterPod("pod-1", refs);
    for (FetchMode mode : {FetchMode::kStrategy, FetchMode::kFresh}) {
      server_.Admin("DELETE", "requests");
      std::vector<int> done(100, 0);
      for (int i = 0; i < 100; ++i) manager_->Fetch({refs[i % 10]}, mode, [&, i] { ++done[i]; });
      ASSERT_TRUE(loop_.RunUntil(
          [&] { return std::all_of(done.begin(), done.end(), [](int d) { return d > 0; }); }));
      loop_.RunFor(std::chrono::milliseconds(50));
      EXPECT_EQ(done, std::vector<int>(100, 1));
      int gets = 0;
      for (const ObjectRef& ref : refs)
        gets += static_cast<int>(Requests(kCms + "/" + ref.name).size());
      EXPECT_EQ(gets, 10);
    }
  }
}

// Stop completes every pending fetch once and cancels the rest; later fetches complete at once;
// gets keep answering; nothing is left on the loop.
TEST_F(ApiObjectManagerTest, StopCompletesEveryPendingFetchOnce) {
  PutConfigMap("app", "v1");
  Start(ChangeDetectionStrategy::kWatch);
  manager_->RegisterPod("pod-1", {Cm("app")});
  ASSERT_TRUE(FetchAndWait({Cm("app")}));
  server_.Admin("POST", "faults", {{"verb", "get"}, {"delay", 5}, {"times", -1}});
  server_.Admin("POST", "faults", {{"verb", "list"}, {"delay", 5}, {"times", -1}});
  manager_->RegisterPod("pod-2", {Cm("slow")});
  int fresh_done = 0;
  int sync_done = 0;
  manager_->Fetch({Cm("app")}, FetchMode::kFresh, [&] { ++fresh_done; });
  manager_->Fetch({Cm("slow")}, FetchMode::kStrategy, [&] { ++sync_done; });
  loop_.RunFor(std::chrono::milliseconds(50));
  EXPECT_EQ(fresh_done + sync_done, 0);
  manager_->Stop();
  EXPECT_EQ(fresh_done, 1);
  EXPECT_EQ(sync_done, 1);
  int after_stop = 0;
  manager_->Fetch({Cm("app")}, FetchMode::kFresh, [&] { ++after_stop; });
  EXPECT_EQ(after_stop, 1);
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(fresh_done + sync_done + after_stop, 3);
  EXPECT_EQ(Get(Cm("app")), "v1");
  EXPECT_EQ(manager_->RunningReflectors(), 0u);
  server_.Admin("DELETE", "faults");
}

}  // namespace
}  // namespace cache
