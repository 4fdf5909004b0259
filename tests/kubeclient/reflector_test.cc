// The reflector against kube-test-apiserver: every row of the client-robustness table
// (docs/kubernetes-api.md §9) that a server can produce, and each fault the server
// injects. Each case checks that the store converges to the server's state, that no change is
// delivered twice, and that the synced resourceVersion only moves forward.
#include "kubeclient/watch/reflector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "kubeclient/auth/credentials.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

using kube_testing::TestApiServerProcess;
using vmtest::TestLoop;

const std::string kCms = "/api/v1/namespaces/default/configmaps";

nlohmann::json ConfigMap(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}}},
          {"data", {{"a", value}}}};
}

struct Delivery {
  std::string type;
  std::string key;
  std::string rv;
};

class ReflectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto creds = LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok());
    creds_ = *creds;
  }

  void TearDown() override {
    reflector_.reset();
    api_.reset();
    http_.reset();
  }

  ReflectorOptions FastOptions() {
    ReflectorOptions options;
    options.path = kCms;
    options.kind = "ConfigMap";
    options.api_version = "v1";
    options.description = "configmaps in default";
    options.relist_backoff.initial = std::chrono::milliseconds(50);
    options.relist_backoff.cap = std::chrono::milliseconds(200);
    options.reconnect_backoff.initial = std::chrono::milliseconds(50);
    options.reconnect_backoff.cap = std::chrono::milliseconds(200);
    options.min_watch_timeout = std::chrono::seconds(30);
    options.max_watch_timeout = std::chrono::seconds(31);
    options.resync_period = std::chrono::milliseconds(0);
    options.short_watch = std::chrono::milliseconds(200);
    return options;
  }

  void StartReflector(ReflectorOptions options) {
    auto http = HttpClient::Create(runner_.get(), creds_);
    ASSERT_TRUE(http.ok());
    http_ = std::move(*http);
    RetryPolicy policy;
    policy.backoff.initial = std::chrono::milliseconds(20);
    api_ = std::make_unique<ApiClient>(http_.get(), policy, RateLimiterOptions{}, reachability_);
    ReflectorHandlers handlers;
    handlers.on_add = [this](const nlohmann::json& o) { Record("add", o); };
    handlers.on_update = [this](const nlohmann::json& old, const nlohmann::json& o) {
      EXPECT_EQ(ObjectStore::KeyOf(old), ObjectStore::KeyOf(o));
      EXPECT_TRUE(ResourceVersionOlder(ObjectStore::ResourceVersionOf(old),
                                       ObjectStore::ResourceVersionOf(o)))
          << ObjectStore::KeyOf(o) << ": " << ObjectStore::ResourceVersionOf(old) << " then "
          << ObjectStore::ResourceVersionOf(o);
      old_objects_.push_back(old);
      Record("update", o);
    };
    handlers.on_delete = [this](const nlohmann::json& o) { Record("delete", o); };
    reflector_ = std::make_unique<Reflector>(api_.get(), std::move(options), handlers);
    reflector_->Start();
    ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->synced(); }));
  }

  void Record(const std::string& type, const nlohmann::json& o) {
    deliveries_.push_back({type, ObjectStore::KeyOf(o), ObjectStore::ResourceVersionOf(o)});
    objects_.push_back(o);
    std::string rv = reflector_->last_sync_resource_version();
    if (!rvs_seen_.empty()) {
      EXPECT_FALSE(ResourceVersionOlder(rv, rvs_seen_.back()))
          << rv << " after " << rvs_seen_.back();
    }
    rvs_seen_.push_back(rv);
  }

  // key -> resourceVersion on the server.
  std::map<std::string, std::string> ServerState(const std::string& path = kCms) {
    std::map<std::string, std::string> state;
    auto reply = server_.Api("GET", path);
    for (const auto& item : reply.body["items"]) {
      state[ObjectStore::KeyOf(item)] = ObjectStore::ResourceVersionOf(item);
    }
    return state;
  }

  std::map<std::string, std::string> StoreState() {
    std::map<std::string, std::string> state;
    for (const auto& [key, object] : reflector_->store().items()) {
      state[key] = ObjectStore::StoredResourceVersion(object);
    }
    return state;
  }

  // Runs the loop until the store equals the server's state.
  bool Converge(const std::string& path = kCms,
                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto want = ServerState(path);
    return runner_.RunUntil([&] { return StoreState() == want; }, timeout);
  }

  void ExpectNoDuplicateDeliveries() {
    std::set<std::string> seen;
    for (const Delivery& d : deliveries_) {
      EXPECT_TRUE(seen.insert(d.type + " " + d.key + "@" + d.rv).second)
          << d.type << " " << d.key << "@" << d.rv << " delivered twice";
    }
  }

  // The server's requests with this verb-ish shape since the last clear.
  std::vector<nlohmann::json> Requests(bool watch) {
    std::vector<nlohmann::json> out;
    auto reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      if (r["path"] != kCms || r["method"] != "GET") continue;
      bool is_watch = r["query"].contains("watch");
      if (is_watch == watch) out.push_back(r);
    }
    return out;
  }

  // Ends the current watch cleanly once it is older than the "very short watch" limit, so the
  // reflector treats the end as normal.
  void DropWatchesAfterShortWatchLimit() {
    runner_.RunFor(std::chrono::milliseconds(300));
    server_.Admin("POST", "drop-watches");
  }

  void Create(const std::string& name, const std::string& value = "v") {
    ASSERT_EQ(server_.Api("POST", kCms, ConfigMap(name, value)).code, 201);
  }
  void Modify(const std::string& name, const std::string& value) {
    auto current = server_.Api("GET", kCms + "/" + name).body;
    current["data"]["a"] = value;
    ASSERT_EQ(server_.Api("PUT", kCms + "/" + name, current).code, 200);
  }
  void Delete(const std::string& name) {
    ASSERT_EQ(server_.Api("DELETE", kCms + "/" + name).code, 200);
  }
  // Several changes, made while the reflector's loop is not running: they queue on the server.
  void Churn(const std::string& prefix) {
    Create(prefix + "-a");
    Create(prefix + "-b");
    Modify(prefix + "-a", "2");
    Delete(prefix + "-b");
    Create(prefix + "-c");
  }

  // Runs the loop until the server has the reflector's watch open.
  bool WatchOpen() {
    return runner_.RunUntil([&] { return server_.Admin("GET", "state").body["watches"] == 1; });
  }

  TestApiServerProcess server_;
  TestLoop runner_;
  Credentials creds_;
  ReachabilityOptions reachability_;  // the ApiClient's (StartReflector)
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<ApiClient> api_;
  std::unique_ptr<Reflector> reflector_;
  std::vector<Delivery> deliveries_;
  std::vector<nlohmann::json> objects_;      // as each handler got it, in delivery order
  std::vector<nlohmann::json> old_objects_;  // on_update's old objects
  std::vector<std::string> rvs_seen_;
  int round_ = 0;
};

TEST_F(ReflectorTest, ListThenWatchDeliversAddUpdateDeleteWithOldAndNew) {
  Create("before");
  StartReflector(FastOptions());
  EXPECT_EQ(reflector_->store().size(), 1u);
  EXPECT_EQ((*reflector_->store().Get("default/before"))["kind"], "ConfigMap");
  const std::string first_rv = reflector_->last_sync_resource_version();
  Churn("x");
  ASSERT_TRUE(Converge());
  std::vector<std::string> types;
  for (const auto& d : deliveries_) types.push_back(d.type + " " + d.key);
  EXPECT_EQ(types, (std::vector<std::string>{"add default/before", "add default/x-a",
                                             "add default/x-b", "update default/x-a",
                                             "delete default/x-b", "add default/x-c"}));
  EXPECT_EQ(reflector_->stats().lists, 1);
  ExpectNoDuplicateDeliveries();
  // The first list asked for RV 0 with a page limit, the watch for the list's RV with bookmarks.
  auto lists = Requests(false);
  ASSERT_FALSE(lists.empty());
  EXPECT_EQ(lists[0]["query"]["resourceVersion"], "0");
  EXPECT_EQ(lists[0]["query"]["limit"], "500");
  auto watches = Requests(true);
  ASSERT_FALSE(watches.empty());
  EXPECT_EQ(watches[0]["query"]["allowWatchBookmarks"], "true");
  EXPECT_EQ(watches[0]["query"]["resourceVersion"], first_rv);
}

// keep_objects = false (the daemon's watches of single objects and of its node's pods): the store
// holds each object's identity only, while the add and update handlers get whole objects, and a
// deletion found by a relist still reaches on_delete, with that identity.
TEST_F(ReflectorTest, WithoutKeptObjectsTheStoreHoldsIdentitiesAndHandlersWholeObjects) {
  Create("kept", "1");
  ReflectorOptions options = FastOptions();
  options.keep_objects = false;
  StartReflector(options);
  Modify("kept", "2");
  Create("gone", "3");
  ASSERT_TRUE(Converge());
  ASSERT_EQ(objects_.size(), 3u);
  EXPECT_EQ(objects_[0]["data"]["a"], "1");
  EXPECT_EQ(objects_[1]["data"]["a"], "2");
  EXPECT_EQ(objects_[2]["data"]["a"], "3");
  ASSERT_EQ(old_objects_.size(), 1u);
  EXPECT_FALSE(old_objects_[0].contains("data"));
  EXPECT_EQ(ObjectStore::ResourceVersionOf(old_objects_[0]), deliveries_[0].rv);
  EXPECT_EQ(old_objects_[0]["metadata"].size(), 3u) << old_objects_[0].dump();
  EXPECT_EQ(old_objects_[0]["metadata"]["namespace"], "default");
  EXPECT_EQ(old_objects_[0]["metadata"]["name"], deliveries_[0].key.substr(8));
  ASSERT_EQ(reflector_->store().size(), 2u);
  for (const auto& [key, stored] : reflector_->store().items()) {
    SCOPED_TRACE(key);
    // The resourceVersion alone, as a string; the name and namespace are the key's.
    EXPECT_TRUE(stored.is_string()) << stored.dump();
    EXPECT_EQ(ObjectStore::StoredResourceVersion(stored), ServerState()[key]);
    const nlohmann::json object = ObjectStore::Expand(key, stored);
    EXPECT_EQ(object.size(), 1u) << object.dump();  // metadata only
    const nlohmann::json& meta = object["metadata"];
    EXPECT_EQ(meta.size(), 3u) << meta.dump();  // name, namespace, resourceVersion
    EXPECT_EQ(meta["namespace"], "default");
    EXPECT_EQ(key, "default/" + meta["name"].get<std::string>());
  }
  // The watch ends and "gone" is deleted and compacted away before the re-watch: the relist
  // finds it missing.
  server_.Admin("POST", "faults", {{"verb", "watch"}, {"delay", 0.5}});
  DropWatchesAfterShortWatchLimit();
  Delete("gone");
  server_.Admin("POST", "compact");
  ASSERT_TRUE(Converge());
  EXPECT_EQ(reflector_->stats().lists, 2);
  ASSERT_EQ(deliveries_.back().type, "delete");
  EXPECT_EQ(deliveries_.back().key, "default/gone");
  EXPECT_FALSE(objects_.back().contains("data"));
  ExpectNoDuplicateDeliveries();
}

TEST_F(ReflectorTest, PagedListAndExpiredContinueTokenFallsBackToOneUnpagedList) {
  for (int i = 0; i < 5; ++i) Create("p" + std::to_string(i));
  server_.Admin("POST", "faults", {{"verb", "list"}, {"has_param", "continue"}, {"compact", true}});
  ReflectorOptions options = FastOptions();
  options.page_size = 2;
  StartReflector(options);
  EXPECT_EQ(reflector_->store().size(), 5u);
  EXPECT_EQ(reflector_->stats().expired, 1);
  auto lists = Requests(false);
  ASSERT_EQ(lists.size(), 3u);  // page 1, page 2 (410), one unpaged list at the original RV
  EXPECT_EQ(lists[1]["query"]["limit"], "2");
  EXPECT_FALSE(lists[2]["query"].contains("limit"));
  EXPECT_EQ(lists[2]["query"]["resourceVersion"], "0");
  EXPECT_EQ(deliveries_.size(), 5u);
}

struct StreamCase {
  std::string name;
  nlohmann::json settings;  // server settings during the watch
  nlohmann::json fault;     // a watch fault armed before the changes, or null
  int lists;                // lists expected in total (1 = no relist)
  std::function<void(const Reflector::Stats&)> check;
};

TEST_F(ReflectorTest, StreamFaultsConverge) {
  const std::vector<StreamCase> cases = {
      {"events split across chunks",
       {{"chunk_mode", "split"}, {"chunk_size", 3}},
       nullptr,
       1,
       nullptr},
      {"many events per chunk", {{"chunk_mode", "batch"}}, nullptr, 1, nullptr},
      {"connection cut mid-event",
       {},
       {{"verb", "watch"}, {"watch", {{"close_after_bytes", 400}}}},
       1,
       [](const Reflector::Stats& s) { EXPECT_GE(s.watches, 2); }},
      {"reset after two events",
       {},
       {{"verb", "watch"}, {"watch", {{"close_after_events", 2}, {"abort", true}}}},
       1,
       [](const Reflector::Stats& s) { EXPECT_GE(s.watches, 2); }},
      {"clean end after one event",
       {},
       {{"verb", "watch"}, {"watch", {{"close_after_events", 1}}}},
       1,
       [](const Reflector::Stats& s) { EXPECT_GE(s.watches, 2); }},
      {"invalid JSON mid-stream",
       {},
       {{"verb", "watch"}, {"watch", {{"inject", {{{"after", 2}, {"kind", "invalid_json"}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.decode_errors, 1); }},
      {"unknown event type",
       {},
       {{"verb", "watch"}, {"watch", {{"inject", {{{"after", 1}, {"kind", "unknown_type"}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.decode_errors, 1); }},
      {"non-object object",
       {},
       {{"verb", "watch"}, {"watch", {{"inject", {{{"after", 1}, {"kind", "non_object"}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.decode_errors, 1); }},
      {"oversized event",
       {},
       {{"verb", "watch"},
        {"watch", {{"inject", {{{"after", 1}, {"kind", "oversized"}, {"size", 100000}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.decode_errors, 1); }},
      {"wrong kind is skipped",
       {},
       {{"verb", "watch"}, {"watch", {{"inject", {{{"after", 1}, {"kind", "wrong_kind"}}}}}}},
       1,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.skipped_wrong_kind, 1); }},
      {"ERROR 410 event",
       {},
       {{"verb", "watch"},
        {"watch", {{"inject", {{{"after", 2}, {"kind", "error"}, {"code", 410}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.expired, 1); }},
      {"ERROR 410 event with reason Gone",
       {},
       {{"verb", "watch"},
        {"watch",
         {{"inject", {{{"after", 2}, {"kind", "error"}, {"code", 410}, {"reason", "Gone"}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.expired, 1); }},
      {"ERROR 429 event re-watches without relisting",
       {},
       {{"verb", "watch"},
        {"watch", {{"inject", {{{"after", 1}, {"kind", "error"}, {"code", 429}}}}}}},
       1,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.error_events, 1); }},
      {"ERROR 500 event relists",
       {},
       {{"verb", "watch"},
        {"watch", {{"inject", {{{"after", 1}, {"kind", "error"}, {"code", 500}}}}}}},
       2,
       [](const Reflector::Stats& s) { EXPECT_EQ(s.error_events, 1); }},
  };
  for (const StreamCase& c : cases) {
    SCOPED_TRACE(c.name);
    deliveries_.clear();
    rvs_seen_.clear();
    reflector_.reset();
    server_.Admin("DELETE", "faults");
    server_.Admin("POST", "settings", {{"chunk_mode", "event"}});
    ReflectorOptions options = FastOptions();
    options.max_event_bytes = 16384;
    StartReflector(options);
    if (!c.settings.empty()) server_.Admin("POST", "settings", c.settings);
    if (!c.fault.is_null()) {
      server_.Admin("POST", "faults", c.fault);
      DropWatchesAfterShortWatchLimit();
      // Let the reflector re-watch into the armed fault before the changes happen.
      ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().watches >= 2; }));
      runner_.RunFor(std::chrono::milliseconds(100));
    }
    int baseline = reflector_->stats().lists;
    Churn("s" + std::to_string(round_++));
    ASSERT_TRUE(Converge()) << "store did not converge";
    runner_.RunFor(std::chrono::milliseconds(200));
    EXPECT_EQ(reflector_->stats().lists - baseline + 1, c.lists);
    if (c.check) c.check(reflector_->stats());
    ExpectNoDuplicateDeliveries();
  }
}

TEST_F(ReflectorTest, StalledWatchIsEndedByTheWatchdog) {
  ReflectorOptions options = FastOptions();
  options.min_watch_timeout = std::chrono::seconds(1);
  options.max_watch_timeout = std::chrono::seconds(1);
  options.watchdog_grace = std::chrono::milliseconds(500);
  server_.Admin("POST", "faults", {{"verb", "watch"}, {"watch", {{"stall", true}}}});
  StartReflector(options);
  Churn("stall");
  ASSERT_TRUE(Converge());
  EXPECT_GE(reflector_->stats().watchdog_fired, 1);
  EXPECT_EQ(reflector_->stats().lists, 1);
  ExpectNoDuplicateDeliveries();
}

TEST_F(ReflectorTest, VeryShortWatchesBackOffAndRelist) {
  server_.Admin("POST", "faults",
                {{"verb", "watch"}, {"times", 2}, {"watch", {{"end_immediately", true}}}});
  // A watch that ends at once must count as short even when this machine is loaded and the
  // loop sees the end a few hundred ms late; the third watch runs 30 s, far beyond it.
  ReflectorOptions options = FastOptions();
  options.short_watch = std::chrono::seconds(3);
  StartReflector(options);
  Churn("short");
  ASSERT_TRUE(Converge());
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().lists == 3; }));
  EXPECT_EQ(reflector_->stats().short_watches, 2);
  EXPECT_GE(reflector_->stats().backoff_waits, 2);
  runner_.RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(reflector_->stats().lists, 3);  // the third watch is a normal one
}

TEST_F(ReflectorTest, CompactedHistoryGives410AndARelistAtTheSyncedVersion) {
  for (std::string mode : {"event", "status"}) {
    SCOPED_TRACE(mode);
    deliveries_.clear();
    rvs_seen_.clear();
    reflector_.reset();
    server_.Admin("POST", "settings", {{"expired_watch_mode", mode}});
    StartReflector(FastOptions());
    std::string synced = reflector_->last_sync_resource_version();
    server_.Admin("DELETE", "requests");
    // The watch ends; changes happen and are compacted away before the reflector re-watches.
    server_.Admin("POST", "faults", {{"verb", "watch"}, {"delay", 0.5}});
    DropWatchesAfterShortWatchLimit();
    Churn(mode);
    server_.Admin("POST", "compact");
    ASSERT_TRUE(Converge());
    EXPECT_GE(reflector_->stats().expired, 1);
    EXPECT_EQ(reflector_->stats().lists, 2);
    auto lists = Requests(false);
    ASSERT_FALSE(lists.empty());
    // Relist "not older than" the last synced RV, not from scratch.
    EXPECT_EQ(lists.back()["query"]["resourceVersion"], synced);
    ExpectNoDuplicateDeliveries();
  }
}

// Each answer at watch set-up: whether it relists, and which backoff it waits on (the relist
// backoff after an answered failure; the reconnect backoff for a 429, as for no answer: that one
// in A410AfterUnansweredReconnectsRelistsAfterTheFirstRelistDelay).
TEST_F(ReflectorTest, HttpErrorsAtWatchSetUp) {
  struct Case {
    std::string name;
    nlohmann::json fault;
    int relists;
    int relist_waits;
    int reconnect_waits;
  };
  const std::vector<Case> cases = {
      {"HTTP 410 at watch start relists", {{"status", 410}}, 1, 1, 0},
      {"429 at watch start re-watches", {{"status", 429}, {"body", "text"}}, 0, 0, 1},
      {"401 at watch start re-watches", {{"status", 401}}, 0, 1, 0},
      {"500 at watch start relists", {{"status", 500}}, 1, 1, 0},
      {"503 HTML at watch start relists", {{"status", 503}, {"body", "html"}}, 1, 1, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    reflector_.reset();
    deliveries_.clear();
    rvs_seen_.clear();
    server_.Admin("DELETE", "faults");
    StartReflector(FastOptions());
    nlohmann::json fault = c.fault;
    fault["verb"] = "watch";
    server_.Admin("POST", "faults", fault);
    DropWatchesAfterShortWatchLimit();
    Churn("h" + std::to_string(round_++));
    ASSERT_TRUE(Converge());
    EXPECT_EQ(reflector_->stats().lists, 1 + c.relists);
    EXPECT_EQ(reflector_->stats().relist_waits, c.relist_waits);
    EXPECT_EQ(reflector_->stats().reconnect_waits, c.reconnect_waits);
    ExpectNoDuplicateDeliveries();
  }
}

TEST_F(ReflectorTest, RetryAfterOnListRepeatsTheSameRequestWithoutRelisting) {
  server_.Admin(
      "POST", "faults",
      {{"verb", "list"}, {"status", 429}, {"body", "text"}, {"retry_after", 0}, {"times", 3}});
  StartReflector(FastOptions());
  EXPECT_EQ(reflector_->stats().list_failures, 0);
  EXPECT_EQ(Requests(false).size(), 4u);
}

TEST_F(ReflectorTest, TooLargeResourceVersionThatKeepsFailingRelistsFromTheLatest) {
  // 1 attempt + 10 Retry-After repeats of the list at RV "0", then a list without an RV.
  server_.Admin("POST", "faults",
                {{"verb", "list"},
                 {"status", 504},
                 {"reason", "Timeout"},
                 {"cause", "ResourceVersionTooLarge"},
                 {"retry_after", 0},
                 {"times", 11}});
  Create("big");
  StartReflector(FastOptions());
  auto lists = Requests(false);
  ASSERT_EQ(lists.size(), 12u);
  EXPECT_EQ(lists[10]["query"]["resourceVersion"], "0");
  EXPECT_FALSE(lists[11]["query"].contains("resourceVersion"));
  EXPECT_EQ(reflector_->store().size(), 1u);
}

// A refused list: the owner hears of each refusal (code and reason) before the backoff; the
// retries are one warning (the rest at debug level) until a list succeeds; a later refusal is a
// warning again.
TEST_F(ReflectorTest, ForbiddenListBacksOffUntilRbacAllowsIt) {
  Create("later");
  const nlohmann::json get_only = {
      {"user", "test-admin"}, {"rules", {{{"verbs", {"get"}}, {"resources", {"configmaps"}}}}}};
  server_.Admin("POST", "acl", get_only);
  auto http = HttpClient::Create(runner_.get(), creds_);
  ASSERT_TRUE(http.ok());
  http_ = std::move(*http);
  api_ = std::make_unique<ApiClient>(http_.get());
  std::vector<std::string> errors;
  ReflectorHandlers handlers;
  handlers.on_error = [&](const ApiError& err) {
    errors.push_back(std::to_string(err.code) + " " + err.reason);
  };
  vmtest::LogCapture log;
  auto warnings = [&] {
    const std::string text = log.text();
    size_t n = 0;
    for (size_t at = 0;
         (at = text.find("[warning] \"Relisting after a delay\"", at)) != std::string::npos; ++at) {
      ++n;
    }
    return n;
  };
  reflector_ = std::make_unique<Reflector>(api_.get(), FastOptions(), handlers);
  reflector_->Start();
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().list_failures >= 4; }));
  EXPECT_FALSE(reflector_->synced());
  EXPECT_EQ(errors.size(), static_cast<size_t>(reflector_->stats().list_failures));
  EXPECT_EQ(errors.front(), "403 Forbidden");
  EXPECT_EQ(warnings(), 1u) << log.text();
  EXPECT_NE(log.text().find("[debug] \"Relisting after a delay\""), std::string::npos);
  server_.Admin("POST", "acl", {{"user", "test-admin"}, {"rules", nullptr}});
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->synced(); }));
  EXPECT_EQ(reflector_->store().size(), 1u);

  // Refused again after a success: a new warning.
  server_.Admin("POST", "acl", get_only);
  server_.Admin("POST", "drop-watches", {{"abort", true}});
  ASSERT_TRUE(runner_.RunUntil([&] { return warnings() == 2; }));
}

TEST_F(ReflectorTest, UnreachableServerKeepsTheStoreAndBacksOff) {
  Create("kept");
  StartReflector(FastOptions());
  server_.Stop();
  runner_.RunFor(std::chrono::milliseconds(1500));
  EXPECT_GE(reflector_->stats().backoff_waits, 2);
  ASSERT_NE(reflector_->store().Get("default/kept"), nullptr);
  EXPECT_EQ(deliveries_.size(), 1u);  // only the first add: nothing was deleted
}

TEST_F(ReflectorTest, RotatedTokenIsPickedUpAfter401OnRewatch) {
  std::string token_file = server_.dir() + "/token";
  std::ofstream(token_file) << "test-token";
  creds_.token.clear();
  creds_.token_file = token_file;
  StartReflector(FastOptions());
  server_.RotateToken("rotated");
  std::ofstream(token_file + ".new") << "rotated\n";
  std::filesystem::rename(token_file + ".new", token_file);
  DropWatchesAfterShortWatchLimit();
  Churn("tok");
  ASSERT_TRUE(Converge());
  EXPECT_EQ(reflector_->stats().lists, 1);
  int unauthorized = 0;
  auto reply = server_.Admin("GET", "requests");
  for (const auto& r : reply.body["requests"]) unauthorized += r.value("code", 0) == 401;
  EXPECT_GE(unauthorized, 1);  // the old token was refused once, then the file was re-read
}

TEST_F(ReflectorTest, PeriodicRelistWithoutChangesDeliversNothing) {
  ReflectorOptions options = FastOptions();
  options.resync_period = std::chrono::milliseconds(200);
  Create("steady");
  StartReflector(options);
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().lists >= 3; }));
  EXPECT_EQ(deliveries_.size(), 1u);
  // Objects deleted while no watch saw it come out of the next relist as deletions.
  reflector_->Stop();
  Delete("steady");
  Create("fresh");
  reflector_.reset();
  deliveries_.clear();
  rvs_seen_.clear();
  StartReflector(options);
  ASSERT_TRUE(Converge());
}

TEST_F(ReflectorTest, FieldSelectorsForPodsOnANodeAndOneNamedObject) {
  auto pod = [](const std::string& name, const std::string& node) {
    return nlohmann::json{{"metadata", {{"name", name}}}, {"spec", {{"nodeName", node}}}};
  };
  ASSERT_EQ(server_.Api("POST", "/api/v1/namespaces/shop/pods", pod("web-0", "node-1")).code, 201);
  ASSERT_EQ(server_.Api("POST", "/api/v1/namespaces/shop/pods", pod("web-1", "node-2")).code, 201);
  ReflectorOptions options = FastOptions();
  options.path = "/api/v1/pods";
  options.kind = "Pod";
  options.field_selector = "spec.nodeName=node-1";
  StartReflector(options);
  EXPECT_EQ(reflector_->store().size(), 1u);
  ASSERT_NE(reflector_->store().Get("shop/web-0"), nullptr);
  ASSERT_EQ(server_.Api("POST", "/api/v1/namespaces/other/pods", pod("db-0", "node-1")).code, 201);
  ASSERT_EQ(server_.Api("POST", "/api/v1/namespaces/other/pods", pod("db-1", "node-3")).code, 201);
  // Graceful deletion: MODIFIED with deletionTimestamp, then DELETED.
  ASSERT_EQ(server_.Api("DELETE", "/api/v1/namespaces/shop/pods/web-0").code, 200);
  ASSERT_TRUE(runner_.RunUntil([&] {
    const nlohmann::json* p = reflector_->store().Get("shop/web-0");
    return reflector_->store().size() == 2 && p != nullptr &&
           (*p)["metadata"].contains("deletionTimestamp");
  }));
  ASSERT_EQ(server_.Api("DELETE", "/api/v1/namespaces/shop/pods/web-0?gracePeriodSeconds=0").code,
            200);
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->store().Get("shop/web-0") == nullptr; }));
  EXPECT_NE(reflector_->store().Get("other/db-0"), nullptr);

  reflector_.reset();
  deliveries_.clear();
  rvs_seen_.clear();
  options = FastOptions();
  options.field_selector = "metadata.name=app-config";
  StartReflector(options);
  EXPECT_EQ(reflector_->store().size(), 0u);  // missing object: an empty list, not an error
  Create("app-config", "1");
  Create("other-config", "1");
  Delete("app-config");
  Create("app-config", "2");  // re-created: a new uid
  ASSERT_TRUE(Converge(kCms + "?fieldSelector=metadata.name%3Dapp-config"));
  std::vector<std::string> types;
  for (const auto& d : deliveries_) types.push_back(d.type + " " + d.key);
  EXPECT_EQ(types, (std::vector<std::string>{"add default/app-config", "delete default/app-config",
                                             "add default/app-config"}));
}

// BOOKMARKs are counted and deliver nothing; the synced resourceVersion is the one they carry
// (the test server's: the watch's last, as its filter saw no other change), never moved back.
TEST_F(ReflectorTest, BookmarksDeliverNothingAndKeepTheSyncedVersion) {
  server_.Admin("POST", "settings", nlohmann::json{{"bookmark_period", 0.1}});
  Create("app-config", "1");
  ReflectorOptions options = FastOptions();
  options.field_selector = "metadata.name=app-config";
  StartReflector(options);
  ASSERT_EQ(deliveries_.size(), 1u);
  const std::string own_rv = reflector_->last_sync_resource_version();
  ASSERT_FALSE(own_rv.empty());
  Create("other-config", "1");
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().bookmarks >= 3; }));
  EXPECT_EQ(reflector_->last_sync_resource_version(), own_rv);
  EXPECT_EQ(deliveries_.size(), 1u);
  Modify("app-config", "2");
  ASSERT_TRUE(runner_.RunUntil([&] { return deliveries_.size() == 2; }));
  const int bookmarks = reflector_->stats().bookmarks;
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().bookmarks >= bookmarks + 2; }));
  EXPECT_EQ(reflector_->last_sync_resource_version(), deliveries_.back().rv);
  EXPECT_TRUE(ResourceVersionOlder(own_rv, reflector_->last_sync_resource_version()));
}

// client-go's two backoffs: watch set-ups that get no answer grow the reconnect backoff; the 410
// that follows once the server answers is relisted after the relist backoff's first delay, not
// after one the outage grew. The relist's line says 410 Expired.
TEST_F(ReflectorTest, A410AfterUnansweredReconnectsRelistsAfterTheFirstRelistDelay) {
  for (std::string mode : {"status", "event"}) {
    SCOPED_TRACE(mode);
    reflector_.reset();
    deliveries_.clear();
    rvs_seen_.clear();
    server_.Admin("DELETE", "faults");
    server_.Admin("POST", "settings", {{"expired_watch_mode", mode}});
    StartReflector(FastOptions());  // both backoffs: 50 ms doubling to 200 ms, jitter 1.0
    vmtest::LogCapture log;
    // The watch ends; the next set-ups are reset unanswered (libcurl may spend two resets on one
    // attempt), and meanwhile changes happen and are compacted away.
    server_.Admin("POST", "faults", {{"verb", "watch"}, {"reset", true}, {"times", 6}});
    DropWatchesAfterShortWatchLimit();
    Churn("e" + mode);
    server_.Admin("POST", "compact");
    ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().expired >= 1; }));
    const Reflector::Stats& stats = reflector_->stats();
    // Three waits grew the reconnect backoff to [200, 400) ms; the relist waits the relist
    // backoff's first delay, [50, 100) ms.
    EXPECT_GE(stats.reconnect_waits, 3);
    EXPECT_EQ(stats.relist_waits, 1);
    EXPECT_GE(stats.last_delay, std::chrono::milliseconds(50));
    EXPECT_LT(stats.last_delay, std::chrono::milliseconds(100));
    ASSERT_TRUE(Converge());
    EXPECT_EQ(reflector_->stats().lists, 2);
    ExpectNoDuplicateDeliveries();
    bool named = false;
    std::istringstream lines(log.text());
    for (std::string line; std::getline(lines, line);) {
      named |= line.find("\"Relisting after a delay\"") != std::string::npos &&
               line.find("410 Expired") != std::string::npos;
    }
    EXPECT_TRUE(named) << log.text();
  }
}

// The server goes away (every connection reset, nothing answered, the probe's /version neither)
// and comes back: the watch waiting out a reconnect backoff of a minute re-watches as soon as
// the client's probe finds the server answering, from its resourceVersion (no relist), once the
// probe was answered. One probe at a time, whatever waits.
TEST_F(ReflectorTest, AReconnectComesWhenTheServerAnswersAgainNotWhenTheBackoffEnds) {
  ReflectorOptions options = FastOptions();
  options.reconnect_backoff.initial = std::chrono::minutes(1);
  options.reconnect_backoff.cap = std::chrono::minutes(1);
  reachability_.probe_interval = std::chrono::milliseconds(200);
  Create("before");
  StartReflector(options);
  ASSERT_TRUE(WatchOpen());
  runner_.RunFor(std::chrono::milliseconds(300));  // past the "very short watch" limit
  server_.Admin("POST", "outage", {{"down", true}});
  const ServerReachability& reachability = api_->reachability();
  ASSERT_TRUE(runner_.RunUntil([&] { return reachability.stats().probes_unanswered >= 3; }));
  EXPECT_EQ(reachability.state(), ServerReachability::State::kNotAnswering);
  EXPECT_EQ(reflector_->stats().reconnect_waits, 1);  // a minute's wait, the probes meanwhile
  EXPECT_EQ(reflector_->stats().woken_by_answer, 0);
  const int watches = reflector_->stats().watches;

  server_.Admin("DELETE", "requests");
  server_.Admin("POST", "outage", {{"down", false}});
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->stats().watches > watches; }))
      << "the re-watch waited for its backoff";
  EXPECT_EQ(reflector_->stats().woken_by_answer, 1);
  EXPECT_EQ(reachability.stats().reconnects, 1u);
  // On the server: the probe answered, then the watch came.
  size_t probe_at = SIZE_MAX;
  size_t watch_at = SIZE_MAX;
  const nlohmann::json log = server_.Admin("GET", "requests").body["requests"];
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i]["path"] == "/version" && log[i].value("code", 0) == 200 && probe_at == SIZE_MAX) {
      probe_at = i;
    }
    if (log[i]["path"] == kCms && log[i]["query"].contains("watch") && watch_at == SIZE_MAX) {
      watch_at = i;
    }
  }
  ASSERT_NE(probe_at, SIZE_MAX) << log.dump();
  ASSERT_NE(watch_at, SIZE_MAX) << log.dump();
  EXPECT_LT(probe_at, watch_at) << log.dump();
  Churn("back");
  ASSERT_TRUE(Converge());
  EXPECT_EQ(reflector_->stats().lists, 1) << "a relist after the reconnect";
  ExpectNoDuplicateDeliveries();
}

// Right after the server answers again, its Node authorizer may refuse reads until its graph has
// filled: a 403 then (at watch set-up, on a list) is relisted within the grace's retry delay
// (1 s), however far the relist backoff has grown, at debug level. After the grace a 403 waits
// the relist backoff again, with a warning.
TEST_F(ReflectorTest, A403RightAfterAReconnectIsRelistedWithinTheGraceRetryDelay) {
  ReflectorOptions options = FastOptions();
  options.relist_backoff.initial = std::chrono::seconds(5);
  options.relist_backoff.cap = std::chrono::minutes(1);
  reachability_.probe_interval = std::chrono::milliseconds(200);
  auto offset = std::make_shared<std::chrono::milliseconds>(0);
  reachability_.clock = [offset] { return std::chrono::steady_clock::now() + *offset; };
  StartReflector(options);
  ASSERT_TRUE(WatchOpen());
  runner_.RunFor(std::chrono::milliseconds(300));
  vmtest::LogCapture log;
  server_.Admin("POST", "outage", {{"down", true}});
  ASSERT_TRUE(
      runner_.RunUntil([&] { return api_->reachability().stats().probes_unanswered >= 1; }));
  nlohmann::json refuse = {{"status", 403},
                           {"reason", "Forbidden"},
                           {"message",
                            "configmaps is forbidden: User \"system:node:node-1\" cannot list "
                            "resource \"configmaps\" in API group \"\" in the namespace "
                            "\"default\": no relationship found between node 'node-1' and this "
                            "object"}};
  refuse["verb"] = "watch";
  refuse["times"] = 1;
  server_.Admin("POST", "faults", refuse);
  refuse["verb"] = "list";
  refuse["times"] = 2;
  server_.Admin("POST", "faults", refuse);
  server_.Admin("POST", "outage", {{"down", false}});

  // The re-watch refused, two lists refused, then the list that succeeds.
  std::vector<std::chrono::milliseconds> delays;
  int waits = reflector_->stats().relist_waits;
  auto note_delays = [&] {
    if (reflector_->stats().relist_waits > waits) {
      waits = reflector_->stats().relist_waits;
      delays.push_back(reflector_->stats().last_delay);
    }
  };
  ASSERT_TRUE(runner_.RunUntil([&] {
    note_delays();
    return reflector_->stats().lists == 2;
  })) << "the refusals waited the relist backoff";
  EXPECT_EQ(reflector_->stats().grace_refusals, 3);
  ASSERT_EQ(delays.size(), 3u);
  for (auto delay : delays) EXPECT_LE(delay, std::chrono::milliseconds(1000));
  EXPECT_EQ(log.text().find("[warning] \"Relisting after a delay\""), std::string::npos)
      << log.text();
  EXPECT_NE(log.text().find("[debug] \"Relisting after a delay\""), std::string::npos);

  // Past the grace, by the reachability's clock: a 403 is an ordinary HTTP error again.
  *offset = api_->reachability().options().reconnect_grace;
  refuse["verb"] = "watch";
  refuse["times"] = 1;
  server_.Admin("POST", "faults", refuse);
  DropWatchesAfterShortWatchLimit();
  ASSERT_TRUE(runner_.RunUntil([&] {
    note_delays();
    return delays.size() == 4;
  }));
  EXPECT_GT(delays.back(), std::chrono::milliseconds(1000));
  EXPECT_EQ(reflector_->stats().grace_refusals, 3);
  EXPECT_NE(log.text().find("[warning] \"Relisting after a delay\""), std::string::npos);
}

}  // namespace
}  // namespace kubeclient
