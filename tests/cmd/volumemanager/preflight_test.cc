// Preflight against kube-test-apiserver: with exactly the rights each of the chart's modes grants
// it passes, and with one right less it fails naming that right; the identity and its mode; it
// stops early when the server or the credentials are not usable; and the binary's exit code and
// --help.
//
// The chart's modes: serviceAccount = the ClusterRole of helm/volumemanager/templates/
// clusterrole.yaml (pods and configmaps get/list/watch, secrets get/list/watch, events
// create/patch, nodes get) plus, with the Lease lock, role-leases.yaml's Role in the release
// namespace (leases get/create/update); node = the kubelet's credentials, which the test server's
// Node authorizer limits as kube-apiserver's does.
#include "cmd/volumemanager/preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "cmd/volumemanager/api_identity.h"
#include "cmd/volumemanager/blocking_api_client.h"
#include "config/config_file.h"
#include "tests/apiserver/test_apiserver_process.h"

namespace volumemanager {
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
  rights.emplace_back("nodes", "get", "");
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
    auto creds = kubeclient::LoadKubeconfig({server_.kubeconfig()});
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
    // node-1 is registered (node-2 is not: its pod above is bound to a name only).
    ASSERT_EQ(server_
                  .Api("POST", "/api/v1/nodes",
                       {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}})
                  .code,
              201);
    server_.Admin("POST", "tokens", {{"token", "sa"}, {"user", kServiceAccount}});
    server_.Admin(
        "POST", "tokens",
        {{"token", "node"}, {"user", "system:node:node-1"}, {"groups", {"system:nodes"}}});
  }

  std::vector<PreflightCheck> Run(const kubeclient::Credentials& creds, bool lease_lock,
                                  const std::string& node = kNode) {
    return RunReport(creds, lease_lock, node).checks;
  }

  PreflightReport RunReport(const kubeclient::Credentials& creds, bool lease_lock,
                            const std::string& node = kNode, const cache::ReadPolicy& policy = {}) {
    PreflightOptions options;
    options.read_policy = policy;
    options.node_name = node;
    options.namespace_name = kReleaseNamespace;
    options.lease_lock = lease_lock;
    options.request_timeout = std::chrono::seconds(5);
    return RunPreflight(creds, options);
  }

  void GrantChartRights(bool lease_lock) {
    server_.Admin(
        "POST", "acl",
        {{"user", kServiceAccount}, {"rules", AclRules(ChartServiceAccountRights(lease_lock))}});
  }

  static const PreflightCheck& Named(const std::vector<PreflightCheck>& checks,
                                     const std::string& name) {
    static const PreflightCheck kNone{"(no such check)", false, ""};
    for (const auto& c : checks) {
      if (c.name == name) return c;
    }
    return kNone;
  }

  kubeclient::Credentials WithToken(const std::string& token) const {
    kubeclient::Credentials creds = creds_;
    creds.token = token;
    creds.tls.client_cert_pem.clear();
    creds.tls.client_key_pem.clear();
    return creds;
  }

  // The kubeconfig's context test-cert: the client certificate, CN system:node:node-1.
  kubeclient::Credentials WithClientCertificate() const {
    auto creds = kubeclient::LoadKubeconfig({server_.kubeconfig()}, "test-cert");
    EXPECT_TRUE(creds.ok());
    return creds.ok() ? *creds : kubeclient::Credentials{};
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
  kubeclient::Credentials creds_;
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
                                     "node node-1 exists",
                                     "pods on node node-1 listable",
                                     "pods on node node-1 watchable",
                                     "configmaps readable in namespace ops",
                                     "events writable in namespace ops",
                                     "configmaps readable in namespace shop",
                                     "secrets readable in namespace shop",
                                     "events writable in namespace shop"};
    if (lease_lock) want.push_back("leases writable in namespace vm-system");
    want.push_back("rights beyond need");
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
      if (resource == "nodes") {
        // Not a failure: the node's existence cannot be checked (exit status 3).
        EXPECT_THAT(failures, ::testing::StartsWith("SKIP  node node-1 exists: not checked: no "
                                                    "right to get nodes (nodes \"node-1\" is "
                                                    "forbidden"));
        EXPECT_THAT(failures, HasSubstr("the chart's ClusterRole grants get on nodes"));
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
    ASSERT_EQ(Names(checks).size(), 12u);
    EXPECT_EQ(FormatPreflightCheck(Named(checks, "node node-1 exists")),
              "ok    node node-1 exists: found");
    // A node may create pods (its mirror pods), but neither everything nor every Secret.
    EXPECT_EQ(FormatPreflightCheck(Named(checks, "rights beyond need")),
              "ok    rights beyond need: none of: do anything to any resource (* on *); "
              "list secrets in all namespaces");
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

// LookUpIdentity marks "the review is not served and there is no certificate to read" with its
// code (kUnimplemented), which IsReviewNotServed reads (the daemon logs that case at info, any
// other failure at warning); another failure keeps no such code.
TEST_F(PreflightTest, AReviewNotServedWithoutACertificateIsMarkedByItsCode) {
  const kubeclient::Credentials token = WithToken("sa");
  server_.Admin("POST", "faults",
                {{"resource", "selfsubjectreviews"}, {"status", 500}, {"times", 1}});
  {
    BlockingApiClient client(token, std::chrono::seconds(5));
    auto identity = LookUpIdentity(client, token);
    ASSERT_FALSE(identity.ok());
    EXPECT_FALSE(IsReviewNotServed(identity.status())) << identity.status().message();
  }
  for (int status : {404, 403}) {
    SCOPED_TRACE(status);
    server_.Admin("POST", "faults",
                  {{"resource", "selfsubjectreviews"}, {"status", status}, {"times", 1}});
    BlockingApiClient client(token, std::chrono::seconds(5));
    auto identity = LookUpIdentity(client, token);
    ASSERT_FALSE(identity.ok());
    EXPECT_THAT(identity.status().message(),
                HasSubstr("the server does not serve SelfSubjectReview"));
    EXPECT_EQ(identity.status().code(), base::StatusCode::kUnimplemented);
    EXPECT_TRUE(IsReviewNotServed(identity.status()));
  }
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

TEST_F(PreflightTest, ANodeThatDoesNotExistFails) {
  GrantChartRights(false);
  for (const auto& [name, creds] :
       {std::pair{"service account", WithToken("sa")}, std::pair{"admin", creds_}}) {
    SCOPED_TRACE(name);
    auto checks = Run(creds, false, "node-1x");
    EXPECT_EQ(FormatPreflightCheck(Named(checks, "node node-1x exists")),
              "FAIL  node node-1x exists: node \"node-1x\" does not exist: no pod is ever bound "
              "to it, so the daemon serves nothing; --node-name (else $NODE_NAME, else the host "
              "name) must be the name the kubelet registered (kubectl get nodes)");
    EXPECT_EQ(PreflightExitCode(checks), 1);
  }
  EXPECT_EQ(PreflightExitCode(Run(WithToken("sa"), false)), 0);
}

TEST_F(PreflightTest, WithoutTheRightToGetNodesTheNodeIsNotCheckedExitStatus3) {
  std::vector<Right> rights = ChartServiceAccountRights(false);
  std::erase(rights, Right{"nodes", "get", ""});
  server_.Admin("POST", "acl", {{"user", kServiceAccount}, {"rules", AclRules(rights)}});
  // A typo cannot be told: not a pass, not a failure.
  auto checks = Run(WithToken("sa"), false, "node-1x");
  const PreflightCheck& node = Named(checks, "node node-1x exists");
  EXPECT_TRUE(node.not_checked);
  EXPECT_THAT(FormatPreflightCheck(node),
              ::testing::StartsWith("SKIP  node node-1x exists: not checked: no right to get "
                                    "nodes ("));
  EXPECT_EQ(PreflightExitCode(checks), 3);
}

TEST_F(PreflightTest, RightsNoModeNeedsAreAWarning) {
  // The test server's own token has no ACL: everything is allowed, as to an admin.
  PreflightReport admin = RunReport(creds_, false);
  const PreflightCheck& excess = Named(admin.checks, "rights beyond need");
  EXPECT_TRUE(excess.ok);
  EXPECT_TRUE(excess.warning);
  EXPECT_EQ(FormatPreflightCheck(excess),
            "WARN  rights beyond need: test-admin may do anything to any resource (* on *); "
            "create pods: rights no mode of the daemon needs, on every node it runs on; give it "
            "the node's credentials (chart: credentials: node) or the chart's ClusterRole "
            "instead");
  EXPECT_EQ(PreflightExitCode(admin.checks), 0);
  // The chart's rights: none beyond need.
  GrantChartRights(false);
  auto chart = Run(WithToken("sa"), false);
  EXPECT_EQ(FormatPreflightCheck(Named(chart, "rights beyond need")),
            "ok    rights beyond need: none of: do anything to any resource (* on *); "
            "create pods");
  // A node with list on every Secret (an ACL beside the Node authorizer, as RBAC adds to it).
  server_.Admin(
      "POST", "acl",
      {{"user", "system:node:node-1"}, {"rules", AclRules({Right{"secrets", "list", ""}})}});
  EXPECT_THAT(FormatPreflightCheck(Named(Run(WithToken("node"), false), "rights beyond need")),
              ::testing::StartsWith("WARN  rights beyond need: system:node:node-1 may list "
                                    "secrets in all namespaces: rights no mode"));
}

TEST_F(PreflightTest, WhatTheDaemonIsConfiguredNotToReadNeedsNoRight) {
  // The chart with rbac.secrets: false: its ClusterRole without secrets, and --no-secrets.
  std::vector<Right> rights;
  for (const Right& right : ChartServiceAccountRights(false)) {
    if (std::get<0>(right) != "secrets") rights.push_back(right);
  }
  server_.Admin("POST", "acl", {{"user", kServiceAccount}, {"rules", AclRules(rights)}});
  // Without the flag the daemon would read secret shop/tls: a failure.
  EXPECT_THAT(Failures(Run(WithToken("sa"), false)),
              HasSubstr("FAIL  secrets readable in namespace shop"));
  cache::ReadPolicy no_secrets;
  no_secrets.secrets = false;
  auto checks = RunReport(WithToken("sa"), false, kNode, no_secrets).checks;
  EXPECT_EQ(Failures(checks), "");
  EXPECT_EQ(FormatPreflightCheck(Named(checks, "secrets readable in namespace shop")),
            "ok    secrets readable in namespace shop: not needed: secret shop/tls is not read: "
            "the daemon reads no Secrets (--no-secrets; chart: rbac.secrets: false); the kubelet "
            "keeps the volumes that read it");
  EXPECT_EQ(PreflightExitCode(checks), 0);
  // With --object-namespaces shop, configmap ops/job is not read either.
  cache::ReadPolicy shop_only;
  shop_only.namespaces = {"shop"};
  checks = RunReport(WithToken("sa"), false, kNode, shop_only).checks;
  EXPECT_THAT(FormatPreflightCheck(Named(checks, "configmaps readable in namespace ops")),
              ::testing::StartsWith("ok    configmaps readable in namespace ops: not needed: "
                                    "configmap ops/job is not read: the daemon reads ConfigMaps "
                                    "and Secrets only in the namespaces shop"));
  EXPECT_THAT(Failures(checks), HasSubstr("FAIL  secrets readable in namespace shop"));
}

TEST_F(PreflightTest, ListingEverySecretIsBeyondNeedForADaemonThatReadsFewer) {
  constexpr char kOther[] = "system:serviceaccount:vm-system:other";
  server_.Admin("POST", "tokens", {{"token", "other"}, {"user", kOther}});
  server_.Admin("POST", "acl",
                {{"user", kOther}, {"rules", AclRules(ChartServiceAccountRights(false))}});
  // The chart's full ClusterRole is what a daemon reading every Secret needs: no warning.
  EXPECT_EQ(FormatPreflightCheck(Named(Run(WithToken("other"), false), "rights beyond need")),
            "ok    rights beyond need: none of: do anything to any resource (* on *); "
            "create pods");
  // The same rights for a daemon told to read no Secrets, or only some namespaces': too many.
  for (bool secrets : {false, true}) {
    cache::ReadPolicy policy;
    policy.secrets = secrets;
    if (secrets) policy.namespaces = {"shop"};
    EXPECT_THAT(
        FormatPreflightCheck(Named(RunReport(WithToken("other"), false, kNode, policy).checks,
                                   "rights beyond need")),
        ::testing::StartsWith("WARN  rights beyond need: " + std::string(kOther) +
                              " may list secrets in all namespaces: rights no mode"));
  }
}

TEST_F(PreflightTest, TheReportNamesCredentialsAndIdentity) {
  PreflightReport report = RunReport(WithToken("node"), false);
  EXPECT_EQ(FormatPreflightHeader(report),
            "credentials kubeconfig " + server_.kubeconfig() +
                " context test, identity system:node:node-1 (groups system:nodes, "
                "system:authenticated; from SelfSubjectReview)");
  kubeclient::Credentials rejected = WithToken("wrong");
  EXPECT_EQ(RunReport(rejected, false).identity, "not checked (the credentials were rejected)");
}

TEST_F(PreflightTest, StopsEarly) {
  struct Case {
    std::string name;
    std::function<void(kubeclient::Credentials&)> change;
    size_t checks;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {"rejected token", [](kubeclient::Credentials& c) { c.token = "wrong"; }, 2,
       "credentials rejected"},
      {"unverifiable server",
       [](kubeclient::Credentials& c) {
         c.tls.ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
       },
       1, ""},
      {"nothing listening", [](kubeclient::Credentials& c) { c.server = "https://127.0.0.1:1"; }, 1,
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    kubeclient::Credentials creds = WithToken("test-token");
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
  // The daemon's flags: one preflight did not have, and a file that is no kubeconfig.
  text = RunBinary(kubeconfig + " --node-name node-1 --sync-frequency 30s", &code);
  EXPECT_EQ(code, 0) << text;
  text = RunBinary(" --kubeconfig /nonexistent --node-name node-1", &code);
  EXPECT_EQ(code, 1) << text;
  EXPECT_THAT(text, HasSubstr("FAIL  credentials: --kubeconfig /nonexistent: "));
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

std::string RunShell(const std::string& command, int* exit_code) {
  FILE* out = popen((command + " 2>&1").c_str(), "r");
  if (out == nullptr) return "popen failed";
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  *exit_code = WEXITSTATUS(pclose(out));
  return text;
}

TEST_F(PreflightTest, BinaryTakesTheDaemonsCredentialsNeverKubeconfigEnv) {
  int code = -1;
  // $KUBECONFIG names a working admin kubeconfig: it is not read, as the daemon does not.
  std::string text = RunShell("KUBECONFIG=" + server_.kubeconfig() + " HOME=/nonexistent " +
                                  VM_PREFLIGHT_BINARY + " --node-name node-1",
                              &code);
  EXPECT_EQ(code, 2) << text;
  EXPECT_EQ(text,
            "volumemanager preflight: no pod source: give --pod-manifest-path DIR and/or "
            "--manifest-url URL (standalone), or --kubeconfig FILE / --in-cluster (cluster mode); "
            "$KUBECONFIG (" +
                server_.kubeconfig() +
                ") is ignored, as by the daemon: pass the file the daemon will use with "
                "--kubeconfig (see --help)\n");
  // Standalone flags: no credentials for preflight to check.
  text = RunShell(
      "env -u KUBECONFIG " + std::string(VM_PREFLIGHT_BINARY) + " --pod-manifest-path /nonexistent",
      &code);
  EXPECT_EQ(code, 1) << text;
  EXPECT_EQ(text,
            "FAIL  credentials: no API server credentials: pass --kubeconfig FILE (e.g. the "
            "kubelet's) or --in-cluster (the pod's service account); $KUBECONFIG and "
            "~/.kube/config are never read\n");
  // The daemon's --config file: its kubeconfig and node name are what is checked; the first
  // line names both the file and the identity.
  const std::string config = server_.kubeconfig() + ".vmconfig.yaml";
  FILE* f = fopen(config.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "apiVersion: %s\nkind: %s\nkubeconfig: %s\nnodeName: node-1x\n",
          config::kConfigApiVersion, config::kConfigKind, server_.kubeconfig().c_str());
  fclose(f);
  text = RunShell(std::string(VM_PREFLIGHT_BINARY) + " --config " + config, &code);
  EXPECT_EQ(code, 1) << text;
  EXPECT_THAT(text, ::testing::StartsWith("credentials kubeconfig " + server_.kubeconfig() +
                                          " context test, identity test-admin (groups "
                                          "system:authenticated; from SelfSubjectReview)\n"));
  EXPECT_THAT(text, HasSubstr("\nFAIL  node node-1x exists: node \"node-1x\" does not exist"));
  // The flag overrides the file, as for the daemon.
  text = RunShell(std::string(VM_PREFLIGHT_BINARY) + " --config " + config + " --node-name node-1",
                  &code);
  EXPECT_EQ(code, 0) << text;
  EXPECT_THAT(text, HasSubstr("\nok    node node-1 exists: found\n"));
  EXPECT_THAT(text, HasSubstr("\nWARN  rights beyond need: test-admin may do anything"));
}

}  // namespace
}  // namespace volumemanager
