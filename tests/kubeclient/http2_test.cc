// HttpClient over HTTP/2 against nghttpd (Debian nghttp2-server): ALPN h2, concurrent requests
// multiplexed on one connection, and another connection once a connection's concurrent streams
// reach the limit. Long-lived streams (watches) against kube-test-apiserver behind nghttpx (Debian
// nghttp2-proxy) as its HTTP/2 front, since the test server speaks HTTP/1.1 only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "kubeclient/transport/http_client.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/nghttpx.h"
#include "tests/support/test_loop.h"

extern char** environ;

namespace kubeclient {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// nghttpd on 127.0.0.1 serving `htdocs` with the test PKI's server certificate.
class Nghttpd {
 public:
  Nghttpd(const kube_testing::TestApiServerProcess& pki, const std::string& htdocs, int max_streams)
      : port_(vmtest::FreePort()) {
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

// Every test runs twice: through libcurl, and through the project's own HTTP/2 transport
// (HttpClientOptions::native_http2, http2_transport.h).
class Http2Test : public ::testing::TestWithParam<bool> {
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

  // nghttpd needs a moment to listen: retries a first request until it answers.
  HttpClientOptions Options() const {
    HttpClientOptions options;
    options.native_http2 = GetParam();
    return options;
  }

  void WaitForServer(const Credentials& creds) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto probe = HttpClient::Create(runner_.get(), creds, Options());
      bool done = false, ok = false;
      (*probe)->Start(Blob(), [&](base::Status s, HttpResponse r) {
        ok = s.ok() && r.status == 200;
        done = true;
      });
      runner_.RunUntil([&] { return done; });
      if (ok) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // `at_least_connections`: after the last response, the loop runs on (up to its limit) until
  // that many connections were opened: one opened because the others were full may still be in
  // its handshake when the requests it was opened for ended elsewhere.
  std::pair<std::set<int>, long> Fetch(int server_streams, long client_streams, int n,
                                       long at_least_connections = 0) {
    Nghttpd server(pki_, htdocs_, server_streams);
    Credentials creds;
    creds.server = "https://127.0.0.1:" + std::to_string(server.port());
    creds.tls.ca_pem = ReadFile(pki_.ca_file());
    HttpClientOptions options = Options();
    options.max_streams_per_connection = client_streams;
    std::set<int> versions;
    WaitForServer(creds);
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
    if (at_least_connections > 0) {
      runner_.RunUntil([&] { return (*http)->stats().connections_opened >= at_least_connections; });
    }
    return {versions, (*http)->stats().connections_opened};
  }

  kube_testing::TestApiServerProcess pki_;
  vmtest::TestLoop runner_;
  std::string htdocs_;
};

TEST_P(Http2Test, ConcurrentRequestsShareOneConnection) {
  auto [versions, connections] = Fetch(/*server_streams=*/100, /*client_streams=*/100, 30);
  EXPECT_EQ(versions, std::set<int>{2});
  EXPECT_EQ(connections, 1);
}

TEST_P(Http2Test, StreamLimitOpensMoreConnections) {
  // The same race as below: wait for the second connection's handshake.
  auto [versions, connections] = Fetch(/*server_streams=*/100, /*client_streams=*/5, 30,
                                       /*at_least_connections=*/2);
  EXPECT_EQ(versions, std::set<int>{2});
  EXPECT_GE(connections, 2);
  EXPECT_LT(connections, 30);
}

// The server's SETTINGS allow 5 streams: the 25 other requests wait, and another connection is
// opened for them. The 30 transfers may all end on the first connection before the second's
// handshake does (seen in about one run of four with the project's transport on a 2-core VM), so
// the check waits for the second connection instead of racing it; none is opened if the
// transport queued everything on the first.
TEST_P(Http2Test, ServerStreamLimitIsHonouredToo) {
  auto [versions, connections] = Fetch(/*server_streams=*/5, /*client_streams=*/100, 30,
                                       /*at_least_connections=*/2);
  EXPECT_EQ(versions, std::set<int>{2});
  EXPECT_GE(connections, 2);
}

// A streamed body (a watch's) goes through a receive buffer of 1 KiB, not libcurl's default of
// 16 KiB, which every watch would hold for its whole life: the body arrives whole, in pieces of
// at most 1 KiB (pieces of up to 16 KiB before). Its headers go to on_headers and are not kept.
TEST_P(Http2Test, AStreamedBodyArrivesWholeInPiecesOfAtMostOneKiB) {
  Nghttpd server(pki_, htdocs_, 100);
  Credentials creds;
  creds.server = "https://127.0.0.1:" + std::to_string(server.port());
  creds.tls.ca_pem = ReadFile(pki_.ca_file());
  WaitForServer(creds);
  auto http = HttpClient::Create(runner_.get(), creds, Options());
  ASSERT_TRUE(http.ok());
  HttpRequest request = Blob();
  request.stream = true;
  size_t received = 0, largest = 0;
  int major = 0;
  bool done = false;
  StreamCallbacks stream;
  size_t head_headers = 0;
  stream.on_headers = [&](const HttpResponse& head) {
    major = head.http_major;
    head_headers = head.headers.size();
  };
  stream.on_data = [&](std::string_view data) {
    received += data.size();
    largest = std::max(largest, data.size());
    return true;
  };
  (*http)->Start(
      std::move(request),
      [&](base::Status s, HttpResponse r) {
        EXPECT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(r.status, 200);
        // The headers went to on_headers; the transfer did not keep them for its whole life.
        EXPECT_TRUE(r.headers.empty());
        done = true;
      },
      std::move(stream));
  ASSERT_TRUE(runner_.RunUntil([&] { return done; }));
  EXPECT_GT(head_headers, 0u);
  EXPECT_EQ(major, 2);
  EXPECT_EQ(received, 1u << 20);
  // libcurl: its receive buffer; the own transport hands over each DATA frame's bytes (at most
  // 16 KiB, HTTP/2's default frame size) from one stack buffer, and keeps none.
  EXPECT_LE(largest, GetParam() ? 16384u : 1024u);
  EXPECT_GT(largest, 0u);
}

// Watches started in one burst (a Reflector per object, --kube-api-burst raised) fill the
// connections 100 streams at a time. libcurl alone opened a connection for every stream started
// while its second connection was still connecting: 151 connections for these 250 watches.
TEST_P(Http2Test, ABurstOfLongStreamsFillsConnectionsInsteadOfOpeningOneEach) {
  if (access("/usr/sbin/nghttpx", X_OK) != 0) {
    GTEST_FAIL() << "nghttpx missing: install the Debian package nghttp2-proxy";
  }
  vmtest::Nghttpx front(pki_);
  ASSERT_TRUE(front.Listening());
  Credentials creds;
  creds.server = "https://127.0.0.1:" + std::to_string(front.port());
  creds.tls.ca_pem = ReadFile(pki_.ca_file());
  creds.token = pki_.token();
  auto http = HttpClient::Create(runner_.get(), creds, Options());
  ASSERT_TRUE(http.ok());
  constexpr int kWatches = 250;
  int answered = 0;
  std::set<int> versions;
  std::vector<HttpClient::RequestId> ids;
  for (int i = 0; i < kWatches; ++i) {
    HttpRequest watch;
    watch.path =
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=120"
        "&fieldSelector=metadata.name%3Dcm-" +
        std::to_string(i);
    watch.stream = true;
    StreamCallbacks stream;
    stream.on_headers = [&](const HttpResponse& head) {
      EXPECT_EQ(head.status, 200);
      versions.insert(head.http_major);
      ++answered;
    };
    ids.push_back((*http)->Start(
        std::move(watch), [](base::Status, HttpResponse) {}, std::move(stream)));
  }
  // Every stream is served (none starves behind the others)...
  ASSERT_TRUE(runner_.RunUntil([&] { return answered == kWatches; }));
  EXPECT_EQ(versions, std::set<int>{2});
  // ...on ceil(250 / 100) connections.
  EXPECT_LE((*http)->stats().open_connections, 3u);
  EXPECT_EQ((*http)->stats().requests_waiting, 0u);
  for (auto id : ids) (*http)->Cancel(id);
}

// The project's own HTTP/2 transport on its own (HttpClientOptions::native_http2): what libcurl
// did for it before, it must do too.
class NativeHttp2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/sbin/nghttpx", X_OK) != 0) {
      GTEST_FAIL() << "nghttpx missing: install the Debian package nghttp2-proxy";
    }
    ASSERT_TRUE(api_.Start().ok());
    front_.emplace(api_);
    ASSERT_TRUE(front_->Listening());
  }
  Credentials Front() const {
    Credentials creds;
    creds.server = "https://127.0.0.1:" + std::to_string(front_->port());
    creds.tls.ca_pem = ReadFile(api_.ca_file());
    creds.token = api_.token();
    return creds;
  }
  std::unique_ptr<HttpClient> Client(const Credentials& creds) {
    HttpClientOptions options;
    options.native_http2 = true;
    auto http = HttpClient::Create(runner_.get(), creds, options);
    EXPECT_TRUE(http.ok()) << http.status().message();
    return http.ok() ? std::move(*http) : nullptr;
  }
  // One request to its end: (transport status, response).
  std::pair<base::Status, HttpResponse> Fetch(HttpClient& http, HttpRequest request) {
    bool done = false;
    std::pair<base::Status, HttpResponse> out{base::Status::OK(), {}};
    http.Start(std::move(request), [&](base::Status s, HttpResponse r) {
      out = {std::move(s), std::move(r)};
      done = true;
    });
    EXPECT_TRUE(runner_.RunUntil([&] { return done; }));
    return out;
  }
  static HttpRequest Get(const std::string& path) {
    HttpRequest request;
    request.path = path;
    return request;
  }
  static HttpRequest Watch(const std::string& name) {
    HttpRequest watch;
    watch.path =
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=120"
        "&fieldSelector=metadata.name%3D" +
        name;
    watch.stream = true;
    return watch;
  }

  kube_testing::TestApiServerProcess api_;
  std::optional<vmtest::Nghttpx> front_;
  vmtest::TestLoop runner_;
};

TEST_F(NativeHttp2Test, WritesCarryTheirBodiesAndReadsSeeThem) {
  auto http = Client(Front());
  ASSERT_NE(http, nullptr);
  HttpRequest create;
  create.method = "POST";
  create.path = "/api/v1/namespaces/default/configmaps";
  create.body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"h2"},"data":{"k":")" +
                std::string(100000, 'v') + R"("}})";
  auto [status, created] = Fetch(*http, create);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(created.status, 201) << created.body.substr(0, 300);
  EXPECT_EQ(created.http_major, 2);
  auto [status2, read] = Fetch(*http, Get("/api/v1/namespaces/default/configmaps/h2"));
  ASSERT_TRUE(status2.ok()) << status2.message();
  EXPECT_EQ(read.status, 200);
  EXPECT_NE(read.body.find(std::string(100000, 'v')), std::string::npos);
  EXPECT_EQ(read.headers["content-type"], "application/json");
  auto [status3, missing] = Fetch(*http, Get("/api/v1/namespaces/default/configmaps/none"));
  ASSERT_TRUE(status3.ok());
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("NotFound"), std::string::npos);
  // libcurl never loaded for this client: one connection, HTTP/2 throughout.
  EXPECT_EQ(http->stats().connections_opened, 1);
}

TEST_F(NativeHttp2Test, AnHttp1ServerIsServedThroughLibcurl) {
  Credentials creds;
  creds.server = api_.url();  // the test server itself: HTTP/1.1 only
  creds.tls.ca_pem = ReadFile(api_.ca_file());
  creds.token = api_.token();
  auto http = Client(creds);
  ASSERT_NE(http, nullptr);
  // A burst before the first connection has told which protocol: every request is answered.
  int answered = 0;
  for (int i = 0; i < 5; ++i) {
    http->Start(Get("/api/v1/namespaces/default/configmaps"), [&](base::Status s, HttpResponse r) {
      EXPECT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.http_major, 1);
      ++answered;
    });
  }
  ASSERT_TRUE(runner_.RunUntil([&] { return answered == 5; }));
  auto [status, later] = Fetch(*http, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(later.http_major, 1);
}

TEST_F(NativeHttp2Test, TlsIsVerifiedForTheServerName) {
  Credentials creds = Front();
  creds.tls.server_name = "kubernetes";  // in the certificate's SANs; the URL's host is an IP
  auto http = Client(creds);
  auto [ok, response] = Fetch(*http, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(response.status, 200);

  creds.tls.server_name = "not-the-server.example";
  auto wrong_name = Client(creds);
  auto [failed, r1] = Fetch(*wrong_name, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("is not trusted"), std::string::npos) << failed.message();
  EXPECT_EQ(r1.status, 0);

  creds = Front();
  creds.tls.ca_pem.clear();  // the system's roots, which never signed the test CA
  auto wrong_ca = Client(creds);
  auto [failed2, r2] = Fetch(*wrong_ca, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_FALSE(failed2.ok());
  EXPECT_NE(failed2.message().find("is not trusted"), std::string::npos) << failed2.message();

  creds.tls.insecure_skip_tls_verify = true;
  auto insecure = Client(creds);
  auto [ok2, r3] = Fetch(*insecure, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_TRUE(ok2.ok()) << ok2.message();
  EXPECT_EQ(r3.status, 200);
}

TEST_F(NativeHttp2Test, NoServerFailsEveryWaitingRequestWithTheReason) {
  Credentials creds = Front();
  creds.server = "https://127.0.0.1:" + std::to_string(vmtest::FreePort());
  auto http = Client(creds);
  int failed = 0;
  for (int i = 0; i < 3; ++i) {
    http->Start(Get("/api"), [&](base::Status s, HttpResponse r) {
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find("cannot connect to 127.0.0.1:"), std::string::npos) << s.message();
      EXPECT_EQ(r.status, 0);
      ++failed;
    });
  }
  ASSERT_TRUE(runner_.RunUntil([&] { return failed == 3; }));
  EXPECT_EQ(http->stats().requests_in_flight, 0u);
}

// A server URL with credentials in it (user:password@host) goes through libcurl, and no message
// about it carries the password: the host and port are the ones after the '@'.
TEST_F(NativeHttp2Test, CredentialsInTheServerUrlReachNoMessage) {
  Credentials creds = Front();
  creds.server = "https://user:s3cr3t@127.0.0.1:" + std::to_string(vmtest::FreePort());
  auto http = Client(creds);
  ASSERT_NE(http, nullptr);
  auto [status, response] = Fetch(*http, Get("/api"));
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(status.message().empty());
  EXPECT_EQ(status.message().find("s3cr3t"), std::string::npos) << status.message();
  EXPECT_EQ(response.status, 0);
}

TEST_F(NativeHttp2Test, CancelledStreamsGetNoCallbackAndLostConnectionsFailTheRest) {
  auto http = Client(Front());
  // A stream cancelled from inside its own on_headers: no callback afterwards.
  bool cancelled_done = false;
  HttpClient::RequestId self = 0;
  bool headed = false;
  StreamCallbacks cancel_self;
  cancel_self.on_headers = [&](const HttpResponse&) {
    headed = true;
    http->Cancel(self);
  };
  self = http->Start(
      Watch("a"), [&](base::Status, HttpResponse) { cancelled_done = true; },
      std::move(cancel_self));
  // Five watches left open.
  int heads = 0, ended = 0;
  for (int i = 0; i < 5; ++i) {
    StreamCallbacks stream;
    stream.on_headers = [&](const HttpResponse& head) {
      EXPECT_EQ(head.status, 200);
      EXPECT_EQ(head.http_major, 2);
      ++heads;
    };
    http->Start(
        Watch("w" + std::to_string(i)),
        [&](base::Status s, HttpResponse) {
          EXPECT_FALSE(s.ok());
          EXPECT_FALSE(s.message().empty());
          ++ended;
        },
        std::move(stream));
  }
  ASSERT_TRUE(runner_.RunUntil([&] { return heads == 5 && headed; }));
  EXPECT_EQ(http->stats().requests_in_flight, 5u);
  front_.reset();  // the server goes away
  ASSERT_TRUE(runner_.RunUntil([&] { return ended == 5; }));
  runner_.RunFor(std::chrono::milliseconds(100));
  EXPECT_FALSE(cancelled_done);
  EXPECT_EQ(http->stats().requests_in_flight, 0u);
  EXPECT_EQ(http->stats().open_connections, 0u);
}

// A server that stops taking streams (GOAWAY naming the last one it processed, as a
// kube-apiserver does with --goaway-chance or when it shuts down) refuses the others: they are
// sent again on a new connection, and their callers see answers, not errors.
TEST(NativeHttp2GoawayTest, StreamsBeyondAGoawayAreSentAgainOnANewConnection) {
  kube_testing::TestApiServerProcess pki;  // its certificates only
  ASSERT_TRUE(pki.Start().ok());
  const int port = vmtest::FreePort();
  pid_t pid = -1;
  std::vector<std::string> args = {"/usr/bin/python3", VM_H2_GOAWAY_SERVER, std::to_string(port),
                                   pki.pki("server.crt"), pki.pki("server.key")};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  } reap{pid};
  vmtest::TestLoop runner;
  Credentials creds;
  creds.server = "https://127.0.0.1:" + std::to_string(port);
  creds.tls.ca_pem = ReadFile(pki.ca_file());
  HttpClientOptions options;
  options.native_http2 = true;
  ASSERT_TRUE(vmtest::Listening(port));  // the server needs a moment to listen
  auto http = HttpClient::Create(runner.get(), creds, options);
  ASSERT_TRUE(http.ok());
  std::map<std::string, std::string> bodies;
  for (std::string path : {"/a", "/b"}) {
    HttpRequest request;
    request.path = path;
    (*http)->Start(request, [&bodies, path](base::Status s, HttpResponse r) {
      EXPECT_TRUE(s.ok()) << path << ": " << s.message();
      EXPECT_EQ(r.status, 200);
      bodies[path] = r.body;
    });
  }
  ASSERT_TRUE(runner.RunUntil([&] { return bodies.size() == 2; }));
  // /a was processed by the first connection; /b, refused there, by the second.
  EXPECT_EQ(bodies["/a"], "connection 1 /a");
  EXPECT_EQ(bodies["/b"], "connection 2 /b");
  EXPECT_EQ((*http)->stats().connections_opened, 2);
}

// h2_cert_server.py on a free port with `pki`'s server certificate, requiring client certificates
// signed by its CA; stopped with the test.
struct H2CertServer {
  explicit H2CertServer(const kube_testing::TestApiServerProcess& pki) : port(vmtest::FreePort()) {
    std::vector<std::string> args = {"/usr/bin/python3",    VM_H2_CERT_SERVER,
                                     std::to_string(port),  pki.pki("server.crt"),
                                     pki.pki("server.key"), pki.ca_file()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    EXPECT_TRUE(vmtest::Listening(port));  // the server needs a moment to listen
  }
  ~H2CertServer() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  int port;
  pid_t pid = -1;
};

// A client certificate rotated in place (a symlink swapped to a new file holding certificate and
// key) on the transport of our own: new connections present the new one; the old connection takes
// no new stream, its watch ends at once (so its owner reconnects), a request in flight on it gets
// its answer, and then it closes.
TEST(NativeHttp2CertTest, ARotatedClientCertificateRetiresTheOldConnection) {
  kube_testing::TestApiServerProcess pki;  // its CA, server certificate and issue-client-cert
  ASSERT_TRUE(pki.Start().ok());
  const std::string dir = pki.dir() + "/node-pki";
  std::filesystem::create_directories(dir);
  std::vector<std::string> serials;
  for (const char* name : {"one.pem", "two.pem"}) {
    auto reply = pki.Admin("POST", "issue-client-cert",
                           {{"path", dir + "/" + name}, {"user", "system:node:n1"}, {"days", 1}});
    ASSERT_EQ(reply.code, 200) << reply.raw;
    serials.push_back(reply.body["serial"]);
  }
  const std::string current = dir + "/current.pem";
  auto point = [&](const std::string& name) {
    std::filesystem::remove(current + ".tmp");
    std::filesystem::create_symlink(dir + "/" + name, current + ".tmp");
    std::filesystem::rename(current + ".tmp", current);
  };
  point("one.pem");
  H2CertServer server(pki);
  const int port = server.port;
  vmtest::TestLoop runner;
  Credentials creds;
  creds.server = "https://127.0.0.1:" + std::to_string(port);
  creds.tls.ca_pem = ReadFile(pki.ca_file());
  creds.tls.client_cert_file = creds.tls.client_key_file = current;
  creds.tls.client_cert_pem = creds.tls.client_key_pem = ReadFile(current);
  HttpClientOptions options;
  options.native_http2 = true;
  options.client_cert_check_interval = std::chrono::milliseconds(50);
  auto created = HttpClient::Create(runner.get(), creds, options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  HttpClient& http = **created;
  auto get = [&](const std::string& path) {
    std::optional<std::string> body;
    HttpRequest request;
    request.path = path;
    http.Start(request, [&](base::Status s, HttpResponse r) {
      EXPECT_TRUE(s.ok()) << path << ": " << s.message();
      body = r.body;
    });
    EXPECT_TRUE(runner.RunUntil([&] { return body.has_value(); })) << path;
    return body.value_or("");
  };
  EXPECT_EQ(get("/whoami"), serials[0] + " connection 1");

  // A watch and a request waiting for its answer, both on connection 1.
  std::string watched;
  std::optional<base::Status> watch_end;
  HttpRequest watch;
  watch.path = "/watch";
  watch.stream = true;
  StreamCallbacks stream;
  stream.on_data = [&](std::string_view data) {
    watched.append(data);
    return true;
  };
  http.Start(
      watch, [&](base::Status s, HttpResponse) { watch_end = s; }, stream);
  std::optional<HttpResponse> held;
  HttpRequest held_request;
  held_request.path = "/held";
  http.Start(held_request, [&](base::Status s, HttpResponse r) {
    EXPECT_TRUE(s.ok()) << s.message();
    held = r;
  });
  ASSERT_TRUE(runner.RunUntil([&] { return !watched.empty(); }));
  EXPECT_EQ(watched, serials[0] + "\n");

  point("two.pem");
  ASSERT_TRUE(runner.RunUntil([&] { return watch_end.has_value(); }));
  EXPECT_NE(watch_end->message().find("client certificate changed"), std::string::npos)
      << watch_end->message();
  EXPECT_FALSE(held.has_value());
  // A new connection with the new certificate; the old one still carries the held request.
  EXPECT_EQ(get("/whoami"), serials[1] + " connection 2");
  EXPECT_EQ(http.stats().open_connections, 2u);
  EXPECT_EQ(get("/release"), "released");
  ASSERT_TRUE(runner.RunUntil([&] { return held.has_value(); }));
  EXPECT_EQ(held->status, 200);
  EXPECT_EQ(held->body, serials[0]);
  ASSERT_TRUE(runner.RunUntil([&] { return http.stats().open_connections == 1; }));
  EXPECT_EQ(get("/whoami"), serials[1] + " connection 2");
}

// Issue 42: a rotation noticed while a connection opens (it presents the new pair) retired that
// connection too, and every request waiting for it waited for yet another one. Only the
// connections of the old pair are retired and only their watches end: each watch reconnects
// once, onto the connection that noticed the rotation.
TEST(NativeHttp2CertTest, ARotationNoticedWhileAConnectionOpensRetiresOnlyTheOldPairs) {
  kube_testing::TestApiServerProcess pki;
  ASSERT_TRUE(pki.Start().ok());
  const std::string dir = pki.dir() + "/node-pki";
  std::filesystem::create_directories(dir);
  std::vector<std::string> serials;
  for (const char* name : {"one.pem", "two.pem"}) {
    auto reply = pki.Admin("POST", "issue-client-cert",
                           {{"path", dir + "/" + name}, {"user", "system:node:n1"}, {"days", 1}});
    ASSERT_EQ(reply.code, 200) << reply.raw;
    serials.push_back(reply.body["serial"]);
  }
  const std::string current = dir + "/current.pem";
  auto point = [&](const std::string& name) {
    std::filesystem::remove(current + ".tmp");
    std::filesystem::create_symlink(dir + "/" + name, current + ".tmp");
    std::filesystem::rename(current + ".tmp", current);
  };
  point("one.pem");
  H2CertServer server(pki);
  vmtest::TestLoop runner;
  Credentials creds;
  creds.server = "https://127.0.0.1:" + std::to_string(server.port);
  creds.tls.ca_pem = ReadFile(pki.ca_file());
  creds.tls.client_cert_file = creds.tls.client_key_file = current;
  creds.tls.client_cert_pem = creds.tls.client_key_pem = ReadFile(current);
  HttpClientOptions options;
  options.native_http2 = true;
  // The timer never looks at the files during the test: the rotation is noticed only when the
  // next connection takes the current pair.
  options.client_cert_check_interval = std::chrono::hours(1);
  options.max_streams_per_connection = 1;  // a second request needs a second connection
  auto created = HttpClient::Create(runner.get(), creds, options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  HttpClient& http = **created;
  struct Watch {
    std::string data;
    std::optional<base::Status> end;
  };
  auto start_watch = [&](Watch* w) {
    HttpRequest watch;
    watch.path = "/watch";
    watch.stream = true;
    StreamCallbacks stream;
    stream.on_data = [w](std::string_view data) {
      w->data.append(data);
      return true;
    };
    http.Start(
        watch, [w](base::Status s, HttpResponse) { w->end = s; }, stream);
  };
  Watch first;
  start_watch(&first);
  ASSERT_TRUE(runner.RunUntil([&] { return !first.data.empty(); }));
  EXPECT_EQ(first.data, serials[0] + "\n");

  point("two.pem");
  http.InvalidateToken();  // the next look at the pair reads the files (as after a 401)
  std::optional<std::string> who;
  HttpRequest whoami;
  whoami.path = "/whoami";
  http.Start(whoami, [&](base::Status s, HttpResponse r) {
    EXPECT_TRUE(s.ok()) << s.message();
    who = r.body;
  });
  ASSERT_TRUE(runner.RunUntil([&] { return who.has_value() && first.end.has_value(); }));
  EXPECT_NE(first.end->message().find("client certificate changed"), std::string::npos)
      << first.end->message();
  EXPECT_EQ(*who, serials[1] + " connection 2") << "the connection that noticed the rotation";
  EXPECT_EQ(http.stats().connections_opened, 2);

  // The watch's owner reconnects at once, with the new pair, and the watch stays.
  Watch second;
  start_watch(&second);
  ASSERT_TRUE(runner.RunUntil([&] { return !second.data.empty() || second.end.has_value(); }));
  EXPECT_EQ(second.data, serials[1] + "\n");
  runner.RunUntil([] { return false; }, std::chrono::milliseconds(300));
  EXPECT_FALSE(second.end.has_value()) << second.end->message();
}

// A CA file changed in place: the transport's next connection verifies against the new content
// (it refused the server before, and takes it after, over HTTP/2).
TEST(NativeHttp2CertTest, NewConnectionsVerifyAgainstAChangedCaFile) {
  kube_testing::TestApiServerProcess pki;
  ASSERT_TRUE(pki.Start().ok());
  kube_testing::TestApiServerProcess other;  // a CA that did not sign pki's server certificate
  ASSERT_TRUE(other.Start().ok());
  const std::string client = pki.dir() + "/client.pem";
  ASSERT_EQ(pki.Admin("POST", "issue-client-cert", {{"path", client}, {"user", "u"}}).code, 200);
  const std::string ca_file = pki.dir() + "/bundle.crt";
  auto write_ca = [&](const std::string& from) {
    std::ofstream(ca_file + ".new") << ReadFile(from);
    std::filesystem::rename(ca_file + ".new", ca_file);
  };
  write_ca(other.ca_file());
  H2CertServer server(pki);
  vmtest::TestLoop runner;
  Credentials creds;
  creds.server = "https://127.0.0.1:" + std::to_string(server.port);
  creds.tls.ca_file = ca_file;
  creds.tls.ca_pem = ReadFile(ca_file);
  creds.tls.client_cert_pem = creds.tls.client_key_pem = ReadFile(client);
  HttpClientOptions options;
  options.native_http2 = true;
  options.ca_check_interval = std::chrono::milliseconds(50);
  auto created = HttpClient::Create(runner.get(), creds, options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  HttpClient& http = **created;
  auto whoami = [&] {
    std::optional<base::Status> result;
    HttpResponse response;
    HttpRequest request;
    request.path = "/whoami";
    http.Start(request, [&](base::Status s, HttpResponse r) {
      result = s;
      response = r;
    });
    EXPECT_TRUE(runner.RunUntil([&] { return result.has_value(); }));
    return std::make_pair(result.value_or(base::Status::Error("no answer")), response);
  };
  const base::Status refused = whoami().first;
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("not trusted"), std::string::npos) << refused.message();
  write_ca(pki.ca_file());
  std::optional<HttpResponse> answered;
  for (int attempt = 0; attempt < 400 && !answered; ++attempt) {
    auto [status, response] = whoami();
    if (status.ok()) {
      answered = response;
    } else {
      runner.RunFor(std::chrono::milliseconds(50));
    }
  }
  ASSERT_TRUE(answered.has_value()) << "the changed CA file was never used";
  EXPECT_EQ(answered->http_major, 2);
  EXPECT_EQ(answered->status, 200);
}

// A daemon stops by cancelling its watches and letting uv_run return once nothing is left: an
// open but unused connection (and its idle timer) must not keep the loop running.
TEST_F(NativeHttp2Test, AnIdleConnectionDoesNotKeepTheLoopRunning) {
  auto http = Client(Front());
  bool headed = false;
  StreamCallbacks stream;
  stream.on_headers = [&](const HttpResponse&) { headed = true; };
  auto watch = http->Start(
      Watch("idle"), [](base::Status, HttpResponse) {}, std::move(stream));
  ASSERT_TRUE(runner_.RunUntil([&] { return headed; }));
  // While a request is open the loop runs...
  EXPECT_FALSE(runner_.RunUntilIdle(std::chrono::milliseconds(300)));
  http->Cancel(watch);
  // ...and once none is, it ends, the connection still open for the next request.
  EXPECT_TRUE(runner_.RunUntilIdle(std::chrono::seconds(5)));
  EXPECT_EQ(http->stats().open_connections, 1u);
  auto [ok, after] = Fetch(*http, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(after.status, 200);
  EXPECT_TRUE(runner_.RunUntilIdle(std::chrono::seconds(5)));
  EXPECT_EQ(http->stats().connections_opened, 1);
}

TEST_F(NativeHttp2Test, ARequestTimesOutAndTheConnectionCarriesOn) {
  auto http = Client(Front());
  HttpRequest slow = Watch("t");
  slow.timeout = std::chrono::milliseconds(300);
  auto [status, response] = Fetch(*http, slow);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("timed out after 300 ms"), std::string::npos) << status.message();
  auto [ok, after] = Fetch(*http, Get("/api/v1/namespaces/default/configmaps"));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(http->stats().connections_opened, 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, Http2Test, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Native" : "Libcurl";
                         });

}  // namespace
}  // namespace kubeclient
