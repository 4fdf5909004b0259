#include "kubeclient/auth/credentials.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "kubeclient/auth/token_source.h"

namespace kubeclient {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/credentials_test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << content;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

EnvironmentLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// "PEM" stand-ins: the loader does not parse PEM, curl does.
constexpr char kCaPem[] = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
// base64 of kCaPem
constexpr char kCaB64[] =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";

std::string Kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& extra_context = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
         "contexts:\n- name: dev\n  context: {cluster: c1, user: u1, namespace: vm-system}\n" +
         extra_context + "clusters:\n- name: c1\n  cluster:\n" + cluster + "users:\n- name: u1\n" +
         "  user:\n" + user;
}

struct KubeconfigCase {
  std::string name;
  std::string cluster;
  std::string user;
  std::string error;  // substring of the error, empty for success
  std::function<void(const Credentials&)> check;
};

TEST(LoadKubeconfigTest, Table) {
  TempDir dir;
  dir.Write("pki/ca.crt", kCaPem);
  dir.Write("pki/client.crt", "CERT");
  dir.Write("pki/client.key", "KEY");
  const std::vector<KubeconfigCase> cases = {
      {"token and CA data",
       "    server: https://10.0.0.1:6443/\n    certificate-authority-data: " +
           std::string(kCaB64) + "\n",
       "    token: abc\n", "",
       [](const Credentials& c) {
         EXPECT_EQ(c.server, "https://10.0.0.1:6443");
         EXPECT_EQ(c.tls.ca_pem, kCaPem);
         EXPECT_EQ(c.token, "abc");
         EXPECT_EQ(c.default_namespace, "vm-system");
       }},
      {"relative CA path and client certificate files",
       "    server: https://h:1/prefix/path\n    certificate-authority: pki/ca.crt\n"
       "    tls-server-name: kubernetes\n",
       "    client-certificate: pki/client.crt\n    client-key: pki/client.key\n", "",
       [&](const Credentials& c) {
         EXPECT_EQ(c.server, "https://h:1/prefix/path");
         EXPECT_EQ(c.tls.ca_file, dir.path() + "/pki/ca.crt");
         EXPECT_EQ(c.tls.ca_pem, kCaPem);
         EXPECT_EQ(c.tls.server_name, "kubernetes");
         EXPECT_EQ(c.tls.client_cert_pem, "CERT");
         EXPECT_EQ(c.tls.client_key_pem, "KEY");
       }},
      {"token file resolved against the kubeconfig",
       "    server: https://h:1\n    insecure-skip-tls-verify: true\n",
       "    tokenFile: pki/token\n", "",
       [&](const Credentials& c) {
         EXPECT_EQ(c.token_file, dir.path() + "/pki/token");
         EXPECT_TRUE(c.tls.insecure_skip_tls_verify);
       }},
      {"insecure together with a CA",
       "    server: https://h:1\n    insecure-skip-tls-verify: "
       "true\n    certificate-authority: pki/ca.crt\n",
       "    token: abc\n", "insecure-skip-tls-verify together", nullptr},
      {"exec plugin", "    server: https://h:1\n",
       "    exec:\n      command: bin/get-token\n      apiVersion: "
       "client.authentication.k8s.io/v1\n      args: [--cluster, c1]\n      env:\n"
       "      - {name: REGION, value: eu-1}\n      installHint: install get-token\n"
       "      provideClusterInfo: true\n      interactiveMode: Never\n",
       "",
       [&](const Credentials& c) {
         ASSERT_TRUE(c.exec.has_value());
         EXPECT_EQ(c.exec->command, dir.path() + "/bin/get-token");
         EXPECT_EQ(c.exec->args, (std::vector<std::string>{"--cluster", "c1"}));
         ASSERT_EQ(c.exec->env.size(), 1u);
         EXPECT_EQ(c.exec->env[0].first, "REGION");
         EXPECT_EQ(c.exec->env[0].second, "eu-1");
         EXPECT_EQ(c.exec->install_hint, "install get-token");
         EXPECT_TRUE(c.exec->provide_cluster_info);
         EXPECT_EQ(c.exec->interactive_mode, "Never");
         EXPECT_EQ(c.exec->user, "u1");
         EXPECT_TRUE(c.token.empty());
       }},
      {"exec plugin v1beta1 on PATH", "    server: https://h:1\n",
       "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1beta1\n",
       "",
       [&](const Credentials& c) {
         ASSERT_TRUE(c.exec.has_value());
         EXPECT_EQ(c.exec->command, "aws");
         EXPECT_EQ(c.exec->interactive_mode, "IfAvailable");
       }},
      {"exec plugin v1 without interactiveMode", "    server: https://h:1\n",
       "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n",
       "interactiveMode must be set", nullptr},
      {"exec plugin that needs a terminal", "    server: https://h:1\n",
       "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n"
       "      interactiveMode: Always\n",
       "the daemon has none", nullptr},
      {"exec plugin of a removed apiVersion", "    server: https://h:1\n",
       "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1alpha1\n",
       "v1alpha1\" is not supported", nullptr},
      {"exec plugin without a command", "    server: https://h:1\n",
       "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n", "exec: no command",
       nullptr},
      {"exec plugin with a token too", "    server: https://h:1\n",
       "    token: hunter2\n    exec:\n      command: aws\n      apiVersion: "
       "client.authentication.k8s.io/v1beta1\n",
       "exec together with token", nullptr},
      {"auth provider", "    server: https://h:1\n", "    auth-provider:\n      name: gcp\n",
       "auth providers are not supported", nullptr},
      {"basic auth", "    server: https://h:1\n", "    username: a\n    password: hunter2\n",
       "basic authentication are not supported", nullptr},
      {"certificate without key", "    server: https://h:1\n",
       "    client-certificate: pki/client.crt\n", "needs its key", nullptr},
      {"no server", "    certificate-authority: pki/ca.crt\n", "    token: abc\n", "has no server",
       nullptr},
      {"plain http server", "    server: http://h:1\n", "    token: abc\n", "not an https://",
       nullptr},
      // User info in the URL is a credential: the error names the URL without it.
      {"plain http server with a password", "    server: http://admin:hunter2@h:1\n",
       "    token: abc\n", "server http://xxxxx@h:1 is not an https://", nullptr},
      {"bad base64", "    server: https://h:1\n    certificate-authority-data: '%%%'\n",
       "    token: abc\n", "not valid base64", nullptr},
      {"missing CA file", "    server: https://h:1\n    certificate-authority: nope.crt\n",
       "    token: abc\n", "cannot read", nullptr},
  };
  for (const KubeconfigCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = dir.Write("config", Kubeconfig(c.cluster, c.user));
    auto creds = LoadKubeconfig({path});
    if (!c.error.empty()) {
      ASSERT_FALSE(creds.ok());
      EXPECT_THAT(creds.status().message(), HasSubstr(c.error));
      EXPECT_THAT(creds.status().message(), Not(HasSubstr("hunter2")));
      continue;
    }
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    c.check(*creds);
  }
}

TEST(LoadKubeconfigTest, FirstFileDefiningAKeyWins) {
  TempDir dir;
  std::string first = dir.Write("a",
                                "current-context: two\nclusters:\n- name: c1\n  cluster: "
                                "{server: 'https://first:1'}\n");
  std::string second = dir.Write(
      "b", "current-context: one\n" + std::string("contexts:\n- name: two\n  context: {cluster: "
                                                  "c1, user: u1}\nclusters:\n- name: c1\n  "
                                                  "cluster: {server: 'https://second:1'}\n"
                                                  "users:\n- name: u1\n  user: {token: t}\n"));
  auto creds = LoadKubeconfig({first, second});
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_EQ(creds->server, "https://first:1");
  EXPECT_EQ(creds->token, "t");
  EXPECT_EQ(creds->default_namespace, "default");
}

TEST(LoadKubeconfigTest, ContextOverrideAndMissingContext) {
  TempDir dir;
  std::string path =
      dir.Write("config", Kubeconfig("    server: https://h:1\n", "    token: abc\n",
                                     "- name: other\n  context: {cluster: c1, user: nobody}\n"));
  auto missing_user = LoadKubeconfig({path}, "other");
  ASSERT_FALSE(missing_user.ok());
  EXPECT_THAT(missing_user.status().message(), HasSubstr("user \"nobody\" not found"));
  auto missing = LoadKubeconfig({path}, "ghost");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("context \"ghost\" not found"));
}

// Kubeconfigs whose entries have the wrong shape: each fails with an error naming what is wrong,
// never an exception out of yaml-cpp (which terminated the daemon at start-up: the first one was
// found by kubeconfig_fuzzer) and never the "unexpected structure" wall.
TEST(ParseKubeconfigTest, MisshapenEntriesAreNamedErrors) {
  const std::string head = "current-context: ctx\n";
  const std::string cluster = "clusters:\n- {name: c, cluster: {server: https://h}}\n";
  const std::string context = "contexts:\n- {name: ctx, context: {cluster: c, user: u}}\n";
  const struct {
    const char* name;
    std::string text;
    const char* error;
  } cases[] = {
      {"context without its body", head + cluster + "contexts:\n- {name: ctx, contextserver: {}}\n",
       "cluster \"\" not found"},
      {"context body is a scalar", head + cluster + "contexts:\n- {name: ctx, context: x}\n",
       "cluster \"\" not found"},
      {"context body is a list", head + cluster + "contexts:\n- {name: ctx, context: [c]}\n",
       "cluster \"\" not found"},
      {"entry is a scalar", head + cluster + "contexts: [ctx]\n", "contexts entry without a name"},
      {"entry is a list", head + "clusters:\n- [c]\n", "clusters entry without a name"},
      {"cluster without its body", head + context + "clusters:\n- {name: c}\n",
       "cluster \"c\" has no server"},
      {"cluster body is a scalar", head + context + "clusters:\n- {name: c, cluster: https://h}\n",
       "cluster \"c\" has no server"},
      {"user body is a scalar", head + cluster + context + "users:\n- {name: u, user: tok}\n",
       "user \"u\" is not a mapping"},
      {"user without its body", head + cluster + context + "users:\n- {name: u}\n", ""},
      {"document is a list", "[a, b]\n", "not a mapping"},
  };
  auto no_files = [](const std::string& path) -> base::Result<std::string> {
    return base::Status::Error("cannot read " + path);
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto creds = ParseKubeconfig({KubeconfigFile{"/k/config", c.text}}, "", no_files);
    if (*c.error == '\0') {
      ASSERT_TRUE(creds.ok()) << creds.status().message();
      EXPECT_EQ(creds->token, "");
      continue;
    }
    ASSERT_FALSE(creds.ok());
    EXPECT_THAT(creds.status().message(), HasSubstr(c.error));
    EXPECT_THAT(creds.status().message(), Not(HasSubstr("unexpected structure")));
  }
}

TEST(LoadInClusterTest, ReadsServiceAccountFiles) {
  TempDir dir;
  dir.Write("sa/token", "  tok-1\n");
  dir.Write("sa/ca.crt", kCaPem);
  dir.Write("sa/namespace", "vm-system\n");
  struct Case {
    std::string name;
    std::map<std::string, std::string> env;
    std::string server, ns, error;
  };
  const std::vector<Case> cases = {
      {"IPv4",
       {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}},
       "https://10.0.0.1:443",
       "vm-system",
       ""},
      {"IPv6 is bracketed",
       {{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}},
       "https://[fd00::1]:443",
       "vm-system",
       ""},
      {"POD_NAMESPACE wins",
       {{"KUBERNETES_SERVICE_HOST", "h"},
        {"KUBERNETES_SERVICE_PORT", "1"},
        {"POD_NAMESPACE", "mine"}},
       "https://h:1",
       "mine",
       ""},
      {"port missing", {{"KUBERNETES_SERVICE_HOST", "h"}}, "", "", "must both be set"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto creds = LoadInCluster(Env(c.env), dir.path() + "/sa");
    if (!c.error.empty()) {
      ASSERT_FALSE(creds.ok());
      EXPECT_THAT(creds.status().message(), HasSubstr(c.error));
      continue;
    }
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    EXPECT_EQ(creds->server, c.server);
    EXPECT_EQ(creds->default_namespace, c.ns);
    EXPECT_EQ(creds->token, "tok-1");
    EXPECT_EQ(creds->token_file, dir.path() + "/sa/token");
    EXPECT_EQ(creds->tls.ca_file, dir.path() + "/sa/ca.crt");
  }
}

TEST(LoadCredentialsTest, TheFlagsOnlyNeverKubeconfigEnvNorHome) {
  TempDir dir;
  std::string flag =
      dir.Write("flag", Kubeconfig("    server: https://flag:1\n", "    token: a\n"));
  std::string env_file =
      dir.Write("env", Kubeconfig("    server: https://env:1\n", "    token: a\n"));
  dir.Write(".kube/config", Kubeconfig("    server: https://home:1\n", "    token: a\n"));
  auto env = Env({{"KUBECONFIG", env_file},
                  {"HOME", dir.path()},
                  {"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                  {"KUBERNETES_SERVICE_PORT", "443"}});
  EXPECT_EQ(LoadCredentials(flag, false, env)->server, "https://flag:1");
  // Neither flag: $KUBECONFIG, ~/.kube/config and the service variables are not looked at.
  auto nothing = LoadCredentials("", false, env);
  ASSERT_FALSE(nothing.ok());
  EXPECT_THAT(nothing.status().message(),
              HasSubstr("no API server credentials: pass --kubeconfig FILE"));
  EXPECT_THAT(nothing.status().message(), ::testing::Not(HasSubstr("https://")));
  // No service-account files on a build machine: the in-cluster loader was chosen and says why.
  auto in_cluster = LoadCredentials("", true, env);
  ASSERT_FALSE(in_cluster.ok());
  EXPECT_THAT(in_cluster.status().message(), ::testing::StartsWith("--in-cluster: "));
  auto missing = LoadCredentials(dir.path() + "/absent", false, env);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              ::testing::StartsWith("--kubeconfig " + dir.path() + "/absent: "));
}

TEST(TokenSourceTest, RereadsAfterRefreshKeepsLastGoodAndRereadsOnInvalidate) {
  TempDir dir;
  std::string file = dir.Write("token", "first\n");
  auto now = std::chrono::steady_clock::time_point{};
  TokenSource source("fixed", file, std::chrono::seconds(50), [&] { return now; });
  EXPECT_EQ(source.Token(), "first");
  dir.Write("token", "second");
  now += std::chrono::seconds(49);
  EXPECT_EQ(source.Token(), "first");  // still fresh
  now += std::chrono::seconds(2);
  EXPECT_EQ(source.Token(), "second");
  dir.Write("token", "  \n");
  source.Invalidate();
  EXPECT_EQ(source.Token(), "second");  // empty file: keep the last good token
  fs::remove(file);
  source.Invalidate();
  EXPECT_EQ(source.Token(), "second");  // missing file too
  dir.Write("token", "third");
  source.Invalidate();
  EXPECT_EQ(source.Token(), "third");
}

TEST(TokenSourceTest, FixedTokenWithoutFile) {
  TokenSource source("fixed", "");
  EXPECT_EQ(source.Token(), "fixed");
  EXPECT_FALSE(source.HasFile());
}

}  // namespace
}  // namespace kubeclient
