#include "podconfig/http_source.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/http_head.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace podconfig {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using vmtest::TestLoop;

// A minimal HTTP/1.0 server on 127.0.0.1: answers every request with the configured status and
// body, after an optional delay, and closes the connection.
class FakeManifestServer {
 public:
  FakeManifestServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeManifestServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/pods"; }
  void Respond(int status, std::string body, int delay_ms = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = std::move(body);
    delay_ms_ = delay_ms;
  }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string request;
      char buf[4096];
      base::HttpRequestHead head;
      std::string why;
      while (base::ParseHttpRequestHead(request, &head, &why) == base::HttpHeadParse::kIncomplete) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      ++requests_;
      int status, delay_ms;
      std::string body;
      {
        std::lock_guard<std::mutex> lock(mu_);
        status = status_;
        body = body_;
        delay_ms = delay_ms_;
      }
      for (int waited = 0; waited < delay_ms && !stop_; waited += 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::string response = "HTTP/1.0 " + std::to_string(status) +
                             " X\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body;
      for (size_t off = 0; off < response.size();) {
        ssize_t n = send(c, response.data() + off, response.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  int status_ = 200;
  std::string body_;
  int delay_ms_ = 0;
};

constexpr char kPodList[] = R"({"kind":"PodList","apiVersion":"v1","items":[
  {"metadata":{"name":"a"}},{"metadata":{"name":"b","namespace":"shop"}}]})";
constexpr char kSinglePodYaml[] = "apiVersion: v1\nkind: Pod\nmetadata: {name: solo}\n";

class HttpSourceTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    HttpSourceOptions options;
    options.url = server_.url();
    options.node_name = "node-1";
    options.poll_interval = std::chrono::milliseconds(20);
    options.timeout = timeout;
    base::Status s = source_.Start(loop_.get(), options, [this](std::vector<PodPtr> pods) {
      ++deliveries_;
      last_ = std::move(pods);
    });
    ASSERT_TRUE(s.ok()) << s.message();
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& p : last_.value_or(std::vector<PodPtr>{})) {
      names.push_back(p->metadata.namespace_ + "/" + p->metadata.name);
    }
    return names;
  }
  // Lets at least `n` more fetches happen.
  void WaitForFetches(int n) {
    const int target = server_.requests() + n;
    ASSERT_TRUE(loop_.RunUntil([&] { return server_.requests() >= target; }));
    loop_.RunFor(std::chrono::milliseconds(10));  // the last response is applied
  }

  FakeManifestServer server_;
  TestLoop loop_;
  HttpSource source_;
  int deliveries_ = 0;
  std::optional<std::vector<PodPtr>> last_;
};

TEST_F(HttpSourceTest, PodListBecomesTheSourcesPods) {
  server_.Respond(200, kPodList);
  Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return last_.has_value(); }));
  EXPECT_THAT(Names(), ElementsAre("default/a-node-1", "shop/b-node-1"));
  EXPECT_EQ(last_->at(0)->spec.node_name, "node-1");
  EXPECT_EQ(last_->at(0)->metadata.uid.size(), 32u);
}

TEST_F(HttpSourceTest, SinglePodThenChangedBody) {
  server_.Respond(200, kSinglePodYaml);
  Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return last_.has_value(); }));
  EXPECT_THAT(Names(), ElementsAre("default/solo-node-1"));
  server_.Respond(200, kPodList);
  ASSERT_TRUE(loop_.RunUntil([&] { return Names().size() == 2; }));
}

TEST_F(HttpSourceTest, IdenticalBytesAreDeliveredOnce) {
  server_.Respond(200, kPodList);
  Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return last_.has_value(); }));
  WaitForFetches(3);
  EXPECT_EQ(deliveries_, 1);
}

TEST_F(HttpSourceTest, EmptyBodyIsSeenWithNoPods) {
  server_.Respond(200, kPodList);
  Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return Names().size() == 2; }));
  server_.Respond(200, "");
  ASSERT_TRUE(loop_.RunUntil([&] { return last_->empty(); }));
  const int after_empty = deliveries_;
  WaitForFetches(2);
  EXPECT_EQ(deliveries_, after_empty) << "an unchanged empty body is not delivered again";
}

TEST_F(HttpSourceTest, FirstResponseEmptyIsSeen) {
  server_.Respond(200, "");
  Start();
  ASSERT_TRUE(loop_.RunUntil([&] { return last_.has_value(); }));
  EXPECT_THAT(*last_, IsEmpty());
}

struct KeepStateCase {
  const char* name;
  int status;
  std::string body;
  int delay_ms;
};

void PrintTo(const KeepStateCase& c, std::ostream* os) { *os << c.name; }

class HttpSourceKeepsStateTest : public HttpSourceTest,
                                 public ::testing::WithParamInterface<KeepStateCase> {};

TEST_P(HttpSourceKeepsStateTest, FailureKeepsTheLastPods) {
  server_.Respond(200, kPodList);
  Start(std::chrono::milliseconds(200));
  ASSERT_TRUE(loop_.RunUntil([&] { return Names().size() == 2; }));
  const int before = deliveries_;
  server_.Respond(GetParam().status, GetParam().body, GetParam().delay_ms);
  WaitForFetches(2);
  if (GetParam().delay_ms > 0) loop_.RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(deliveries_, before);
  EXPECT_EQ(Names().size(), 2u);
  // Recovery: a good, different body is delivered again.
  server_.Respond(200, kSinglePodYaml);
  ASSERT_TRUE(loop_.RunUntil([&] { return Names().size() == 1; }));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HttpSourceKeepsStateTest,
    ::testing::Values(KeepStateCase{"not_found", 404, "no", 0},
                      KeepStateCase{"server_error", 500, kPodList, 0},
                      KeepStateCase{"invalid_manifest", 200, "kind: Pod\nmetadata: {name: B_}\n",
                                    0},
                      KeepStateCase{"not_a_pod", 200, "kind: ConfigMap\nmetadata: {name: c}\n", 0},
                      KeepStateCase{"timeout", 200, kSinglePodYaml, 1000},
                      // A comment: it would decode to no pods if the 10 MiB limit were not kept.
                      KeepStateCase{"too_large", 200, std::string((10 << 20) + 1, '#'), 0}),
    [](const auto& p) { return std::string(p.param.name); });

// Every line about a body over the 10 MiB limit names the URL, as logs may show it (its query
// string, which may carry a credential, hidden).
TEST(HttpSourceTooLargeTest, TheSizeErrorNamesTheRedactedUrl) {
  vmtest::LogCapture logs;
  FakeManifestServer server;
  server.Respond(200, std::string((10 << 20) + 1, '#'));
  TestLoop loop;
  HttpSource source;
  HttpSourceOptions options{server.url() + "?token=hunter2", "node-1",
                            std::chrono::milliseconds(20), std::chrono::seconds(10)};
  ASSERT_TRUE(source.Start(loop.get(), options, [](std::vector<PodPtr>) {}).ok());
  ASSERT_TRUE(loop.RunUntil([&] { return logs.text().find("larger than") != std::string::npos; }));
  loop.RunFor(std::chrono::milliseconds(50));
  source.Stop();
  loop.RunFor(std::chrono::milliseconds(10));
  const std::string text = logs.text();
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  std::istringstream lines(text);
  int size_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("larger than") == std::string::npos) continue;
    ++size_lines;
    EXPECT_NE(line.find(server.url()), std::string::npos) << line;
  }
  EXPECT_GT(size_lines, 0);
}

TEST(HttpSourceUnreachableTest, ConnectionRefusedDeliversNothing) {
  TestLoop loop;
  int port;
  {
    FakeManifestServer closed;  // a port that was free a moment ago
    port = std::stoi(closed.url().substr(17));
  }
  HttpSource source;
  int deliveries = 0;
  HttpSourceOptions options{"http://127.0.0.1:" + std::to_string(port) + "/pods", "node-1",
                            std::chrono::milliseconds(20), std::chrono::seconds(1)};
  ASSERT_TRUE(source.Start(loop.get(), options, [&](std::vector<PodPtr>) { ++deliveries; }).ok());
  loop.RunFor(std::chrono::milliseconds(200));
  EXPECT_EQ(deliveries, 0);
}

TEST(HttpSourceOptionsTest, RejectsOtherSchemesAndEmptyNodeName) {
  TestLoop loop;
  HttpSource source;
  auto sink = [](std::vector<PodPtr>) {};
  EXPECT_FALSE(source.Start(loop.get(), {"file:///etc/passwd", "n"}, sink).ok());
  EXPECT_FALSE(source.Start(loop.get(), {"ftp://127.0.0.1/", "n"}, sink).ok());
  EXPECT_FALSE(source.Start(loop.get(), {"http://127.0.0.1/", ""}, sink).ok());
}

TEST_F(HttpSourceTest, StopAbortsATransferInFlight) {
  server_.Respond(200, kPodList, 60'000);
  Start(std::chrono::minutes(2));
  ASSERT_TRUE(loop_.RunUntil([&] { return server_.requests() > 0; }));
  source_.Stop();
  // The server would answer in a minute: the loop only runs out of work this soon when Stop ended
  // the transfer.
  EXPECT_TRUE(loop_.RunUntilIdle());
  EXPECT_EQ(deliveries_, 0);
}

}  // namespace
}  // namespace podconfig
