// ApiClient and HttpClient against kube-test-apiserver: verbs, Status errors, retries, TLS,
// credentials, token rotation, CA reload, streaming.
#include "kubeclient/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>

#include "kubeclient/api_health.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/transport/http_client.h"
#include "kubeclient/watch/reflector.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using vmtest::TestLoop;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path + ".tmp") << content;
  std::filesystem::rename(path + ".tmp", path);
}

nlohmann::json ConfigMap(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}}},
          {"data", {{"a", value}}}};
}

RetryPolicy FastRetries() {
  RetryPolicy policy;
  policy.backoff.initial = std::chrono::milliseconds(10);
  policy.backoff.cap = std::chrono::milliseconds(50);
  return policy;
}

class ApiClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start().ok()); }

  Credentials ServerCredentials() {
    auto creds = LoadKubeconfig({server_.kubeconfig()});
    EXPECT_TRUE(creds.ok()) << creds.status().message();
    return *creds;
  }

  void Connect(const Credentials& creds, HttpClientOptions options = {},
               RateLimiterOptions limits = {}) {
    auto http = HttpClient::Create(runner_.get(), creds, options);
    ASSERT_TRUE(http.ok()) << http.status().message();
    http_ = std::move(*http);
    api_ = std::make_unique<ApiClient>(http_.get(), FastRetries(), std::move(limits));
  }

  ApiResult Call(const std::function<void(ApiCallback)>& start) {
    std::optional<ApiResult> result;
    start([&](ApiResult r) { result = std::move(r); });
    EXPECT_TRUE(runner_.RunUntil([&] { return result.has_value(); }));
    return result.value_or(ApiResult{TransportError("no answer"), nullptr});
  }

  ApiResult Get(const std::string& path) {
    return Call([&](ApiCallback cb) { api_->Get(path, std::move(cb)); });
  }

  int CountRequests(const std::string& method, const std::string& path) {
    int n = 0;
    const kube_testing::HttpReply reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      if (r["method"] == method && r["path"] == path) ++n;
    }
    return n;
  }

  void TearDown() override {
    api_.reset();
    http_.reset();
  }

  TestApiServerProcess server_;
  TestLoop runner_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<ApiClient> api_;
};

const std::string kCms = "/api/v1/namespaces/default/configmaps";

TEST_F(ApiClientTest, VerbsAndStatusErrors) {
  Connect(ServerCredentials());
  ApiResult created = Call([&](ApiCallback cb) { api_->Create(kCms, ConfigMap("c", "1"), cb); });
  ASSERT_TRUE(created.ok()) << created.error->ToString();
  std::string rv = created.object["metadata"]["resourceVersion"];

  ApiResult exists = Call([&](ApiCallback cb) { api_->Create(kCms, ConfigMap("c", "1"), cb); });
  ASSERT_FALSE(exists.ok());
  EXPECT_TRUE(exists.error->IsAlreadyExists());

  nlohmann::json update = created.object;
  update["data"]["a"] = "2";
  ApiResult updated = Call([&](ApiCallback cb) { api_->Update(kCms + "/c", update, cb); });
  ASSERT_TRUE(updated.ok());
  EXPECT_NE(updated.object["metadata"]["resourceVersion"], rv);

  update["data"]["a"] = "3";  // still carries the first resourceVersion
  ApiResult conflict = Call([&](ApiCallback cb) { api_->Update(kCms + "/c", update, cb); });
  ASSERT_FALSE(conflict.ok());
  EXPECT_TRUE(conflict.error->IsConflict());
  EXPECT_EQ(conflict.error->details_name, "c");
  EXPECT_EQ(conflict.error->details_kind, "configmaps");

  ApiResult patched = Call([&](ApiCallback cb) {
    api_->Patch(kCms + "/c", {{"data", {{"b", "x"}}}}, "application/merge-patch+json", cb);
  });
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ(patched.object["data"], (nlohmann::json{{"a", "2"}, {"b", "x"}}));

  ApiResult list = Get(kCms + "?fieldSelector=" + QueryEscape("metadata.name=c"));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list.object["items"].size(), 1u);

  ASSERT_TRUE(Call([&](ApiCallback cb) { api_->Delete(kCms + "/c", cb); }).ok());
  ApiResult missing = Get(kCms + "/c");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.error->IsNotFound());
  EXPECT_EQ(missing.error->reason, "NotFound");
  EXPECT_EQ(missing.error->message, "configmaps \"c\" not found");

  ApiResult bad = Get(kCms + "?fieldSelector=" + QueryEscape("spec.nodeName=x"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error->code, 400);
}

TEST_F(ApiClientTest, SendsUserAgentAcceptEncodingAndToken) {
  Connect(ServerCredentials());
  ASSERT_TRUE(Get("/version").ok());
  auto requests = server_.Admin("GET", "requests").body["requests"];
  nlohmann::json last;
  for (const auto& r : requests) {
    if (r["path"] == "/version") last = r;
  }
  ASSERT_FALSE(last.is_null());
  EXPECT_THAT(last["user_agent"].get<std::string>(), StartsWith("volumemanager/"));
  EXPECT_THAT(last["user_agent"].get<std::string>(), HasSubstr("(linux/"));
  EXPECT_THAT(last["accept_encoding"].get<std::string>(), HasSubstr("gzip"));
  EXPECT_EQ(last["user"], "test-admin");
}

TEST_F(ApiClientTest, GzippedLargeListIsDecoded) {
  Connect(ServerCredentials());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(
        server_.Api("POST", kCms, ConfigMap("big-" + std::to_string(i), std::string(60000, 'x')))
            .code,
        201);
  }
  ApiResult list = Get(kCms);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list.object["items"].size(), 3u);
  EXPECT_EQ(list.object["items"][2]["data"]["a"].get<std::string>().size(), 60000u);
}

struct RetryCase {
  std::string name;
  nlohmann::json fault;
  std::string method;
  bool succeeds;
  int requests;
  long error_code;
};

TEST_F(ApiClientTest, RetryRules) {
  Connect(ServerCredentials());
  const std::vector<RetryCase> cases = {
      {"429 text body with Retry-After is repeated",
       {{"status", 429}, {"body", "text"}, {"retry_after", 0}, {"times", 3}},
       "GET",
       true,
       4,
       0},
      {"503 Status with Retry-After on a write is repeated",
       {{"status", 503}, {"retry_after", 0}, {"times", 1}},
       "POST",
       true,
       2,
       0},
      {"500 without Retry-After on a write is not repeated",
       {{"status", 500}, {"times", 1}},
       "POST",
       false,
       1,
       500},
      {"502 HTML without Retry-After on a GET is retried with backoff",
       {{"status", 502}, {"body", "html"}, {"times", 2}},
       "GET",
       true,
       3,
       0},
      {"Retry-After forever gives up after 10 repeats",
       {{"status", 429}, {"retry_after", 0}, {"times", -1}},
       "GET",
       false,
       11,
       429},
  };
  int n = 0;
  for (const RetryCase& c : cases) {
    SCOPED_TRACE(c.name);
    server_.Admin("DELETE", "faults");
    server_.Admin("DELETE", "requests");
    nlohmann::json fault = c.fault;
    fault["verb"] = c.method == "GET" ? "list" : "create";
    server_.Admin("POST", "faults", fault);
    std::string name = "r" + std::to_string(n++);
    ApiResult result = c.method == "GET" ? Get(kCms) : Call([&](ApiCallback cb) {
      api_->Create(kCms, ConfigMap(name, "v"), cb);
    });
    EXPECT_EQ(result.ok(), c.succeeds);
    if (!c.succeeds) {
      ASSERT_TRUE(result.error.has_value());
      EXPECT_EQ(result.error->code, c.error_code);
    }
    EXPECT_EQ(CountRequests(c.method, kCms), c.requests);
  }
  server_.Admin("DELETE", "faults");
}

TEST_F(ApiClientTest, EachRetryOfA5xxIsLogged) {
  Connect(ServerCredentials());
  server_.Admin("POST", "faults", {{"verb", "list"}, {"status", 503}, {"times", 2}});
  vmtest::LogCapture log;
  EXPECT_TRUE(Get(kCms).ok());
  const std::string text = log.text();
  EXPECT_THAT(text,
              testing::HasSubstr("503 ServiceUnavailable: injected failure 503; retry 1 in "));
  EXPECT_THAT(text, testing::HasSubstr("; retry 2 in "));
  server_.Admin("DELETE", "faults");
}

TEST_F(ApiClientTest, NonStatusErrorBodiesAreClassifiedByCode) {
  Connect(ServerCredentials());
  server_.Admin("POST", "faults", {{"verb", "get"}, {"status", 404}, {"body", "html"}});
  ApiResult result = Get(kCms + "/x");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error->reason, "NotFound");
  server_.Admin("POST", "faults", {{"verb", "create"}, {"status", 409}, {"body", "empty"}});
  ApiResult exists = Call([&](ApiCallback cb) { api_->Create(kCms, ConfigMap("y", "v"), cb); });
  ASSERT_FALSE(exists.ok());
  EXPECT_TRUE(exists.error->IsAlreadyExists());
}

TEST_F(ApiClientTest, RotatedTokenFileIsReReadAfter401) {
  Credentials creds = ServerCredentials();
  std::string token_file = server_.dir() + "/token";
  WriteFile(token_file, "test-token\n");
  creds.token.clear();
  creds.token_file = token_file;
  Connect(creds);
  ASSERT_TRUE(Get("/api").ok());
  server_.RotateToken("second-token");
  ApiResult rejected = Get("/api");
  ASSERT_FALSE(rejected.ok());
  EXPECT_TRUE(rejected.error->IsUnauthorized());
  WriteFile(token_file, "second-token");
  // The 401 invalidated the cached token: the next request reads the file again.
  EXPECT_TRUE(Get("/api").ok());
}

TEST_F(ApiClientTest, ClientCertificateWithoutToken) {
  Credentials creds = ServerCredentials();
  creds.token.clear();
  creds.tls.client_cert_pem = ReadFile(server_.pki("client.crt"));
  creds.tls.client_key_pem = ReadFile(server_.pki("client.key"));
  Connect(creds);
  ASSERT_TRUE(Get(kCms).ok());
  auto requests = server_.Admin("GET", "requests").body["requests"];
  ASSERT_GE(requests.size(), 2u);
  EXPECT_EQ(requests[requests.size() - 2]["user"], "cert-user");
}

TEST_F(ApiClientTest, TlsVerification) {
  struct Case {
    std::string name;
    std::function<void(Credentials&)> change;
    bool succeeds;
  };
  const std::vector<Case> cases = {
      {"wrong CA fails",
       [&](Credentials& c) { c.tls.ca_pem = ReadFile(server_.pki("client.crt")); }, false},
      {"insecure-skip-tls-verify works without a CA",
       [](Credentials& c) {
         c.tls.ca_pem.clear();
         c.tls.insecure_skip_tls_verify = true;
       },
       true},
      {"tls-server-name in the certificate",
       [](Credentials& c) { c.tls.server_name = "kubernetes"; }, true},
      {"tls-server-name not in the certificate",
       [](Credentials& c) { c.tls.server_name = "other.example"; }, false},
      {"system roots do not trust the test CA", [](Credentials& c) { c.tls.ca_pem.clear(); },
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Credentials creds = ServerCredentials();
    c.change(creds);
    Connect(creds);
    ApiResult result = Get("/version");
    EXPECT_EQ(result.ok(), c.succeeds) << (result.error ? result.error->ToString() : "");
    if (!c.succeeds) {
      EXPECT_TRUE(result.error->IsTransport());
    }
  }
}

// Issue 44: libcurl and the HTTP/2 transport (GnuTLS; the test server speaks HTTP/1.1, so the
// native transport fails or succeeds at its own handshake before handing over) classify a
// failure alike, and the shared ApiHealth takes it as permanent or transient. (A client key that
// is not the certificate's is refused before any request, by HttpClient::Create.)
TEST_F(ApiClientTest, BothTransportsClassifyPermanentAndTransientFailuresAlike) {
  struct Case {
    std::string name;
    std::function<void(Credentials&)> change;
    FailureClass failure_class;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"a CA that did not sign the server's certificate",
       [&](Credentials& c) { c.tls.ca_pem = ReadFile(server_.pki("client.crt")); },
       FailureClass::kPermanent, "untrusted_server"},
      {"the system roots", [](Credentials& c) { c.tls.ca_pem.clear(); }, FailureClass::kPermanent,
       "untrusted_server"},
      {"tls-server-name not in the certificate",
       [](Credentials& c) { c.tls.server_name = "other.example"; }, FailureClass::kPermanent,
       "untrusted_server"},
      {"a token the server does not know", [](Credentials& c) { c.token = "revoked-token"; },
       FailureClass::kPermanent, "unauthorized"},
      {"nothing listening",
       [&](Credentials& c) {
         c.server = "https://127.0.0.1:1";  // privileged and unused: refused at once
       },
       FailureClass::kTransient, "unreachable"},
      {"the right CA and token", [](Credentials&) {}, FailureClass::kAnswered, ""},
  };
  for (bool native : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + (native ? " (HTTP/2 transport)" : " (libcurl)"));
      Credentials creds = ServerCredentials();
      c.change(creds);
      HttpClientOptions options;
      options.native_http2 = native;
      Connect(creds, options);
      ApiHealth health(ApiHealthOptions{});
      api_->SetHealth(&health);
      ApiResult result = Get("/api");
      const FailureKind kind = result.ok() ? FailureKind{} : ClassifyApiError(*result.error);
      EXPECT_EQ(kind.failure_class, c.failure_class)
          << (result.error ? result.error->ToString() : "ok");
      EXPECT_EQ(kind.reason, c.reason) << (result.error ? result.error->ToString() : "ok");
      EXPECT_EQ(health.permanent(), c.failure_class == FailureClass::kPermanent);
      EXPECT_EQ(health.reached(), c.failure_class == FailureClass::kAnswered);
      api_.reset();
    }
  }
}

TEST_F(ApiClientTest, CaFileIsReloadedWhenItChanges) {
  Credentials creds = ServerCredentials();
  std::string ca_file = server_.dir() + "/ca-bundle.crt";
  WriteFile(ca_file, ReadFile(server_.pki("client.crt")));  // not the server's CA
  creds.tls.ca_file = ca_file;
  creds.tls.ca_pem = ReadFile(ca_file);
  HttpClientOptions options;
  options.ca_check_interval = std::chrono::milliseconds(0);
  Connect(creds, options);
  ApiResult wrong = Get("/version");
  ASSERT_FALSE(wrong.ok());
  WriteFile(ca_file, ReadFile(server_.ca_file()));
  EXPECT_TRUE(Get("/version").ok());
}

TEST_F(ApiClientTest, RequestTimeoutIsATransportError) {
  HttpClientOptions options;
  options.request_timeout = std::chrono::milliseconds(300);
  Connect(ServerCredentials(), options);
  // The server holds the answer for an hour: only the client's timeout can end the call.
  server_.Admin("POST", "faults", {{"verb", "create"}, {"delay", 3600}});
  ApiResult result = Call([&](ApiCallback cb) { api_->Create(kCms, ConfigMap("slow", "v"), cb); });
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error->IsTransport());
  EXPECT_THAT(result.error->message, HasSubstr("Timeout"));
  EXPECT_EQ(CountRequests("POST", kCms), 1);  // a write is not retried blindly
}

TEST_F(ApiClientTest, RequestsAreCountedByMethodAndOutcomeRetriesIncluded) {
  Connect(ServerCredentials());
  server_.Admin("POST", "faults",
                {{"verb", "list"}, {"status", 429}, {"retry_after", 0}, {"times", 2}});
  ASSERT_TRUE(Get(kCms).ok());
  ASSERT_TRUE(Call([&](ApiCallback cb) { api_->Create(kCms, ConfigMap("n", "v"), cb); }).ok());
  ASSERT_FALSE(Get(kCms + "/missing").ok());
  bool ended = false;
  HttpRequest watch;
  watch.path = kCms + "?watch=true&timeoutSeconds=1";
  watch.stream = true;
  api_->Stream(
      watch, [&](base::Status, HttpResponse) { ended = true; }, StreamCallbacks{});
  ASSERT_TRUE(runner_.RunUntil([&] { return ended; }));
  EXPECT_EQ(
      api_->request_counts(),
      (ApiClient::RequestCounts{
          {{"GET", "429"}, 2}, {{"GET", "200"}, 2}, {{"POST", "201"}, 1}, {{"GET", "404"}, 1}}));
  // No answer at all: the first try and 4 retries, and the reachability probes (GET /version)
  // that came back while the retries waited.
  server_.Stop();
  ASSERT_FALSE(Get(kCms).ok());
  const ServerReachability::Stats& probes = api_->reachability().stats();
  EXPECT_EQ(api_->request_counts().at({"GET", "<error>"}), 5 + probes.probes_unanswered);
}

// A GET that got no answer waits its retry backoff (a minute here) or the server's next answer,
// whichever comes first: the client's probe finds the server back, and the GET goes at once.
TEST_F(ApiClientTest, AGetRetriedAfterNoAnswerGoesAsSoonAsTheServerAnswersAgain) {
  auto http = HttpClient::Create(runner_.get(), ServerCredentials());
  ASSERT_TRUE(http.ok());
  http_ = std::move(*http);
  RetryPolicy policy;
  policy.backoff.initial = std::chrono::minutes(1);
  policy.backoff.cap = std::chrono::minutes(1);
  ReachabilityOptions reachability;
  reachability.probe_interval = std::chrono::milliseconds(200);
  api_ = std::make_unique<ApiClient>(http_.get(), policy, RateLimiterOptions{}, reachability);
  server_.Admin("POST", "outage", {{"down", true}});
  std::optional<ApiResult> result;
  api_->Get(kCms, [&](ApiResult r) { result = std::move(r); });
  ASSERT_TRUE(
      runner_.RunUntil([&] { return api_->reachability().stats().probes_unanswered >= 2; }));
  EXPECT_FALSE(result.has_value());
  server_.Admin("POST", "outage", {{"down", false}});
  ASSERT_TRUE(runner_.RunUntil([&] { return result.has_value(); }))
      << "the retry waited for its backoff";
  EXPECT_TRUE(result->ok()) << result->error->ToString();
  EXPECT_EQ(api_->reachability().stats().reconnects, 1u);
  EXPECT_EQ(api_->reachability().stats().woken, 1u);
}

TEST(ApiClientPrefixTest, ServerUrlPathPrefixIsKept) {
  TestApiServerProcess server;
  ASSERT_TRUE(server.Start("t", {"--path-prefix", "/k8s/east"}).ok());
  TestLoop runner;
  auto creds = LoadKubeconfig({server.kubeconfig()});
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_THAT(creds->server, testing::EndsWith("/k8s/east"));
  auto http = HttpClient::Create(runner.get(), *creds);
  ASSERT_TRUE(http.ok());
  ApiClient api(http->get());
  std::optional<ApiResult> result;
  api.Get("/api/v1/namespaces/default/configmaps", [&](ApiResult r) { result = std::move(r); });
  ASSERT_TRUE(runner.RunUntil([&] { return result.has_value(); }));
  EXPECT_TRUE(result->ok()) << result->error->ToString();
}

TEST_F(ApiClientTest, StreamDeliversEveryByteAcrossSplitChunksAndCancelInsideCallback) {
  Connect(ServerCredentials());
  server_.Admin("POST", "settings", {{"chunk_mode", "split"}, {"chunk_size", 5}});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(server_.Api("POST", kCms, ConfigMap("s" + std::to_string(i), "v")).code, 201);
  }
  std::string received;
  bool done = false;
  HttpRequest request;
  request.path = kCms + "?watch=true&timeoutSeconds=1";
  request.stream = true;
  long status = 0;
  http_->Start(request,
               [&](base::Status transport, HttpResponse) {
                 EXPECT_TRUE(transport.ok()) << transport.message();
                 done = true;
               },
               {[&](const HttpResponse& head) { status = head.status; },
                [&](std::string_view data) {
                  received.append(data);
                  return true;
                }});
  ASSERT_TRUE(runner_.RunUntil([&] { return done; }));
  EXPECT_EQ(status, 200);
  int lines = 0;
  for (char c : received) lines += c == '\n';
  EXPECT_EQ(lines, 3);

  // Cancelling from inside on_data: no completion callback, and the client keeps working.
  bool cancelled_done = false;
  bool got_data = false;
  HttpClient::RequestId id = 0;
  request.path = kCms + "?watch=true&timeoutSeconds=30";
  id = http_->Start(request, [&](base::Status, HttpResponse) { cancelled_done = true; },
                    {nullptr, [&](std::string_view) {
                       got_data = true;
                       http_->Cancel(id);
                       return true;
                     }});
  ASSERT_TRUE(runner_.RunUntil([&] { return got_data; }));
  runner_.RunFor(std::chrono::milliseconds(100));
  EXPECT_FALSE(cancelled_done);
  EXPECT_EQ(http_->stats().requests_in_flight, 0u);
  EXPECT_TRUE(Get("/version").ok());
}

// Every libcurl and libuv callback of HttpClient is a wall: an exception inside one (here a
// bad_alloc from the fault hook, as an allocation there could throw) fails only the request it
// belongs to, with a message naming the callback, and the client and the loop go on serving.
TEST_F(ApiClientTest, AThrowingCallbackFailsOnlyItsRequestAndTheClientKeepsWorking) {
  struct Case {
    const char* callback;
    // Empty: the failure is not a request's (the client retries, the request succeeds).
    const char* error;
  };
  const Case cases[] = {
      {"header", "http header callback threw: std::bad_alloc"},
      {"write", "http write callback threw: std::bad_alloc"},
      {"socket", "http socket callback threw: std::bad_alloc"},
      {"poll", ""},
      {"timer", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.callback);
    std::string armed;  // the callback whose next call throws (once)
    HttpClientOptions options;
    options.callback_fault = [&](const char* callback) {
      if (armed == callback) {
        armed.clear();
        throw std::bad_alloc();
      }
    };
    Connect(ServerCredentials(), options);
    auto fetch = [&] {
      std::optional<base::Status> transport;
      HttpRequest request;
      request.path = "/version";
      http_->Start(request, [&](base::Status s, HttpResponse) { transport = std::move(s); });
      EXPECT_TRUE(runner_.RunUntil([&] { return transport.has_value(); }));
      return transport.value_or(base::Status::Error("no answer"));
    };
    armed = c.callback;
    base::Status failed = fetch();
    EXPECT_TRUE(armed.empty()) << "the fault never fired";
    if (*c.error == '\0') {
      EXPECT_TRUE(failed.ok()) << failed.message();
    } else {
      EXPECT_EQ(failed.message(), c.error);
    }
    EXPECT_TRUE(fetch().ok());
    EXPECT_EQ(http_->stats().requests_in_flight, 0u);
  }
}

}  // namespace
}  // namespace kubeclient

namespace kubeclient {
namespace {

// Client-side rate limiting (client-go's QPS/burst bucket) on a fake clock: the burst is sent at
// once, the rest only as the clock earns tokens; a retry takes a token like any attempt; a call
// cancelled while it waits is never sent; a reflector's list and watch set-up wait their turn too.
TEST_F(ApiClientTest, RateLimiterPacesEveryAttemptAndWatchSetUp) {
  std::chrono::steady_clock::time_point now{std::chrono::seconds(1000)};
  RateLimiterOptions limits;
  limits.qps = 10;  // a token per 100 ms of the fake clock
  limits.burst = 2;
  limits.clock = [&] { return now; };
  Connect(ServerCredentials(), {}, limits);
  server_.Admin("DELETE", "requests");
  int answered = 0;
  std::vector<ApiClient::CallId> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(api_->Get("/version", [&](ApiResult r) {
      EXPECT_TRUE(r.ok());
      ++answered;
    }));
  }
  ASSERT_TRUE(runner_.RunUntil([&] { return answered == 2; }));
  runner_.RunFor(std::chrono::milliseconds(200));  // real time does not earn tokens
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(CountRequests("GET", "/version"), 2);
  EXPECT_EQ(api_->rate_limiter().waiting(), 3u);

  now += std::chrono::milliseconds(100);
  ASSERT_TRUE(runner_.RunUntil([&] { return answered == 3; }));
  api_->Cancel(ids[3]);  // waiting: never sent
  now += std::chrono::milliseconds(100);
  ASSERT_TRUE(runner_.RunUntil([&] { return answered == 4; }));
  runner_.RunFor(std::chrono::milliseconds(200));
  EXPECT_EQ(answered, 4);
  EXPECT_EQ(CountRequests("GET", "/version"), 4);

  // A 500 without Retry-After is retried after a backoff, and the retry needs a token.
  server_.Admin("POST", "faults", {{"verb", "get"}, {"status", 500}, {"times", 1}});
  ASSERT_EQ(server_.Api("POST", kCms, ConfigMap("paced", "v")).code, 201);
  server_.Admin("DELETE", "requests");
  std::optional<ApiResult> got;
  now += std::chrono::milliseconds(100);
  api_->Get(kCms + "/paced", [&](ApiResult r) { got = std::move(r); });
  ASSERT_TRUE(runner_.RunUntil([&] { return CountRequests("GET", kCms + "/paced") == 1; }));
  runner_.RunFor(std::chrono::milliseconds(200));
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(CountRequests("GET", kCms + "/paced"), 1);
  now += std::chrono::milliseconds(100);
  ASSERT_TRUE(runner_.RunUntil([&] { return got.has_value(); }));
  EXPECT_TRUE(got->ok());
  EXPECT_EQ(CountRequests("GET", kCms + "/paced"), 2);

  // The reflector: its list waits for a token, then its watch set-up waits for the next one.
  server_.Admin("DELETE", "requests");
  auto count = [&](bool watch) {
    int n = 0;
    const kube_testing::HttpReply reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      if (r["path"] == kCms && r["query"].contains("watch") == watch) ++n;
    }
    return n;
  };
  ReflectorOptions options;
  options.path = kCms;
  options.resync_period = std::chrono::milliseconds(0);
  Reflector reflector(api_.get(), options, {});
  reflector.Start();
  runner_.RunFor(std::chrono::milliseconds(200));
  EXPECT_EQ(count(false), 0);
  now += std::chrono::milliseconds(100);
  ASSERT_TRUE(runner_.RunUntil([&] { return reflector.synced(); }));
  runner_.RunFor(std::chrono::milliseconds(200));
  EXPECT_EQ(count(true), 0) << "the watch went out without a token";
  now += std::chrono::milliseconds(100);
  ASSERT_TRUE(runner_.RunUntil([&] { return count(true) == 1; }));
  EXPECT_EQ(count(false), 1);
  reflector.Stop();
}

}  // namespace
}  // namespace kubeclient
