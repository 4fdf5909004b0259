// ApiTokenManager against kube-test-apiserver under a node's identity: a token bound to the pod
// with the source's audience (TokenReview says whose it is), one request for concurrent fetches,
// refresh at 80 % of a life the server shortened to seconds (the change handler runs, a new
// token), a refresh that fails keeping the old token until it expires and then failing visibly,
// the server's refusals named (a pod of another node), the refusal mode that sends nothing, and
// unregistering and Stop completing what waits.
#include "cache/api_token_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kubeclient/auth/credentials.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/test_loop.h"

namespace cache {
namespace {

using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;
using vmtest::TestLoop;

const std::string kNodeUser = "system:node:node-1";
const std::string kPods = "/api/v1/namespaces/shop/pods";

class ApiTokenManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    server_.Admin("POST", "tokens",
                  {{"token", "node-token"}, {"user", kNodeUser}, {"groups", {"system:nodes"}}});
    ASSERT_EQ(server_
                  .Api("POST", "/api/v1/namespaces/shop/serviceaccounts",
                       {{"apiVersion", "v1"},
                        {"kind", "ServiceAccount"},
                        {"metadata", {{"name", "web"}, {"namespace", "shop"}}}})
                  .code,
              201);
    auto creds = kubeclient::LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    creds_ = *creds;
    creds_.token = "node-token";
    auto http = kubeclient::HttpClient::Create(loop_.get(), creds_);
    ASSERT_TRUE(http.ok()) << http.status().message();
    http_ = std::move(*http);
    api_ = std::make_unique<kubeclient::ApiClient>(http_.get());
  }

  void TearDown() override {
    manager_.reset();
    api_.reset();
    http_.reset();
    EXPECT_TRUE(loop_.Close()) << "a libuv handle was left open";
  }

  void Start(const std::function<void(ApiTokenManagerOptions&)>& tweak = nullptr) {
    ApiTokenManagerOptions options;
    options.jitter = [] { return 0.0; };
    options.retry_initial = std::chrono::milliseconds(200);
    if (tweak) tweak(options);
    manager_ = std::make_unique<ApiTokenManager>(loop_.get(), api_.get(), options);
    manager_->SetChangeHandler([this](const kube::TokenRef& ref) { changes_.push_back(ref); });
  }

  // A pod in shop running as `account` on `node`; returns the ref of a token source of it.
  kube::TokenRef Pod(const std::string& name, const std::string& node = "node-1",
                     const std::string& audience = "", const std::string& account = "web") {
    nlohmann::json pod = {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", {{"name", name}, {"namespace", "shop"}}},
                          {"spec",
                           {{"nodeName", node},
                            {"serviceAccountName", account},
                            {"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    const kube_testing::HttpReply created = server_.Api("POST", kPods, pod);
    EXPECT_EQ(created.code, 201) << created.raw;
    kube::TokenRef ref;
    ref.namespace_ = "shop";
    ref.service_account = account;
    ref.audience = audience;
    ref.expiration_seconds = 3600;
    ref.pod_name = name;
    ref.pod_uid = created.body["metadata"]["uid"].get<std::string>();
    return ref;
  }

  bool FetchAndWait(const std::vector<kube::TokenRef>& refs) {
    bool done = false;
    manager_->Fetch(refs, [&] { done = true; });
    return loop_.RunUntil([&] { return done; });
  }

  // TokenReview (as the admin) of `token` for `audience` ("" the server's own).
  nlohmann::json Review(const std::string& token, const std::string& audience = "") {
    nlohmann::json spec = {{"token", token}};
    if (!audience.empty()) spec["audiences"] = {audience};
    return server_
        .Api("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
             {{"kind", "TokenReview"}, {"apiVersion", "authentication.k8s.io/v1"}, {"spec", spec}})
        .body["status"];
  }

  size_t TokenRequests() {
    size_t n = 0;
    const kube_testing::HttpReply reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      const std::string path = r["path"];
      n += path.ends_with("/token") && r.value("user", "") == kNodeUser ? 1 : 0;
    }
    return n;
  }

  TestApiServerProcess server_;
  TestLoop loop_;
  kubeclient::Credentials creds_;
  std::unique_ptr<kubeclient::HttpClient> http_;
  std::unique_ptr<kubeclient::ApiClient> api_;
  std::unique_ptr<ApiTokenManager> manager_;
  std::vector<kube::TokenRef> changes_;
};

TEST_F(ApiTokenManagerTest, ATokenBoundToThePodWithTheAudienceOneRequestForConcurrentFetches) {
  Start();
  const kube::TokenRef vault = Pod("web-0", "node-1", "vault");
  kube::TokenRef own = vault;
  own.audience = "";
  manager_->RegisterPod(vault.pod_uid, {vault, own});
  // Not fetched yet: no token, and the get says so.
  EXPECT_THAT(manager_->Get(vault).status().message(), HasSubstr("not received yet"));
  bool first = false, second = false;
  manager_->Fetch({vault, own}, [&] { first = true; });
  manager_->Fetch({vault}, [&] { second = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return first && second; }));
  EXPECT_EQ(TokenRequests(), 2u);  // one per token, not per fetch

  auto token = manager_->Get(vault);
  ASSERT_TRUE(token.ok()) << token.status().message();
  const nlohmann::json review = Review(*token->token, "vault");
  EXPECT_EQ(review["authenticated"], true) << review;
  EXPECT_EQ(review["user"]["username"], "system:serviceaccount:shop:web");
  EXPECT_EQ(review["user"]["extra"]["authentication.kubernetes.io/pod-uid"][0], vault.pod_uid);
  EXPECT_EQ(review["audiences"][0], "vault");
  // Meant for vault only: the API server's own audience does not take it.
  EXPECT_FALSE(Review(*token->token).value("authenticated", false));
  auto default_audience = manager_->Get(own);
  ASSERT_TRUE(default_audience.ok());
  EXPECT_EQ(Review(*default_audience->token)["authenticated"], true);
  EXPECT_NE(default_audience->serial, token->serial);

  // Current: a fetch sends nothing and completes at once.
  bool at_once = false;
  manager_->Fetch({vault, own}, [&] { at_once = true; });
  EXPECT_TRUE(at_once);
  EXPECT_EQ(TokenRequests(), 2u);
  EXPECT_EQ(manager_->stats().requested_ok, 2u);
  const std::optional<TokenStatus> status = manager_->Status(vault);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->has_token);
  EXPECT_EQ(status->last_error, "");
  // 80 % of an hour, the jitter pinned at 0 (the expirationTimestamp is to the second, so up to a
  // second of its life may be lost to that).
  const auto last_fifth = std::chrono::duration_cast<std::chrono::milliseconds>(status->expires_at -
                                                                                status->refresh_at);
  EXPECT_GE(last_fifth, std::chrono::milliseconds(719'800));
  EXPECT_LE(last_fifth, std::chrono::milliseconds(720'000));
}

TEST_F(ApiTokenManagerTest, RenewedAtEightyPercentOfItsLifeAndTheChangeHandlerRuns) {
  // The server's cap: 5 s, whatever is asked (--service-account-max-token-expiration).
  server_.Admin("POST", "settings", {{"token_max_expiration_seconds", 5}});
  Start();
  const kube::TokenRef ref = Pod("web-0");
  manager_->RegisterPod(ref.pod_uid, {ref});
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(FetchAndWait({ref}));
  auto first = manager_->Get(ref);
  ASSERT_TRUE(first.ok()) << first.status().message();
  // A first token is announced too (a volume backing off after a failure tries again at once).
  EXPECT_EQ(changes_, std::vector<kube::TokenRef>{ref});
  changes_.clear();
  // Due at 80 % of its 5 s (of 4 to 5 s: the expirationTimestamp is to the second), on the
  // manager's own timer: not before 3.2 s, and soon after 4 s at the latest.
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }, std::chrono::seconds(10)));
  const auto renewed_after = std::chrono::steady_clock::now() - asked;
  EXPECT_GE(renewed_after, std::chrono::milliseconds(3200));
  EXPECT_LE(renewed_after, std::chrono::milliseconds(4700));
  auto second = manager_->Get(ref);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->serial, first->serial);
  EXPECT_NE(*second->token, *first->token);
  EXPECT_EQ(changes_.front(), ref);
  EXPECT_EQ(manager_->stats().refreshed, 1u);
}

TEST_F(ApiTokenManagerTest, AFailingRefreshKeepsTheTokenUntilItExpiresThenFailsVisibly) {
  server_.Admin("POST", "settings", {{"token_max_expiration_seconds", 4}});
  Start();
  const kube::TokenRef ref = Pod("web-0");
  manager_->RegisterPod(ref.pod_uid, {ref});
  ASSERT_TRUE(FetchAndWait({ref}));
  auto first = manager_->Get(ref);
  ASSERT_TRUE(first.ok());
  changes_.clear();
  // Every refresh from now on is refused.
  server_.Admin("POST", "faults",
                {{"verb", "create"},
                 {"resource", "serviceaccounts/token"},
                 {"status", 403},
                 {"reason", "Forbidden"},
                 {"message", "refused by the test"},
                 {"times", -1}});
  // Past the refresh time (3.2 s), before the expiry (4 s): the old token serves on.
  ASSERT_TRUE(loop_.RunUntil([&] { return manager_->stats().requested_failed >= 1; },
                             std::chrono::seconds(10)));
  auto kept = manager_->Get(ref);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(kept->serial, first->serial);
  EXPECT_TRUE(changes_.empty());
  // Expired, the refresh still failing: the change handler runs and gets fail, naming the
  // account and the server's answer.
  ASSERT_TRUE(loop_.RunUntil([&] { return !changes_.empty(); }, std::chrono::seconds(10)));
  auto expired = manager_->Get(ref);
  ASSERT_FALSE(expired.ok());
  EXPECT_THAT(expired.status().message(),
              HasSubstr("token for service account \"shop/web\" expired at "));
  EXPECT_THAT(expired.status().message(), HasSubstr("refused by the test"));
  EXPECT_EQ(expired.status().api_code(), 403);
  EXPECT_EQ(manager_->stats().expired, 1u);
  EXPECT_GE(manager_->stats().requested_failed, 2u);  // retried before the expiry
  // The server takes requests again: the next fetch gets a new token.
  server_.Admin("DELETE", "faults");
  ASSERT_TRUE(FetchAndWait({ref}));
  auto again = manager_->Get(ref);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_NE(again->serial, first->serial);
}

TEST_F(ApiTokenManagerTest, TheServersRefusalOfAPodOfAnotherNodeIsTheGetsError) {
  Start();
  const kube::TokenRef ref = Pod("elsewhere", "node-2");
  manager_->RegisterPod(ref.pod_uid, {ref});
  ASSERT_TRUE(FetchAndWait({ref}));
  auto got = manager_->Get(ref);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(),
              HasSubstr("failed to fetch token for service account \"shop/web\": 403 Forbidden"));
  EXPECT_EQ(got.status().api_code(), 403);
  EXPECT_TRUE(changes_.empty());
  // A token never received is asked for again at the next fetch (the volume's backoff paces it).
  ASSERT_TRUE(FetchAndWait({ref}));
  EXPECT_EQ(TokenRequests(), 2u);
}

TEST_F(ApiTokenManagerTest, RefusedCredentialsSendNothingAndSayWhy) {
  Start([](ApiTokenManagerOptions& o) { o.refusal = "not a node"; });
  const kube::TokenRef ref = Pod("web-0");
  manager_->RegisterPod(ref.pod_uid, {ref});
  bool done = false;
  manager_->Fetch({ref}, [&] { done = true; });
  EXPECT_TRUE(done);  // at once
  EXPECT_EQ(manager_->Get(ref).status().message(),
            "no token requested for service account \"shop/web\": not a node");
  EXPECT_EQ(TokenRequests(), 0u);
  EXPECT_EQ(manager_->stats().refused, 1u);
}

TEST_F(ApiTokenManagerTest, UnregisteringAndStoppingCompleteWhatWaits) {
  Start();
  const kube::TokenRef ref = Pod("web-0");
  manager_->RegisterPod(ref.pod_uid, {ref});
  server_.Admin("POST", "faults",
                {{"verb", "create"}, {"resource", "serviceaccounts/token"}, {"delay", 1.0}});
  bool done = false;
  manager_->Fetch({ref}, [&] { done = true; });
  EXPECT_FALSE(done);
  manager_->UnregisterPod(ref.pod_uid);
  EXPECT_TRUE(done);
  EXPECT_THAT(manager_->Get(ref).status().message(), HasSubstr("not registered"));
  EXPECT_EQ(manager_->token_count(), 0u);

  manager_->RegisterPod(ref.pod_uid, {ref});
  done = false;
  manager_->Fetch({ref}, [&] { done = true; });
  EXPECT_FALSE(done);
  manager_->Stop();
  EXPECT_TRUE(done);
  loop_.RunFor(std::chrono::milliseconds(1200));
  EXPECT_FALSE(manager_->Get(ref).ok());  // the answer after Stop is not taken
}

}  // namespace
}  // namespace cache
