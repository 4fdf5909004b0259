#include "kubeclient/auth/client_cert_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using vmtest::ReadFile;

// Self-signed EC certificates made with the `openssl` command (as the test API server's PKI).
class ClientCertSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/client_cert_source_test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes <stem>.crt and <stem>.key; returns their texts joined (the kubelet's layout).
  std::string MakeCert(const std::string& stem, const std::string& cn) {
    const std::string cmd = "cd " + dir_ +
                            " && openssl req -x509 -newkey ec -pkeyopt "
                            "ec_paramgen_curve:prime256v1 -nodes -keyout " +
                            stem + ".key -out " + stem + ".crt -days 2 -subj /CN=" + cn +
                            " >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return ReadFile(dir_ + "/" + stem + ".crt") + ReadFile(dir_ + "/" + stem + ".key");
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // Points `link` at `target` the way the kubelet does: a new symlink renamed over the old one.
  void Swap(const std::string& link, const std::string& target) {
    const std::string tmp = dir_ + "/" + link + ".tmp";
    fs::remove(tmp);
    fs::create_symlink(dir_ + "/" + target, tmp);
    fs::rename(tmp, dir_ + "/" + link);
  }
  TlsConfig FromFile(const std::string& cert_file, const std::string& key_file) {
    TlsConfig tls;
    tls.client_cert_file = cert_file;
    tls.client_key_file = key_file;
    tls.client_cert_pem = ReadFile(cert_file);
    tls.client_key_pem = ReadFile(key_file);
    return tls;
  }
  ClientCertSource::Options Manual() {
    ClientCertSource::Options options;
    options.check_interval = std::chrono::seconds(30);
    options.clock = [this] { return now_; };
    return options;
  }

  std::string dir_;
  std::chrono::steady_clock::time_point now_{};
};

TEST_F(ClientCertSourceTest, FollowsASwappedSymlinkToAFileHoldingBoth) {
  const std::string first = MakeCert("a", "first");
  const std::string second = MakeCert("b", "second");
  Write("a.pem", first);
  Write("b.pem", second);
  Swap("current.pem", "a.pem");
  const std::string link = dir_ + "/current.pem";
  auto source = ClientCertSource::Create(FromFile(link, link), Manual());
  ASSERT_TRUE(source.ok()) << source.status().message();
  auto pair = (*source)->Current();
  EXPECT_EQ(pair->generation, 1u);
  EXPECT_EQ(pair->cert_pem, ReadFile(dir_ + "/a.crt"));
  EXPECT_THAT(pair->key_pem, HasSubstr("PRIVATE KEY"));
  EXPECT_THAT(pair->key_pem, Not(HasSubstr("CERTIFICATE")));
  EXPECT_GT(pair->not_after, std::chrono::system_clock::now());

  Swap("current.pem", "b.pem");
  // Not looked at before the interval has passed.
  now_ += std::chrono::seconds(29);
  EXPECT_EQ((*source)->Current()->generation, 1u);
  now_ += std::chrono::seconds(1);
  pair = (*source)->Current();
  EXPECT_EQ(pair->generation, 2u);
  EXPECT_EQ(pair->cert_pem, ReadFile(dir_ + "/b.crt"));
  // Unchanged files: the same pair.
  EXPECT_FALSE((*source)->CheckNow());
  EXPECT_EQ((*source)->Current()->generation, 2u);
}

TEST_F(ClientCertSourceTest, SeparateFilesAndAnInvalidateLooksAtOnce) {
  MakeCert("a", "first");
  MakeCert("b", "second");
  const std::string cert = dir_ + "/client.crt", key = dir_ + "/client.key";
  fs::copy_file(dir_ + "/a.crt", cert);
  fs::copy_file(dir_ + "/a.key", key);
  auto source = ClientCertSource::Create(FromFile(cert, key), Manual());
  ASSERT_TRUE(source.ok()) << source.status().message();
  fs::copy_file(dir_ + "/b.key", key + ".new");
  fs::rename(key + ".new", key);
  fs::copy_file(dir_ + "/b.crt", cert + ".new");
  fs::rename(cert + ".new", cert);
  EXPECT_EQ((*source)->Current()->generation, 1u);
  (*source)->Invalidate();
  EXPECT_EQ((*source)->Current()->generation, 2u);
  EXPECT_EQ((*source)->Current()->cert_pem, ReadFile(dir_ + "/b.crt"));
}

TEST_F(ClientCertSourceTest, ABadNewPairKeepsTheLastGoodOneWithOneWarning) {
  const std::string first = MakeCert("a", "first");
  const std::string other = MakeCert("b", "second");
  Write("a.pem", first);
  // b's certificate with a's key: the key does not match.
  Write("mismatch.pem", ReadFile(dir_ + "/b.crt") + ReadFile(dir_ + "/a.key"));
  Write("garbage.pem",
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n" +
            ReadFile(dir_ + "/a.key"));
  Write("b.pem", other);
  Swap("current.pem", "a.pem");
  const std::string link = dir_ + "/current.pem";
  auto source = ClientCertSource::Create(FromFile(link, link), Manual());
  ASSERT_TRUE(source.ok()) << source.status().message();
  const std::string good = (*source)->Current()->cert_pem;

  vmtest::LogCapture log;
  Swap("current.pem", "mismatch.pem");
  EXPECT_FALSE((*source)->CheckNow());
  EXPECT_EQ((*source)->Current()->cert_pem, good);
  EXPECT_FALSE((*source)->CheckNow());  // the same bad file: not read again, no new warning
  Swap("current.pem", "garbage.pem");
  EXPECT_FALSE((*source)->CheckNow());
  fs::remove(dir_ + "/garbage.pem");  // a dangling symlink
  EXPECT_FALSE((*source)->CheckNow());
  EXPECT_EQ((*source)->Current()->cert_pem, good);
  EXPECT_EQ((*source)->Current()->generation, 1u);
  const std::string text = log.text();
  EXPECT_THAT(text, HasSubstr("client certificate and key " + link));
  EXPECT_THAT(text, HasSubstr("cannot be used together"));
  EXPECT_THAT(text, HasSubstr("keeping the certificate in use"));
  size_t warnings = 0;
  for (size_t at = 0; (at = text.find("[warning]", at)) != std::string::npos; ++at) ++warnings;
  EXPECT_EQ(warnings, 1u) << text;
  EXPECT_THAT(text, Not(HasSubstr("PRIVATE KEY")));
  EXPECT_THAT(text, Not(HasSubstr("BEGIN")));

  Swap("current.pem", "b.pem");
  EXPECT_TRUE((*source)->CheckNow());
  EXPECT_EQ((*source)->Current()->generation, 2u);
  EXPECT_THAT(log.text(), HasSubstr("usable again"));
}

TEST_F(ClientCertSourceTest, AnUnusablePairAtStartIsAnErrorNamingTheFilesOnly) {
  MakeCert("a", "first");
  MakeCert("b", "second");
  const std::string key_text = ReadFile(dir_ + "/a.key");
  auto mismatch = ClientCertSource::Create(FromFile(dir_ + "/b.crt", dir_ + "/a.key"), Manual());
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(), HasSubstr("client certificate " + dir_ + "/b.crt"));
  EXPECT_THAT(mismatch.status().message(), HasSubstr("and key " + dir_ + "/a.key"));
  EXPECT_THAT(mismatch.status().message(), Not(HasSubstr("BEGIN")));

  auto no_key = ClientCertSource::Create(FromFile(dir_ + "/b.crt", dir_ + "/b.crt"), Manual());
  ASSERT_FALSE(no_key.ok());
  EXPECT_THAT(no_key.status().message(), HasSubstr("no PEM private key"));

  TlsConfig none;
  auto absent = ClientCertSource::Create(none, Manual());
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent, nullptr);
}

TEST_F(ClientCertSourceTest, FixedDataNeverLooksAtFiles) {
  MakeCert("a", "first");
  TlsConfig tls;
  tls.client_cert_pem = ReadFile(dir_ + "/a.crt");
  tls.client_key_pem = ReadFile(dir_ + "/a.key");
  auto source = ClientCertSource::Create(tls, Manual());
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_FALSE((*source)->FollowsFiles());
  EXPECT_FALSE((*source)->CheckNow());
  EXPECT_EQ((*source)->Current()->generation, 1u);
}

}  // namespace
}  // namespace kubeclient
