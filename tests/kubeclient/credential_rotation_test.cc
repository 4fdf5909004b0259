// Credentials that rotate under a running client, against kube-test-apiserver:
// * a client certificate rotated the way the kubelet rotates its own, the server checking the
//   certificate's validity on every request (at its own clock, which the test moves forward
//   instead of waiting): a kubeconfig naming kubelet-client-current.pem (certificate and key in
//   one file, a symlink) as both client-certificate and client-key; a new file written and the
//   symlink swapped while a watch runs; then the old certificate expires;
// * a token file rotated before the old token is revoked (a projected service-account token);
// * a CA file replaced (new connections verify against the new CA).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "kubeclient/api_client.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/transport/http_client.h"
#include "kubeclient/watch/reflector.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

namespace fs = std::filesystem;
using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using vmtest::TestLoop;

const std::string kCms = "/api/v1/namespaces/default/configmaps";
const std::string kNode = "system:node:n1";

nlohmann::json ConfigMap(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}}},
          {"data", {{"a", "v"}}}};
}

class ClientCertRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    // The node identity's own rights (the Node authorizer) do not cover listing a namespace's
    // ConfigMaps, which the reflector below does: granted on top, as RBAC would.
    auto acl = server_.Admin(
        "POST", "acl",
        {{"user", kNode},
         {"rules", {{{"verbs", {"get", "list", "watch"}}, {"resources", {"configmaps"}}}}}});
    ASSERT_EQ(acl.code, 200) << acl.raw;
    pki_ = server_.dir() + "/kubelet-pki";
    fs::create_directories(pki_);
    first_serial_ = Issue("kubelet-client-1.pem", 1);
    Point("kubelet-client-1.pem");
    // The kubelet's own kubeconfig shape: one file for both.
    const std::string kubeconfig = server_.dir() + "/kubelet.conf";
    std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\ncurrent-context: node\n"
                              << "clusters:\n- name: c\n  cluster:\n    server: " << server_.url()
                              << "\n    certificate-authority: " << server_.ca_file() << "\n"
                              << "users:\n- name: default-auth\n  user:\n"
                              << "    client-certificate: " << pki_
                              << "/kubelet-client-current.pem\n"
                              << "    client-key: " << pki_ << "/kubelet-client-current.pem\n"
                              << "contexts:\n- name: node\n  context: {cluster: c, user: "
                                 "default-auth}\n";
    auto creds = LoadKubeconfig({kubeconfig});
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    creds_ = *creds;
  }

  void TearDown() override {
    reflector_.reset();
    api_.reset();
    http_.reset();
  }

  // A new certificate for kNode valid `days` days from now in pki_/<name>; its serial.
  std::string Issue(const std::string& name, int days) {
    auto reply = server_.Admin("POST", "issue-client-cert",
                               {{"path", pki_ + "/" + name},
                                {"user", kNode},
                                {"groups", {"system:nodes"}},
                                {"days", days}});
    EXPECT_EQ(reply.code, 200) << reply.raw;
    return reply.body.value("serial", "");
  }
  // kubelet-client-current.pem -> name, swapped atomically (a new link renamed over the old).
  void Point(const std::string& name) {
    const std::string tmp = pki_ + "/kubelet-client-current.pem.tmp";
    fs::remove(tmp);
    fs::create_symlink(pki_ + "/" + name, tmp);
    fs::rename(tmp, pki_ + "/kubelet-client-current.pem");
  }

  void StartReflector() {
    HttpClientOptions options;
    options.native_http2 = true;  // as the daemon's API clients (this server speaks HTTP/1.1)
    options.client_cert_check_interval = std::chrono::milliseconds(100);
    auto http = HttpClient::Create(runner_.get(), creds_, options);
    ASSERT_TRUE(http.ok()) << http.status().message();
    http_ = std::move(*http);
    api_ = std::make_unique<ApiClient>(http_.get());
    ReflectorOptions ro;
    ro.path = kCms;
    ro.kind = "ConfigMap";
    ro.api_version = "v1";
    ro.description = "configmaps in default";
    ro.relist_backoff.initial = std::chrono::milliseconds(50);
    ro.relist_backoff.cap = std::chrono::milliseconds(200);
    ro.reconnect_backoff.initial = std::chrono::milliseconds(50);
    ro.reconnect_backoff.cap = std::chrono::milliseconds(200);
    ro.min_watch_timeout = std::chrono::seconds(300);
    ro.max_watch_timeout = std::chrono::seconds(301);
    ro.resync_period = std::chrono::milliseconds(0);
    reflector_ = std::make_unique<Reflector>(api_.get(), ro, ReflectorHandlers{});
    reflector_->Start();
    ASSERT_TRUE(runner_.RunUntil([&] { return reflector_->synced(); }));
  }

  // The server's log of the client's requests (the node's), oldest first.
  std::vector<nlohmann::json> NodeRequests() {
    std::vector<nlohmann::json> out;
    const auto reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      if (r.value("user", "") == kNode || r.value("code", 0) == 401) out.push_back(r);
    }
    return out;
  }
  bool WatchSeenWith(const std::string& serial) {
    for (const auto& r : NodeRequests()) {
      if (r["query"].contains("watch") && r.value("cert_serial", "") == serial) return true;
    }
    return false;
  }
  bool Has(const std::string& name) { return reflector_->store().items().count("default/" + name); }

  TestApiServerProcess server_;
  TestLoop runner_;
  std::string pki_;
  std::string first_serial_;
  Credentials creds_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<ApiClient> api_;
  std::unique_ptr<Reflector> reflector_;
};

TEST_F(ClientCertRotationTest, AWatchContinuesAcrossARotationAndTheOldCertificatesExpiry) {
  StartReflector();
  ASSERT_EQ(server_.Api("POST", kCms, ConfigMap("before")).code, 201);
  ASSERT_TRUE(runner_.RunUntil([&] { return Has("before"); }));
  ASSERT_TRUE(WatchSeenWith(first_serial_));
  const int lists = reflector_->stats().lists;

  // The kubelet's rotation: a new file, then the symlink swapped to it.
  const std::string second = Issue("kubelet-client-2.pem", 3);
  Point("kubelet-client-2.pem");
  ASSERT_TRUE(runner_.RunUntil([&] { return WatchSeenWith(second); }))
      << "no watch with the new certificate";
  // The old certificate expires (two days later by the server's clock); the new one is valid.
  ASSERT_EQ(server_.Admin("POST", "clock", {{"offset_seconds", 2 * 86400}}).code, 200);
  ASSERT_EQ(server_.Api("POST", kCms, ConfigMap("after")).code, 201);
  ASSERT_TRUE(runner_.RunUntil([&] { return Has("after"); }));
  // A new watch after the expiry, and a plain request, go through too.
  ASSERT_EQ(server_.Admin("POST", "drop-watches").code, 200);
  ASSERT_EQ(server_.Api("POST", kCms, ConfigMap("later")).code, 201);
  ASSERT_TRUE(runner_.RunUntil([&] { return Has("later"); }));
  bool got = false;
  api_->Get(kCms + "/later", [&](ApiResult r) {
    EXPECT_TRUE(r.ok()) << (r.error ? r.error->ToString() : "");
    got = true;
  });
  ASSERT_TRUE(runner_.RunUntil([&] { return got; }));

  // No more than a reconnect: never refused, never listed again.
  for (const auto& r : NodeRequests()) EXPECT_NE(r.value("code", 0), 401) << r.dump();
  EXPECT_EQ(reflector_->stats().lists, lists);
  const auto requests = NodeRequests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.back().value("cert_serial", ""), second);
}

TEST_F(ClientCertRotationTest, ABadNewPairIsIgnoredAndTheOldOneKeptWithOneWarning) {
  vmtest::LogCapture log;
  StartReflector();
  // A file that is not a certificate and key (the kubelet would never write it; a half-written
  // copy by hand might): the pair in use stays, the watch stays.
  std::ofstream(pki_ + "/kubelet-client-bad.pem")
      << "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
      << "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n";
  Point("kubelet-client-bad.pem");
  ASSERT_TRUE(runner_.RunUntil(
      [&] { return log.text().find("keeping the certificate in use") != std::string::npos; }));
  const int watches = reflector_->stats().watches;
  ASSERT_EQ(server_.Api("POST", kCms, ConfigMap("still")).code, 201);
  ASSERT_TRUE(runner_.RunUntil([&] { return Has("still"); }));
  EXPECT_EQ(reflector_->stats().watches, watches);  // the watch was not cut
  for (const auto& r : NodeRequests()) EXPECT_EQ(r.value("cert_serial", ""), first_serial_);
  const std::string text = log.text();
  EXPECT_THAT(text, HasSubstr(pki_ + "/kubelet-client-current.pem"));
  EXPECT_THAT(text, Not(HasSubstr("bm90")));
  size_t warnings = 0;
  for (size_t at = 0; (at = text.find("keeping the certificate", at)) != std::string::npos; ++at) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u);
}

// A bound service-account token is rotated well before the old one stops working: the client must
// read the file again on its own (client-go: every minute), not wait for a 401.
TEST(TokenFileRotationTest, ARotatedTokenFileIsReadBeforeTheOldTokenIsRevoked) {
  TestApiServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  auto loaded = LoadKubeconfig({server.kubeconfig()});
  ASSERT_TRUE(loaded.ok());
  Credentials creds = *loaded;
  const std::string token_file = server.dir() + "/token";
  std::ofstream(token_file) << server.token() << "\n";
  creds.token.clear();
  creds.token_file = token_file;
  TestLoop runner;
  HttpClientOptions options;
  options.token_refresh = std::chrono::milliseconds(100);
  auto http = HttpClient::Create(runner.get(), creds, options);
  ASSERT_TRUE(http.ok());
  auto get = [&] {
    std::optional<long> status;
    HttpRequest request;
    request.path = kCms;
    (*http)->Start(request, [&](base::Status s, HttpResponse r) {
      EXPECT_TRUE(s.ok()) << s.message();
      status = r.status;
    });
    EXPECT_TRUE(runner.RunUntil([&] { return status.has_value(); }));
    return status.value_or(0);
  };
  auto last_user = [&] {
    const auto reply = server.Admin("GET", "requests");
    std::string user;
    for (const auto& r : reply.body["requests"]) {
      if (r["path"] == kCms) user = r.value("user", "");
    }
    return user;
  };
  ASSERT_EQ(get(), 200);
  EXPECT_EQ(last_user(), "test-admin");
  // The new token works before the old one stops (kubelet: at 80 % of the old one's life).
  ASSERT_EQ(server.Admin("POST", "tokens", {{"token", "rotated-token"}, {"user", "rotated"}}).code,
            200);
  std::ofstream(token_file + ".new") << "rotated-token\n";
  std::filesystem::rename(token_file + ".new", token_file);
  bool switched = false;
  for (int attempt = 0; attempt < 400 && !switched; ++attempt) {
    ASSERT_EQ(get(), 200);
    switched = last_user() == "rotated";
    if (!switched) runner.RunFor(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(switched) << "the client never sent the rotated token";
  // The old token revoked: nothing of the client's is refused.
  server.RotateToken("admin-2");
  ASSERT_EQ(get(), 200);
  EXPECT_EQ(last_user(), "rotated");
  const auto reply = server.Admin("GET", "requests");
  for (const auto& r : reply.body["requests"]) EXPECT_NE(r.value("code", 0), 401) << r.dump();
}

// A CA bundle replaced in place (a cluster's CA rotation, or a ca.crt projected anew): new
// connections verify against the file's new content: the refused handshake is the HTTP/2
// transport's, the trusted connection then libcurl's (this server speaks HTTP/1.1).
TEST(CaFileRotationTest, NewConnectionsVerifyAgainstTheChangedCaFile) {
  TestApiServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  TestApiServerProcess other;  // a CA of its own, that did not sign `server`'s certificate
  ASSERT_TRUE(other.Start().ok());
  auto loaded = LoadKubeconfig({server.kubeconfig()});
  ASSERT_TRUE(loaded.ok());
  Credentials creds = *loaded;
  const std::string ca_file = server.dir() + "/ca-bundle.crt";
  auto write_ca = [&](const std::string& from) {
    std::ifstream in(from);
    std::stringstream text;
    text << in.rdbuf();
    std::ofstream(ca_file + ".new") << text.str();
    std::filesystem::rename(ca_file + ".new", ca_file);
  };
  write_ca(other.ca_file());
  creds.tls.ca_file = ca_file;
  creds.tls.ca_pem.clear();
  {
    std::ifstream in(ca_file);
    std::stringstream text;
    text << in.rdbuf();
    creds.tls.ca_pem = text.str();
  }
  TestLoop runner;
  HttpClientOptions options;
  options.native_http2 = true;
  options.ca_check_interval = std::chrono::milliseconds(50);
  auto http = HttpClient::Create(runner.get(), creds, options);
  ASSERT_TRUE(http.ok());
  auto get = [&] {
    std::optional<base::Status> result;
    HttpRequest request;
    request.path = kCms;
    (*http)->Start(request, [&](base::Status s, HttpResponse) { result = s; });
    EXPECT_TRUE(runner.RunUntil([&] { return result.has_value(); }));
    return result.value_or(base::Status::Error("no answer"));
  };
  base::Status refused = get();
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("not trusted"));
  write_ca(server.ca_file());
  bool trusted = false;
  for (int attempt = 0; attempt < 400 && !trusted; ++attempt) {
    trusted = get().ok();
    if (!trusted) runner.RunFor(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(trusted) << "the changed CA file was never used";
}

// An exec credential plugin (a kubeconfig as EKS and GKE write them) against the server: its
// token is used until the server refuses it (401), then the plugin runs again; a plugin giving a
// client certificate authenticates with it.
class ExecPluginTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start().ok()); }
  void TearDown() override {
    api_.reset();
    http_.reset();
  }
  // A Python plugin printing an ExecCredential whose status is `status_code` (Python evaluating
  // to a dict); each run appends a line to runs.
  void Connect(const std::string& status_code, RetryPolicy policy = {}) {
    const std::string plugin = server_.dir() + "/plugin.py";
    std::ofstream(plugin) << "#!/usr/bin/python3\nimport json, os\n"
                          << "open(" << nlohmann::json(server_.dir() + "/runs").dump()
                          << ", 'a').write('run\\n')\n"
                          << "d = " << nlohmann::json(server_.dir()).dump() << "\n"
                          << "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
                             "'kind': 'ExecCredential', 'status': "
                          << status_code << "}))\n";
    std::filesystem::permissions(plugin, std::filesystem::perms::owner_all);
    const std::string kubeconfig = server_.dir() + "/exec.conf";
    std::ofstream(kubeconfig)
        << "apiVersion: v1\nkind: Config\ncurrent-context: eks\n"
        << "clusters:\n- name: c\n  cluster:\n    server: " << server_.url()
        << "\n    certificate-authority: " << server_.ca_file() << "\n"
        << "users:\n- name: eks-user\n  user:\n    exec:\n"
        << "      apiVersion: client.authentication.k8s.io/v1\n"
        << "      command: " << plugin << "\n"
        << "      interactiveMode: Never\n      provideClusterInfo: true\n"
        << "contexts:\n- name: eks\n  context: {cluster: c, user: eks-user}\n";
    auto creds = LoadKubeconfig({kubeconfig});
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    HttpClientOptions options;
    options.native_http2 = true;
    auto http = HttpClient::Create(runner_.get(), *creds, options);
    ASSERT_TRUE(http.ok()) << http.status().message();
    http_ = std::move(*http);
    api_ = std::make_unique<ApiClient>(http_.get(), policy);
  }
  ApiResult Get() {
    std::optional<ApiResult> result;
    api_->Get(kCms, [&](ApiResult r) { result = std::move(r); });
    EXPECT_TRUE(runner_.RunUntil([&] { return result.has_value(); }));
    return result.value_or(ApiResult{});
  }
  int Runs() {
    std::ifstream in(server_.dir() + "/runs");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  }
  std::string LastUser() {
    const auto reply = server_.Admin("GET", "requests");
    std::string user;
    for (const auto& r : reply.body["requests"]) {
      if (r["path"] == kCms) user = r.value("user", "");
    }
    return user;
  }

  TestApiServerProcess server_;
  TestLoop runner_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<ApiClient> api_;
};

TEST_F(ExecPluginTest, ItsTokenIsUsedAndA401RunsItAgain) {
  std::ofstream(server_.dir() + "/token") << server_.token();
  Connect("{'token': open(os.path.join(d, 'token')).read().strip()}");
  // Requests started together wait for one run.
  int answered = 0;
  for (int i = 0; i < 3; ++i) {
    api_->Get(kCms, [&](ApiResult r) {
      EXPECT_TRUE(r.ok()) << (r.error ? r.error->ToString() : "");
      ++answered;
    });
  }
  ASSERT_TRUE(runner_.RunUntil([&] { return answered == 3; }));
  EXPECT_EQ(Runs(), 1);
  EXPECT_EQ(LastUser(), "test-admin");
  ASSERT_TRUE(Get().ok());
  EXPECT_EQ(Runs(), 1);  // cached (no expirationTimestamp)

  // The server stops accepting the token; the plugin would now give the new one.
  server_.RotateToken("rotated-by-the-cloud");
  std::ofstream(server_.dir() + "/token") << "rotated-by-the-cloud";
  ApiResult refused = Get();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.error->IsUnauthorized());
  ASSERT_TRUE(Get().ok());
  EXPECT_EQ(Runs(), 2);
}

TEST_F(ExecPluginTest, ItsClientCertificateAuthenticates) {
  ASSERT_EQ(server_
                .Admin("POST", "issue-client-cert",
                       {{"path", server_.dir() + "/exec-client.pem"}, {"user", "exec-user"}})
                .code,
            200);
  // The file holds certificate then key.
  Connect(
      "(lambda t: {'clientCertificateData': t[:t.index('-----BEGIN PRIVATE')], "
      "'clientKeyData': t[t.index('-----BEGIN PRIVATE'):]})(open(os.path.join(d, "
      "'exec-client.pem')).read())");
  ApiResult r = Get();
  ASSERT_TRUE(r.ok()) << (r.error ? r.error->ToString() : "");
  EXPECT_EQ(LastUser(), "exec-user");
  EXPECT_EQ(Runs(), 1);
}

TEST_F(ExecPluginTest, AFailingPluginFailsTheRequestsNamingItNeverItsOutput) {
  vmtest::LogCapture log;
  RetryPolicy no_retries;
  no_retries.max_transient_retries = 0;  // each retry would run the plugin again
  Connect("(print('SECRET-TOKEN-ON-STDOUT', end=''), exit(4))", no_retries);
  ApiResult r = Get();
  ASSERT_FALSE(r.ok());
  const std::string text = r.error->ToString();
  EXPECT_THAT(text, HasSubstr("kubeconfig user \"eks-user\": exec plugin"));
  EXPECT_THAT(text, HasSubstr("exited with status 4"));
  EXPECT_THAT(text + log.text(), Not(HasSubstr("SECRET")));
}

}  // namespace
}  // namespace kubeclient
