// HttpClient over HTTP/2 against nghttpd (Debian nghttp2-server): ALPN h2, concurrent requests
// multiplexed on one connection, and another connection once a connection's concurrent streams
// reach the limit. (kube-test-apiserver speaks HTTP/1.1 only.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "kubeclient/http_client.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/test_loop.h"

extern char** environ;

namespace kube {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// nghttpd on 127.0.0.1 serving `htdocs` with the test PKI's server certificate.
class Nghttpd {
 public:
  Nghttpd(const kube_testing::TestApiServerProcess& pki, const std::string& htdocs, int max_streams)
      : port_(FreePort()) {
    std::vector<std::string> args = {
        "/usr/sbin/nghttpd",   "--address=127.0.0.1",
        "--htdocs=" + htdocs,  "--max-concurrent-streams=" + std::to_string(max_streams),
        std::to_string(port_), pki.pki("server.key"),
        pki.pki("server.crt")};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ);
  }
  ~Nghttpd() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  bool running() const { return pid_ > 0; }

 private:
  int port_;
  pid_t pid_ = -1;
};

class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/sbin/nghttpd", X_OK) != 0) {
      GTEST_FAIL() << "nghttpd missing: install the Debian package nghttp2-server";
    }
    ASSERT_TRUE(pki_.Start().ok());
    htdocs_ = pki_.dir() + "/htdocs";
    std::filesystem::create_directories(htdocs_);
    std::ofstream(htdocs_ + "/blob") << std::string(1 << 20, 'x');
  }

  // Starts `n` GETs of /blob at once; returns (HTTP versions seen, connections opened).
  static HttpRequest Blob() {
    HttpRequest request;
    request.path = "/blob";
    return request;
  }

  std::pair<std::set<int>, long> Fetch(int server_streams, long client_streams, int n) {
    Nghttpd server(pki_, htdocs_, server_streams);
    Credentials creds;
    creds.server = "https://127.0.0.1:" + std::to_string(server.port());
    creds.tls.ca_pem = ReadFile(pki_.ca_file());
    HttpClientOptions options;
    options.max_streams_per_connection = client_streams;
    std::set<int> versions;
    // nghttpd needs a moment to listen: retry the first request until it answers.
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto probe = HttpClient::Create(runner_.get(), creds, options);
      bool done = false, ok = false;
      (*probe)->Start(Blob(), [&](base::Status s, HttpResponse r) {
        ok = s.ok() && r.status == 200;
        done = true;
      });
      runner_.RunUntil([&] { return done; });
      if (ok) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto http = HttpClient::Create(runner_.get(), creds, options);
    EXPECT_TRUE(http.ok());
    int finished = 0;
    for (int i = 0; i < n; ++i) {
      (*http)->Start(Blob(), [&](base::Status s, HttpResponse r) {
        EXPECT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(r.status, 200);
        EXPECT_EQ(r.body.size(), 1u << 20);
        versions.insert(r.http_major);
        ++finished;
      });
    }
    EXPECT_TRUE(runner_.RunUntil([&] { return finished == n; }));
    return {versions, (*http)->stats().connections_opened};
  }

  kube_testing::TestApiServerProcess pki_;
  vmtest::TestLoop runner_;
  std::string htdocs_;
};

TEST_F(Http2Test, ConcurrentRequestsShareOneConnection) {
  auto [versions, connections] = Fetch(/*server_streams=*/100, /*client_streams=*/100, 30);
  EXPECT_EQ(versions, std::set<int>{2});
  EXPECT_EQ(connections, 1);
}

TEST_F(Http2Test, StreamLimitOpensMoreConnections) {
  auto [versions, connections] = Fetch(/*server_streams=*/100, /*client_streams=*/5, 30);
  EXPECT_EQ(versions, std::set<int>{2});
  EXPECT_GE(connections, 2);
  EXPECT_LT(connections, 30);
}

TEST_F(Http2Test, ServerStreamLimitIsHonouredToo) {
  auto [versions, connections] = Fetch(/*server_streams=*/5, /*client_streams=*/100, 30);
  EXPECT_EQ(versions, std::set<int>{2});
  EXPECT_GE(connections, 2);
}

}  // namespace
}  // namespace kube
