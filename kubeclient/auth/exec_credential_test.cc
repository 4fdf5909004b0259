#include "kubeclient/auth/exec_credential.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kV1[] = "client.authentication.k8s.io/v1";

using vmtest::ReadFile;

// Plugins are small shell scripts in a temporary directory; each run appends a line to `runs`.
class ExecCredentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/exec_credential_test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    cluster_.server = "https://10.0.0.1:6443";
    cluster_.tls.ca_pem = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
  }
  void TearDown() override {
    source_.reset();
    EXPECT_TRUE(loop_.Close());  // no handle left behind, the plugin reaped
    fs::remove_all(dir_);
  }

  // A plugin whose body is `body` (sh); returns its path.
  std::string Plugin(const std::string& body) {
    const std::string path = dir_ + "/plugin-" + std::to_string(++plugins_) + ".sh";
    std::ofstream(path) << "#!/bin/sh\necho run >> " << dir_ << "/runs\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  // A plugin printing this ExecCredential status.
  std::string Printing(const nlohmann::json& status) {
    const nlohmann::json out = {
        {"apiVersion", kV1}, {"kind", "ExecCredential"}, {"status", status}};
    std::ofstream(dir_ + "/out.json") << out.dump();
    return Plugin("cat " + dir_ + "/out.json");
  }
  void Make(const std::string& command, ExecCredentialSource::Options options = {}) {
    ExecConfig config;
    config.api_version = kV1;
    config.command = command;
    config.interactive_mode = "Never";
    config.user = "eks-user";
    config.install_hint = "install it with: apt install the-plugin";
    config.env = {{"PLUGIN_REGION", "eu-1"}};
    config.provide_cluster_info = provide_cluster_info_;
    if (!options.wall_clock) options.wall_clock = [this] { return now_; };
    source_ = std::make_unique<ExecCredentialSource>(loop_.get(), config, cluster_, options);
  }
  base::Status Get() {
    std::optional<base::Status> result;
    source_->Get([&](base::Status s) { result = s; });
    EXPECT_FALSE(result.has_value()) << "called inside Get()";
    EXPECT_TRUE(loop_.RunUntil([&] { return result.has_value(); }));
    return result.value_or(base::Status::Error("no answer"));
  }
  int Runs() {
    std::string text = ReadFile(dir_ + "/runs");
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  vmtest::TestLoop loop_;
  std::string dir_;
  int plugins_ = 0;
  bool provide_cluster_info_ = false;
  Credentials cluster_;
  std::chrono::system_clock::time_point now_ = std::chrono::system_clock::from_time_t(1800000000);
  std::unique_ptr<ExecCredentialSource> source_;
};

TEST_F(ExecCredentialTest, ATokenWithTheEnvironmentKubectlGives) {
  provide_cluster_info_ = true;
  Make(Plugin("printf '%s' \"$KUBERNETES_EXEC_INFO\" > " + dir_ +
              "/info.json\n"
              "if [ -t 0 ]; then echo tty > " +
              dir_ + "/stdin; else echo notty > " + dir_ + "/stdin; fi\n" +
              "echo \"$PLUGIN_REGION\" > " + dir_ + "/region\n" +
              "echo leaked-on-stderr-SECRET >&2\n" +
              "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
              "\"ExecCredential\",\"status\":{\"token\":\"tok-1\"}}'"));
  EXPECT_EQ(source_->Cached(), nullptr);
  ASSERT_TRUE(Get().ok());
  ASSERT_NE(source_->Cached(), nullptr);
  EXPECT_EQ(source_->Cached()->token, "tok-1");
  EXPECT_EQ(source_->Cached()->cert, nullptr);
  EXPECT_FALSE(source_->Cached()->expiry.has_value());
  const auto info = nlohmann::json::parse(ReadFile(dir_ + "/info.json"));
  EXPECT_EQ(info["apiVersion"], kV1);
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ(info["spec"]["cluster"]["certificate-authority-data"],
            "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K");
  EXPECT_EQ(ReadFile(dir_ + "/stdin"), "notty\n");
  EXPECT_EQ(ReadFile(dir_ + "/region"), "eu-1\n");
  EXPECT_NE(source_->Cached(), nullptr);  // cached: the client asks for no second run
  EXPECT_EQ(Runs(), 1);
}

TEST_F(ExecCredentialTest, AClientCertificate) {
  const std::string cmd = "cd " + dir_ +
                          " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                          "-nodes -keyout k.pem -out c.pem -days 1 -subj /CN=exec >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Make(Printing({{"clientCertificateData", ReadFile(dir_ + "/c.pem")},
                 {"clientKeyData", ReadFile(dir_ + "/k.pem")}}));
  ASSERT_TRUE(Get().ok());
  ASSERT_NE(source_->Cached(), nullptr);
  ASSERT_NE(source_->Cached()->cert, nullptr);
  EXPECT_EQ(source_->Cached()->cert->cert_pem, ReadFile(dir_ + "/c.pem"));
  EXPECT_TRUE(source_->Cached()->token.empty());
}

TEST_F(ExecCredentialTest, CachedUntilItsExpiryThenRunAgain) {
  Make(Printing({{"token", "tok"}, {"expirationTimestamp", "2027-01-15T08:00:00.5+01:00"}}));
  now_ = std::chrono::system_clock::from_time_t(1800000000 - 7200);  // 2027-01-15T06:00:00Z
  ASSERT_TRUE(Get().ok());
  ASSERT_NE(source_->Cached(), nullptr);
  ASSERT_TRUE(source_->Cached()->expiry.has_value());
  // 08:00:00.5+01:00 is 07:00:00.5Z (the fraction dropped).
  EXPECT_EQ(*source_->Cached()->expiry, std::chrono::system_clock::from_time_t(1800000000 - 3600));
  now_ = std::chrono::system_clock::from_time_t(1800000000);  // 08:00Z: expired
  EXPECT_EQ(source_->Cached(), nullptr);
  Make(Printing({{"token", "tok-2"}, {"expirationTimestamp", "2027-01-15T09:00:00Z"}}));
  ASSERT_TRUE(Get().ok());
  ASSERT_NE(source_->Cached(), nullptr);
  EXPECT_EQ(source_->Cached()->token, "tok-2");
  now_ += std::chrono::seconds(3600);
  EXPECT_NE(source_->Cached(), nullptr);  // at the expiry itself: still good (client-go: After)
  now_ += std::chrono::seconds(1);
  EXPECT_EQ(source_->Cached(), nullptr);
  ASSERT_TRUE(Get().ok());
  EXPECT_EQ(Runs(), 3);
}

TEST_F(ExecCredentialTest, AnInvalidateRunsItAgainAndWaitersShareOneRun) {
  Make(Printing({{"token", "tok"}}));
  std::vector<base::Status> results;
  for (int i = 0; i < 3; ++i) source_->Get([&](base::Status s) { results.push_back(s); });
  ASSERT_TRUE(loop_.RunUntil([&] { return results.size() == 3; }));
  for (const auto& s : results) EXPECT_TRUE(s.ok());
  EXPECT_EQ(Runs(), 1);
  source_->Invalidate();
  EXPECT_EQ(source_->Cached(), nullptr);
  ASSERT_TRUE(Get().ok());
  EXPECT_EQ(Runs(), 2);
  EXPECT_EQ(source_->Cached()->generation, 2u);
}

TEST_F(ExecCredentialTest, FailuresNameTheUserAndCommandNeverTheOutput) {
  vmtest::LogCapture log;
  struct Case {
    std::string name;
    std::string body;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"exit status", "echo '{\"token\":\"SECRET-1\"}'; echo SECRET-2 >&2; exit 3",
       "exited with status 3"},
      {"bad JSON", "echo '{not json SECRET-3'", "not a JSON object"},
      {"not an ExecCredential", "echo '{\"kind\":\"Pod\",\"token\":\"SECRET-4\"}'",
       "not an ExecCredential"},
      {"other apiVersion",
       "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":"
       "\"ExecCredential\",\"status\":{\"token\":\"SECRET-5\"}}'",
       "apiVersion is not client.authentication.k8s.io/v1"},
      {"no credential",
       "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
       "\"status\":{\"expirationTimestamp\":\"2030-01-01T00:00:00Z\"}}'",
       "neither a token nor a client certificate"},
      {"bad expiry",
       "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
       "\"status\":{\"token\":\"SECRET-6\",\"expirationTimestamp\":\"tomorrow\"}}'",
       "expirationTimestamp is not an RFC 3339 time"},
      {"key without certificate",
       "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
       "\"status\":{\"clientKeyData\":\"SECRET-7\"}}'",
       "without the other"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Plugin(c.body);
    Make(path);
    base::Status s = Get();
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("kubeconfig user \"eks-user\": exec plugin " + path));
    EXPECT_THAT(s.message(), HasSubstr(c.error));
    EXPECT_THAT(s.message(), Not(HasSubstr("SECRET")));
    EXPECT_EQ(source_->Cached(), nullptr);
  }
  EXPECT_THAT(log.text(), Not(HasSubstr("SECRET")));
}

TEST_F(ExecCredentialTest, AMissingCommandShowsTheInstallHint) {
  Make(dir_ + "/no-such-plugin");
  base::Status s = Get();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cannot run it"));
  EXPECT_THAT(s.message(), HasSubstr("install it with: apt install the-plugin"));
}

TEST_F(ExecCredentialTest, APluginThatHangsIsKilledAtTheLimit) {
  ExecCredentialSource::Options options;
  options.timeout = std::chrono::milliseconds(200);
  Make(Plugin("echo '{\"partial\": \"SECRET' ; exec sleep 600"), options);
  base::Status s = Get();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("killed after running longer than its time limit"));
  EXPECT_THAT(s.message(), Not(HasSubstr("SECRET")));
  // TearDown's loop close proves the killed plugin was reaped and every handle closed.
}

TEST_F(ExecCredentialTest, OutputBeyondTheLimitKillsIt) {
  ExecCredentialSource::Options options;
  options.max_output = 4096;
  Make(Plugin("while :; do echo 0123456789012345678901234567890123456789; done"), options);
  base::Status s = Get();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("killed after writing more than 4096 bytes"));
}

TEST_F(ExecCredentialTest, DestroyedWhileRunningKillsThePlugin) {
  Make(Plugin("exec sleep 600"));
  bool called = false;
  source_->Get([&](base::Status) { called = true; });
  loop_.RunFor(std::chrono::milliseconds(50));
  source_.reset();
  EXPECT_TRUE(loop_.Close());  // the plugin killed and reaped; nothing left open
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace kubeclient
