// Preflight against kube-test-apiserver: with exactly the rights each of the chart's modes grants
// it passes, and with one right less it fails naming that right; the identity and its mode; it
// stops early when the server or the credentials are not usable; and the binary's exit code and
// --help.
//
// The chart's modes: serviceAccount = the ClusterRole of helm/volumemanager/templates/
// clusterrole.yaml (pods and configmaps get/list/watch, secrets get/list/watch, events
// create/patch) plus, with the Lease lock, role-leases.yaml's Role in the release namespace
// (leases get/create/update); node = the kubelet's credentials, which the test server's Node
// authorizer limits as kube-apiserver's does.
#include "cmd/volumemanager/preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "tests/apiserver/test_apiserver_process.h"

namespace kube {
namespace {

using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;

constexpr char kNode[] = "node-1";
constexpr char kReleaseNamespace[] = "vm-system";
constexpr char kServiceAccount[] = "system:serviceaccount:vm-system:volumemanager";

// One right: resource, verb, and the namespace of a Role ("" for the ClusterRole).
using Right = std::tuple<std::string, std::string, std::string>;

std::vector<Right> ChartServiceAccountRights(bool lease_lock) {
  std::vector<Right> rights;
  for (const char* r : {"pods", "configmaps", "secrets"}) {
    for (const char* v : {"get", "list", "watch"}) rights.emplace_back(r, v, "");
  }
  rights.emplace_back("events", "create", "");
  rights.emplace_back("events", "patch", "");
  if (lease_lock) {
    for (const char* v : {"get", "create", "update"}) {
      rights.emplace_back("leases", v, kReleaseNamespace);
    }
  }
  return rights;
}

nlohmann::json AclRules(const std::vector<Right>& rights) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& [resource, verb, ns] : rights) {
    nlohmann::json rule = {{"verbs", {verb}}, {"resources", {resource}}};
    if (!ns.empty()) rule["namespaces"] = {ns};
    rules.push_back(rule);
  }
  return rules;
}

nlohmann::json Pod(const std::string& name, const std::string& ns, const std::string& node,
                   nlohmann::json volumes) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"nodeName", node},
            {"containers", {{{"name", "c"}, {"image", "busybox"}}}},
            {"volumes", volumes}}}};
}

class PreflightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start("test-token", {"--client-cert-user", "system:node:node-1"}).ok());
    auto creds = LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok());
    creds_ = *creds;
    // node-1's pods read secret shop/tls, configmap shop/web and (projected) configmap ops/job;
    // a pod of node-2 reads secret other/theirs.
    ASSERT_EQ(server_
                  .Api("POST", "/api/v1/namespaces/shop/pods",
                       Pod("web", "shop", kNode,
                           {{{"name", "tls"}, {"secret", {{"secretName", "tls"}}}},
                            {{"name", "cfg"}, {"configMap", {{"name", "web"}}}}}))
                  .code,
              201);
    ASSERT_EQ(server_
                  .Api("POST", "/api/v1/namespaces/ops/pods",
                       Pod("job", "ops", kNode,
                           {{{"name", "all"},
                             {"projected", {{"sources", {{{"configMap", {{"name", "job"}}}}}}}}}}))
                  .code,
              201);
    ASSERT_EQ(server_
                  .Api("POST", "/api/v1/namespaces/other/pods",
                       Pod("x", "other", "node-2",
                           {{{"name", "s"}, {"secret", {{"secretName", "theirs"}}}}}))
                  .code,
              201);
    server_.Admin("POST", "tokens", {{"token", "sa"}, {"user", kServiceAccount}});
    server_.Admin(
        "POST", "tokens",
        {{"token", "node"}, {"user", "system:node:node-1"}, {"groups", {"system:nodes"}}});
  }

  std::vector<PreflightCheck> Run(const Credentials& creds, bool lease_lock,
                                  const std::string& node = kNode) {
    PreflightOptions options;
    options.node_name = node;
    options.namespace_name = kReleaseNamespace;
    options.lease_lock = lease_lock;
    options.request_timeout = std::chrono::seconds(5);
    return RunPreflight(creds, options);
  }

  Credentials WithToken(const std::string& token) const {
    Credentials creds = creds_;
    creds.token = token;
    creds.tls.client_cert_pem.clear();
    creds.tls.client_key_pem.clear();
    return creds;
  }

  // The kubeconfig's context test-cert: the client certificate, CN system:node:node-1.
  Credentials WithClientCertificate() const {
    auto creds = LoadKubeconfig({server_.kubeconfig()}, "test-cert");
    EXPECT_TRUE(creds.ok());
    return creds.ok() ? *creds : Credentials{};
  }

  static std::string Failures(const std::vector<PreflightCheck>& checks) {
    std::string out;
    for (const auto& c : checks) {
      if (!c.ok) out += FormatPreflightCheck(c) + "\n";
    }
    return out;
  }

  static std::vector<std::string> Names(const std::vector<PreflightCheck>& checks) {
    std::vector<std::string> names;
    for (const auto& c : checks) names.push_back(c.name);
    return names;
  }

  TestApiServerProcess server_;
  Credentials creds_;
};

TEST_F(PreflightTest, ServiceAccountModePassesWithTheChartsRightsInEveryNamespaceOfThePods) {
  for (bool lease_lock : {false, true}) {
    SCOPED_TRACE(lease_lock ? "lease lock" : "file lock");
    server_.Admin(
        "POST", "acl",
        {{"user", kServiceAccount}, {"rules", AclRules(ChartServiceAccountRights(lease_lock))}});
    auto checks = Run(WithToken("sa"), lease_lock);
    EXPECT_EQ(Failures(checks), "");
    std::vector<std::string> want = {"server reachable, TLS verified",
                                     "credentials accepted",
                                     "identity",
                                     "pods on node node-1 listable",
                                     "pods on node node-1 watchable",
                                     "configmaps readable in namespace ops",
                                     "events writable in namespace ops",
                                     "configmaps readable in namespace shop",
                                     "secrets readable in namespace shop",
                                     "events writable in namespace shop"};
    if (lease_lock) want.push_back("leases writable in namespace vm-system");
    EXPECT_EQ(Names(checks), want);
    EXPECT_EQ(checks[2].detail, std::string(kServiceAccount) +
                                    " (groups system:authenticated; from SelfSubjectReview): "
                                    "service-account mode");
  }
  // The probe Lease is gone again, and the Events were dry runs.
  EXPECT_EQ(server_
                .Api("GET",
                     "/apis/coordination.k8s.io/v1/namespaces/vm-system/leases/"
                     "volumemanager-preflight-node-1")
                .code,
            404);
  EXPECT_TRUE(server_.Api("GET", "/api/v1/events").body["items"].empty());
}

TEST_F(PreflightTest, ServiceAccountModeWithOneRightLessFailsNamingIt) {
  for (bool lease_lock : {false, true}) {
    const std::vector<Right> chart = ChartServiceAccountRights(lease_lock);
    for (size_t i = 0; i < chart.size(); ++i) {
      const auto& [resource, verb, ns] = chart[i];
      if (resource == "leases" && !lease_lock) continue;
      std::vector<Right> less = chart;
      less.erase(less.begin() + static_cast<std::ptrdiff_t>(i));
      SCOPED_TRACE(std::string(lease_lock ? "lease lock" : "file lock") + ", without " + resource +
                   " " + verb);
      server_.Admin("POST", "acl", {{"user", kServiceAccount}, {"rules", AclRules(less)}});
      const std::string failures = Failures(Run(WithToken("sa"), lease_lock));
      if (resource == "pods" && verb == "get") {
        // Granted by the chart but never used: the daemon lists and watches pods.
        EXPECT_EQ(failures, "");
        continue;
      }
      EXPECT_THAT(failures,
                  HasSubstr("missing RBAC rule: apiGroups [\"" +
                            std::string(resource == "leases" ? "coordination.k8s.io" : "") +
                            "\"], resources [\"" + resource + "\"], verbs [\"" + verb + "\"]"));
    }
  }
}

TEST_F(PreflightTest, NodeModePassesWithTheNodeAuthorizersGrant) {
  for (const auto& [name, creds] :
       {std::pair{"token", WithToken("node")}, std::pair{"certificate", WithClientCertificate()}}) {
    SCOPED_TRACE(name);
    auto checks = Run(creds, false);
    EXPECT_EQ(Failures(checks), "");
    ASSERT_EQ(Names(checks).size(), 10u);
    EXPECT_THAT(checks[2].detail, HasSubstr("system:node:node-1 (groups system:nodes"));
    EXPECT_THAT(checks[2].detail, HasSubstr("node mode for node \"node-1\""));
  }
}

TEST_F(PreflightTest, NodeModeFailsWhatANodeMayNotDo) {
  // The Lease lock.
  auto checks = Run(WithToken("node"), true);
  EXPECT_THAT(Failures(checks),
              HasSubstr("FAIL  leases writable in namespace vm-system: the Lease lock is refused "
                        "under a node identity"));
  // Another node's name.
  checks = Run(WithClientCertificate(), false, "node-2");
  EXPECT_THAT(Failures(checks), HasSubstr("FAIL  identity: system:node:node-1"));
  EXPECT_THAT(Failures(checks), HasSubstr("but --node-name is \"node-2\""));
  // The grant follows the pods: with web deleted, shop is no namespace of the node's pods any
  // more, and nothing there is checked (nor readable).
  ASSERT_EQ(server_.Api("DELETE", "/api/v1/namespaces/shop/pods/web?gracePeriodSeconds=0").code,
            200);
  checks = Run(WithToken("node"), false);
  EXPECT_EQ(Failures(checks), "");
  for (const auto& c : checks) EXPECT_THAT(c.name, ::testing::Not(HasSubstr("shop")));
}

TEST_F(PreflightTest, NodeModeReadFailureQuotesTheNodeAuthorizer) {
  // A 403 as the Node authorizer answers while its graph lags a binding (a fault: the test
  // server's graph never lags).
  server_.Admin("POST", "faults",
                {{"verb", "get"},
                 {"resource", "secrets"},
                 {"status", 403},
                 {"times", -1},
                 {"message",
                  "secrets \"tls\" is forbidden: User \"system:node:node-1\" cannot get "
                  "resource \"secrets\" in API group \"\" in the namespace \"shop\": no "
                  "relationship found between node 'node-1' and this object"},
                 {"reason", "Forbidden"}});
  auto checks = Run(WithToken("node"), false);
  EXPECT_THAT(Failures(checks),
              HasSubstr("FAIL  secrets readable in namespace shop: the node may not get secrets in "
                        "namespace \"shop\" (secrets \"tls\" is forbidden"));
}

TEST_F(PreflightTest, StopsEarly) {
  struct Case {
    std::string name;
    std::function<void(Credentials&)> change;
    size_t checks;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {"rejected token", [](Credentials& c) { c.token = "wrong"; }, 2, "credentials rejected"},
      {"unverifiable server",
       [](Credentials& c) {
         c.tls.ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
       },
       1, ""},
      {"nothing listening", [](Credentials& c) { c.server = "https://127.0.0.1:1"; }, 1, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Credentials creds = WithToken("test-token");
    c.change(creds);
    auto checks = Run(creds, false);
    ASSERT_EQ(checks.size(), c.checks);
    EXPECT_FALSE(checks.back().ok);
    EXPECT_THAT(checks.back().detail, HasSubstr(c.detail));
  }
}

std::string RunBinary(const std::string& args, int* exit_code) {
  std::string cmd = std::string(VM_PREFLIGHT_BINARY) + args + " 2>&1";
  FILE* out = popen(cmd.c_str(), "r");
  if (out == nullptr) return "popen failed";
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  *exit_code = WEXITSTATUS(pclose(out));
  return text;
}

TEST_F(PreflightTest, BinaryExitCodeNodeNameDefaultAndHelp) {
  const std::string kubeconfig = " --kubeconfig " + server_.kubeconfig();
  int code = -1;
  std::string text = RunBinary(kubeconfig + " --node-name node-1", &code);
  EXPECT_EQ(code, 0) << text;
  EXPECT_THAT(text, HasSubstr("ok    events writable in namespace shop"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("leases")));
  text = RunBinary(kubeconfig + " --node-name node-1 --leader-elect-resource-lock leases", &code);
  EXPECT_EQ(code, 0) << text;
  EXPECT_THAT(text, HasSubstr("ok    leases writable in namespace default"));
  text = RunBinary(kubeconfig + " --node-name node-1 --context no-such-context", &code);
  EXPECT_EQ(code, 1) << text;
  EXPECT_THAT(text, HasSubstr("FAIL  credentials"));
  // --node-name defaults as the daemon's: $NODE_NAME (lowercased), else the host name.
  text = RunBinary(" --kubeconfig " + server_.kubeconfig(), &code);
  EXPECT_THAT(text, ::testing::ContainsRegex("pods on node [^ ]+ listable"));
  const std::string with_env = "NODE_NAME=Node-1 " + std::string(VM_PREFLIGHT_BINARY) + kubeconfig;
  FILE* out = popen((with_env + " 2>&1").c_str(), "r");
  ASSERT_NE(out, nullptr);
  text.clear();
  char buf[512];
  while (fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(out)), 0) << text;
  EXPECT_THAT(text, HasSubstr("ok    pods on node node-1 listable"));
  text = RunBinary(" --leader-elect-resource-lock etcd", &code);
  EXPECT_EQ(code, 2) << text;
  text = RunBinary(" --help", &code);
  EXPECT_EQ(code, 0);
  EXPECT_THAT(text, HasSubstr("--leader-elect-resource-lock"));
  // The daemon's own --help lists the subcommand.
  std::string daemon = VM_PREFLIGHT_BINARY;
  daemon.resize(daemon.size() - std::string(" preflight").size());
  out = popen((daemon + " --help 2>&1").c_str(), "r");
  ASSERT_NE(out, nullptr);
  text.clear();
  while (fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(out)), 0);
  EXPECT_THAT(text, HasSubstr("Subcommand:\n  volumemanager preflight --kubeconfig PATH"));
  EXPECT_THAT(text, HasSubstr("checks what cluster mode needs from the API server"));
}

}  // namespace
}  // namespace kube
