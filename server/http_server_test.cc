#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/http_head.h"

namespace server {
namespace {

using std::chrono::milliseconds;

// A raw client connection: what goes over the wire, byte for byte.
class Client {
 public:
  explicit Client(const std::string& bound) {
    const size_t colon = bound.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(bound.substr(colon + 1))));
    ::inet_pton(AF_INET, bound.substr(0, colon).c_str(), &sa.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  void Send(std::string_view data) {
    ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }

  // One answer: the head (through the empty line) and Content-Length bytes of body (none when
  // `head_only`). "" when the connection closed or nothing came within `wait`.
  struct Answer {
    std::string head;
    std::string body;
    int status = 0;
  };
  Answer Read(bool head_only = false, milliseconds wait = milliseconds(10000)) {
    Answer a;
    base::HttpResponseHead head;
    std::string why;
    base::HttpHeadParse parsed;
    while ((parsed = base::ParseHttpResponseHead(buffer_, &head, &why)) ==
           base::HttpHeadParse::kIncomplete) {
      if (!Fill(wait)) return a;
    }
    if (parsed != base::HttpHeadParse::kComplete) {
      ADD_FAILURE() << "not an HTTP/1.x answer: " << why;
      return a;
    }
    std::optional<uint64_t> content_length;
    EXPECT_TRUE(base::HttpContentLength(head.fields, &content_length, &why)) << why;
    a.status = head.status_line.status;
    const size_t length = head_only ? 0 : content_length.value_or(0);
    a.head = buffer_.substr(0, head.size);
    buffer_.erase(0, head.size);
    while (buffer_.size() < length) {
      if (!Fill(wait)) return a;
    }
    a.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return a;
  }

  // Whether the server closed the connection (EOF) within `wait`, with nothing more sent.
  bool ClosedByServer(milliseconds wait = milliseconds(10000)) {
    const size_t before = buffer_.size();
    while (Fill(wait)) {
    }
    return eof_ && buffer_.size() == before;
  }

 private:
  bool Fill(milliseconds wait) {
    pollfd p = {fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    Release();
    server_.reset();
  }

  // Two listeners, with these connection budgets; the handler echoes listener, method, path and
  // query, and /block waits for Release().
  void Start(HttpServer::Options options = {}, size_t first_budget = 32,
             size_t second_budget = 32) {
    std::vector<HttpServer::Listener> listeners;
    for (std::string* bound : {&first_, &second_}) {
      auto fd = HttpServer::Listen("127.0.0.1:0", bound);
      ASSERT_TRUE(fd.ok()) << fd.status().message();
      listeners.push_back({*fd, bound == &first_ ? first_budget : second_budget});
    }
    auto started = HttpServer::Start(
        std::move(listeners),
        [this](size_t listener, const HttpRequest& r) -> HttpResponse {
          ++calls_;
          if (r.path == "/throw") throw std::runtime_error("handler failed");
          if (r.path == "/block") {
            std::unique_lock<std::mutex> lock(block_mu_);
            ++blocked_;
            block_cv_.notify_all();
            block_cv_.wait(lock, [this] { return released_; });
          }
          return {200, "text/plain",
                  std::to_string(listener) + " " + r.method + " " + r.path + " " + r.query};
        },
        options);
    ASSERT_TRUE(started.ok()) << started.status().message();
    server_ = std::move(started).value();
  }

  // Whether `n` handlers came to wait in /block (within 10 s).
  bool WaitBlocked(int n) {
    std::unique_lock<std::mutex> lock(block_mu_);
    return block_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return blocked_ >= n; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(block_mu_);
    released_ = true;
    block_cv_.notify_all();
  }

  // `n` connections to `bound`, each having had one request answered: idle keep-alive ones.
  std::vector<std::unique_ptr<Client>> IdleKeepAlive(const std::string& bound, int n) {
    std::vector<std::unique_ptr<Client>> out;
    const size_t before = server_->idle();
    const size_t evicted_before = server_->evicted();
    for (int i = 0; i < n; ++i) {
      auto c = std::make_unique<Client>(bound);
      c->Send("GET /idle HTTP/1.1\r\n\r\n");
      EXPECT_EQ(c->Read().status, 200);
      // Marked idle by the server before the next one comes, so "idle longest" is the order of
      // the clients (one evicted to make room for it is no longer idle).
      const auto expected = [&] {
        return before + static_cast<size_t>(i) + 1 - (server_->evicted() - evicted_before);
      };
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (server_->idle() < expected() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_EQ(server_->idle(), expected()) << "connection " << i;
      out.push_back(std::move(c));
    }
    return out;
  }

  std::string first_, second_;
  std::atomic<int> calls_{0};
  std::mutex block_mu_;
  std::condition_variable block_cv_;
  int blocked_ = 0;        // guarded by block_mu_
  bool released_ = false;  // guarded by block_mu_
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, KeepAliveAndPipelinedRequestsOnOneConnection) {
  Start();
  Client c(first_);
  ASSERT_TRUE(c.connected());
  c.Send("GET /a?x HTTP/1.1\r\nHost: t\r\n\r\n");
  Client::Answer a = c.Read();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "0 GET /a x");
  EXPECT_NE(a.head.find("Content-Type: text/plain\r\n"), std::string::npos) << a.head;
  EXPECT_NE(a.head.find("Cache-Control: no-store\r\n"), std::string::npos) << a.head;
  EXPECT_NE(a.head.find("\r\nDate: "), std::string::npos) << a.head;
  EXPECT_EQ(a.head.find("Connection: close"), std::string::npos) << a.head;
  // Two requests in one write: two answers, in order.
  c.Send("GET /b HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\n\r\n");
  EXPECT_EQ(c.Read().body, "0 GET /b ");
  EXPECT_EQ(c.Read().body, "0 GET /c ");
  Client other(second_);
  other.Send("GET /d HTTP/1.1\r\n\r\n");
  EXPECT_EQ(other.Read().body, "1 GET /d ");
}

TEST_F(HttpServerTest, HeadGetsTheHeadOnly) {
  Start();
  Client c(first_);
  c.Send("HEAD /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
  Client::Answer a = c.Read(/*head_only=*/true);
  EXPECT_EQ(a.status, 200);
  EXPECT_NE(a.head.find("Content-Length: 10\r\n"), std::string::npos) << a.head;
  // What follows is the next answer, not a body.
  Client::Answer b = c.Read();
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body, "0 GET /b ");
}

TEST_F(HttpServerTest, Http10ClosesUnlessAskedToKeepAlive) {
  Start();
  Client c(first_);
  c.Send("GET /a HTTP/1.0\r\n\r\n");
  Client::Answer a = c.Read();
  EXPECT_EQ(a.body, "0 GET /a ");
  EXPECT_NE(a.head.find("Connection: close\r\n"), std::string::npos) << a.head;
  EXPECT_TRUE(c.ClosedByServer());
  Client k(first_);
  k.Send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  a = k.Read();
  EXPECT_NE(a.head.find("Connection: keep-alive\r\n"), std::string::npos) << a.head;
  k.Send("GET /b HTTP/1.0\r\n\r\n");
  EXPECT_EQ(k.Read().body, "0 GET /b ");
}

TEST_F(HttpServerTest, BadRequestsAreAnsweredAndClosedWithoutTheHandler) {
  Start();
  {
    Client c(first_);
    c.Send("GET healthz HTTP/1.1\r\n\r\n");
    Client::Answer a = c.Read();
    EXPECT_EQ(a.status, 400);
    EXPECT_EQ(a.body, "bad request: the target is not an absolute path\n");
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    Client c(first_);
    c.Send("GET / HTTP/2.0\r\n\r\n");
    EXPECT_EQ(c.Read().status, 505);
    EXPECT_TRUE(c.ClosedByServer());
  }
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpServerTest, AHeadPastTheLimitIs431) {
  HttpServer::Options o;
  o.max_head_bytes = 1024;
  Start(o);
  Client c(first_);
  c.Send("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'));
  Client::Answer a = c.Read();
  EXPECT_EQ(a.status, 431);
  EXPECT_EQ(a.body, "the request head is longer than 1024 bytes\n");
  EXPECT_TRUE(c.ClosedByServer());
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpServerTest, QuietConnectionsAreClosed) {
  HttpServer::Options o;
  o.idle_timeout = milliseconds(200);
  Start(o);
  Client idle(first_);
  Client begun(first_);
  begun.Send("GET / HTTP/1.1\r\nHost:");
  EXPECT_TRUE(idle.ClosedByServer());
  Client::Answer a = begun.Read();
  EXPECT_EQ(a.status, 408);
  EXPECT_TRUE(begun.ClosedByServer());
}

TEST_F(HttpServerTest, AHeadTrickledInTooSlowlyIs408) {
  HttpServer::Options o;
  o.head_timeout = milliseconds(300);
  Start(o);
  Client c(first_);
  // A byte every 50 ms: never quiet for the idle timeout (30 s), but the head takes too long.
  const std::string head = "GET /slow HTTP/1.1\r\nHost: " + std::string(40, 'x') + "\r\n\r\n";
  size_t sent = 0;
  for (; sent < head.size(); ++sent) {
    if (::send(c.fd(), &head[sent], 1, MSG_NOSIGNAL) != 1) break;  // closed by the server
    std::this_thread::sleep_for(milliseconds(50));
    pollfd p = {c.fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) break;  // the answer came
  }
  EXPECT_LT(sent, head.size());
  Client::Answer a = c.Read();
  EXPECT_EQ(a.status, 408);
  EXPECT_TRUE(c.ClosedByServer());
  EXPECT_EQ(calls_.load(), 0);
  // A head sent at once on a fresh connection is served.
  Client quick(first_);
  quick.Send(head);
  EXPECT_EQ(quick.Read().body, "0 GET /slow ");
}

TEST_F(HttpServerTest, AFullBudgetOnOneListenerLeavesTheOtherServed) {
  HttpServer::Options o;
  o.idle_timeout = std::chrono::hours(1);
  Start(o, /*first_budget=*/2, /*second_budget=*/4);
  // More idle connections than its budget on the second listener (the debug one, say), each
  // surely accepted: it had an answer.
  std::vector<std::unique_ptr<Client>> idle = IdleKeepAlive(second_, 6);
  // The first listener (the probes') answers at once, on as many connections as its budget.
  auto probe = [this] {
    Client a(first_);
    Client b(first_);
    a.Send("GET /healthz HTTP/1.1\r\n\r\n");
    b.Send("GET /healthz HTTP/1.1\r\n\r\n");
    EXPECT_EQ(a.Read(false, milliseconds(2000)).body, "0 GET /healthz ");
    EXPECT_EQ(b.Read(false, milliseconds(2000)).body, "0 GET /healthz ");
  };
  probe();
  // Then the second listener's budget all running the handler, which nothing may close: still.
  std::vector<std::unique_ptr<Client>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<Client>(second_));
    busy.back()->Send("GET /block HTTP/1.1\r\n\r\n");
  }
  ASSERT_TRUE(WaitBlocked(4));
  probe();
  // A newcomer on the second listener is refused.
  Client refused(second_);
  EXPECT_TRUE(refused.ClosedByServer(milliseconds(2000)));
  EXPECT_GE(server_->refused(), 1u);
  Release();
  for (auto& c : busy) EXPECT_EQ(c->Read().body, "1 GET /block ");
}

TEST_F(HttpServerTest, ALineEndTrickleIs408WithinTheHeadTimeout) {
  HttpServer::Options o;
  o.head_timeout = milliseconds(300);
  Start(o);
  Client c(first_);
  // An empty line every 50 ms: never quiet for the idle timeout (30 s), and never a request
  // line (the parser skips empty lines), for up to 3 s: ten times the head timeout.
  int sent = 0;
  for (; sent < 60; ++sent) {
    if (::send(c.fd(), "\r\n", 2, MSG_NOSIGNAL) != 2) break;  // closed by the server
    std::this_thread::sleep_for(milliseconds(50));
    pollfd p = {c.fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) break;  // the answer came
  }
  EXPECT_LT(sent, 60) << "still open after trickling line ends for 3 s";
  Client::Answer a = c.Read(false, milliseconds(1000));
  EXPECT_EQ(a.status, 408);
  EXPECT_TRUE(c.ClosedByServer(milliseconds(1000)));
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpServerTest, AFullBudgetOfIdleConnectionsMakesRoomForANewOne) {
  HttpServer::Options o;
  o.idle_timeout = std::chrono::hours(1);
  Start(o, /*first_budget=*/3);
  std::vector<std::unique_ptr<Client>> idle = IdleKeepAlive(first_, 3);
  Client fresh(first_);
  fresh.Send("GET /new HTTP/1.1\r\n\r\n");
  EXPECT_EQ(fresh.Read(false, milliseconds(2000)).body, "0 GET /new ");
  // The one idle longest was closed (without an answer); the others still serve.
  EXPECT_TRUE(idle[0]->ClosedByServer(milliseconds(2000)));
  for (size_t i = 1; i < idle.size(); ++i) {
    idle[i]->Send("GET /again HTTP/1.1\r\n\r\n");
    EXPECT_EQ(idle[i]->Read(false, milliseconds(2000)).body, "0 GET /again ");
  }
  EXPECT_EQ(server_->evicted(), 1u);
  EXPECT_EQ(server_->refused(), 0u);
}

TEST_F(HttpServerTest, IdleConnectionsGoBeforeAHeadInProgress) {
  HttpServer::Options o;
  o.idle_timeout = std::chrono::hours(1);
  Start(o, /*first_budget=*/3);
  // The oldest connection is in the middle of a head; two newer ones idle.
  Client begun(first_);
  begun.Send("GET /begun HTTP/1.1\r\n");
  std::vector<std::unique_ptr<Client>> idle = IdleKeepAlive(first_, 2);
  Client fresh(first_);
  fresh.Send("GET /new HTTP/1.1\r\n\r\n");
  EXPECT_EQ(fresh.Read(false, milliseconds(2000)).body, "0 GET /new ");
  EXPECT_TRUE(idle[0]->ClosedByServer(milliseconds(2000)));
  begun.Send("\r\n");
  EXPECT_EQ(begun.Read(false, milliseconds(2000)).body, "0 GET /begun ");
  EXPECT_EQ(server_->evicted(), 1u);
}

TEST_F(HttpServerTest, AFullBudgetOfHeadsInProgressGivesWayToANewConnection) {
  // Refusing the newcomer here would let anyone who sends a byte now and then, and reconnects
  // when closed, hold the listener for good: the head waiting longest is closed instead.
  HttpServer::Options o;
  o.idle_timeout = std::chrono::hours(1);
  Start(o, /*first_budget=*/3);
  std::vector<std::unique_ptr<Client>> begun;
  for (int i = 0; i < 3; ++i) {
    begun.push_back(std::make_unique<Client>(first_));
    begun.back()->Send("GET /begun" + std::to_string(i) + " HTTP/1.1\r\nHost:");
    std::this_thread::sleep_for(milliseconds(20));  // an order of arrival
  }
  Client fresh(first_);
  fresh.Send("GET /new HTTP/1.1\r\n\r\n");
  EXPECT_EQ(fresh.Read(false, milliseconds(2000)).body, "0 GET /new ");
  EXPECT_TRUE(begun[0]->ClosedByServer(milliseconds(2000)));
  for (int i = 1; i < 3; ++i) {
    begun[i]->Send(" t\r\n\r\n");
    EXPECT_EQ(begun[i]->Read(false, milliseconds(2000)).body,
              "0 GET /begun" + std::to_string(i) + " ");
  }
  EXPECT_EQ(server_->evicted(), 1u);
  EXPECT_EQ(server_->refused(), 0u);
}

TEST_F(HttpServerTest, ANewConnectionIsRefusedOnlyWhileTheBudgetRunsTheHandler) {
  Start({}, /*first_budget=*/2);
  Client a(first_);
  Client b(first_);
  a.Send("GET /block HTTP/1.1\r\n\r\n");
  b.Send("GET /block HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(WaitBlocked(2));
  Client refused(first_);
  EXPECT_TRUE(refused.ClosedByServer());
  EXPECT_EQ(server_->refused(), 1u);
  Release();
  EXPECT_EQ(a.Read().body, "0 GET /block ");
  EXPECT_EQ(b.Read().body, "0 GET /block ");
  // Both idle now: room for a newcomer.
  Client again(first_);
  again.Send("GET /3 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(again.Read().body, "0 GET /3 ");
  EXPECT_EQ(server_->refused(), 1u);
}

TEST_F(HttpServerTest, AHandlerThatThrowsIsA500AndTheServerGoesOn) {
  Start();
  Client c(first_);
  c.Send("GET /throw HTTP/1.1\r\n\r\n");
  Client::Answer a = c.Read();
  EXPECT_EQ(a.status, 500);
  EXPECT_EQ(a.body, "internal error\n");
  c.Send("GET /ok HTTP/1.1\r\n\r\n");
  EXPECT_EQ(c.Read().body, "0 GET /ok ");
}

TEST_F(HttpServerTest, ARequestWithABodyIsAnsweredInFullThenClosed) {
  Start();
  Client c(first_);
  c.Send("POST /p HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(60000, 'b'));
  Client::Answer a = c.Read();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "0 POST /p ");
  EXPECT_NE(a.head.find("Connection: close\r\n"), std::string::npos) << a.head;
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServerTest, StoppingWakesIdleConnectionsAndWaitsForARunningHandler) {
  HttpServer::Options o;
  o.idle_timeout = std::chrono::hours(1);
  Start(o);
  Client idle(first_);
  idle.Send("GET /a HTTP/1.1\r\n\r\n");
  ASSERT_EQ(idle.Read().status, 200);
  Client busy(first_);
  busy.Send("GET /block HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(WaitBlocked(1));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_.reset();
    stopped = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(stopped.load()) << "the server stopped under a running handler";
  Release();
  stopper.join();
  // The idle connection did not hold the stop for its hour.
  EXPECT_TRUE(idle.ClosedByServer(milliseconds(1000)));
}

TEST(HttpServerListenTest, ErrorsNameTheAddressAndWhy) {
  std::string bound;
  auto bad = HttpServer::Listen("localhost:80", &bound);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"localhost:80\""), std::string::npos);
  auto first = HttpServer::Listen("127.0.0.1:0", &bound);
  ASSERT_TRUE(first.ok());
  std::string again;
  auto taken = HttpServer::Listen(bound, &again);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().message(), bound + ": cannot listen: Address already in use");
  auto elsewhere = HttpServer::Listen("192.0.2.1:0", &again);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.status().message(),
            "192.0.2.1:0: cannot listen: Cannot assign requested address (not an address of "
            "this host)");
  ::close(*first);
}

}  // namespace
}  // namespace server
