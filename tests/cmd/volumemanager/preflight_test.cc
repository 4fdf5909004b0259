// Preflight against kube-test-apiserver: each check passes, fails with the missing RBAC rule on a
// 403, or stops early when the server or the credentials are not usable; and the binary's exit
// code.
#include "cmd/volumemanager/preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "tests/apiserver/test_apiserver_process.h"

namespace kube {
namespace {

using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;

class PreflightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto creds = LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok());
    creds_ = *creds;
  }
  std::vector<PreflightCheck> Run(const Credentials& creds) {
    PreflightOptions options;
    options.node_name = "node-1";
    options.namespace_name = "vm-system";
    options.request_timeout = std::chrono::seconds(5);
    return RunPreflight(creds, options);
  }
  TestApiServerProcess server_;
  Credentials creds_;
};

TEST_F(PreflightTest, AllChecksPassWithFullAccessAndLeaveNoLease) {
  auto checks = Run(creds_);
  ASSERT_EQ(checks.size(), 7u);
  for (const auto& c : checks) EXPECT_TRUE(c.ok) << FormatPreflightCheck(c);
  EXPECT_EQ(server_
                .Api("GET",
                     "/apis/coordination.k8s.io/v1/namespaces/vm-system/leases/"
                     "volumemanager-preflight-node-1")
                .code,
            404);
}

TEST_F(PreflightTest, ForbiddenChecksNameTheMissingRule) {
  server_.Admin("POST", "tokens", {{"token", "limited"}, {"user", "system:serviceaccount:vm:vm"}});
  server_.Admin("POST", "acl",
                {{"user", "system:serviceaccount:vm:vm"},
                 {"rules",
                  {{{"verbs", {"get", "list"}}, {"resources", {"pods"}}},
                   {{"verbs", {"get", "list", "watch"}}, {"resources", {"configmaps"}}},
                   {{"verbs", {"get", "list", "watch"}},
                    {"resources", {"secrets"}},
                    {"namespaces", {"other"}}},
                   {{"verbs", {"get", "create"}}, {"resources", {"leases"}}}}}});
  Credentials creds = creds_;
  creds.token = "limited";
  auto checks = Run(creds);
  ASSERT_EQ(checks.size(), 7u);
  std::map<std::string, PreflightCheck> by_name;
  for (const auto& c : checks) by_name[c.name] = c;
  EXPECT_TRUE(by_name["pods on node node-1 listable"].ok);
  EXPECT_FALSE(by_name["pods on node node-1 watchable"].ok);
  EXPECT_THAT(by_name["pods on node node-1 watchable"].detail,
              HasSubstr("missing RBAC rule: apiGroups [\"\"], resources [\"pods\"], verbs "
                        "[\"watch\"] (cluster-wide)"));
  EXPECT_TRUE(by_name["configmaps readable in namespace vm-system"].ok);
  EXPECT_FALSE(by_name["secrets readable in namespace vm-system"].ok);
  EXPECT_THAT(by_name["secrets readable in namespace vm-system"].detail,
              HasSubstr("verbs [\"list\"] in namespace \"vm-system\""));
  EXPECT_FALSE(by_name["leases writable in namespace vm-system"].ok);
  EXPECT_THAT(by_name["leases writable in namespace vm-system"].detail,
              HasSubstr("apiGroups [\"coordination.k8s.io\"], resources [\"leases\"], verbs "
                        "[\"update\"]"));
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
    Credentials creds = creds_;
    c.change(creds);
    auto checks = Run(creds);
    ASSERT_EQ(checks.size(), c.checks);
    EXPECT_FALSE(checks.back().ok);
    EXPECT_THAT(checks.back().detail, HasSubstr(c.detail));
  }
}

TEST_F(PreflightTest, BinaryExitCode) {
  for (auto [extra, want] :
       {std::pair{std::string(""), 0}, std::pair{std::string(" --context no-such-context"), 1}}) {
    std::string cmd = std::string(VM_PREFLIGHT_BINARY) + " --kubeconfig " + server_.kubeconfig() +
                      " --node-name node-1" + extra + " 2>&1";
    FILE* out = popen(cmd.c_str(), "r");
    ASSERT_NE(out, nullptr);
    std::string text;
    char buf[512];
    while (fgets(buf, sizeof(buf), out) != nullptr) text += buf;
    int status = pclose(out);
    EXPECT_EQ(WEXITSTATUS(status), want) << text;
    EXPECT_THAT(text, HasSubstr(want == 0 ? "ok    leases writable" : "FAIL  credentials"));
  }
}

}  // namespace
}  // namespace kube
