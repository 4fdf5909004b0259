#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

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
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(wait)) return a;
    }
    a.head = buffer_.substr(0, end + 4);
    buffer_.erase(0, end + 4);
    a.status = std::stoi(a.head.substr(9, 3));
    const size_t cl = a.head.find("Content-Length: ");
    const size_t length =
        head_only || cl == std::string::npos ? 0 : std::stoul(a.head.substr(cl + 16));
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
  // Two listeners; the handler echoes listener, method, path and query.
  void Start(HttpServer::Options options = {}) {
    std::vector<int> fds;
    for (std::string* bound : {&first_, &second_}) {
      auto fd = HttpServer::Listen("127.0.0.1:0", bound);
      ASSERT_TRUE(fd.ok()) << fd.status().message();
      fds.push_back(*fd);
    }
    auto started = HttpServer::Start(
        std::move(fds),
        [this](size_t listener, const HttpRequest& r) -> HttpResponse {
          ++calls_;
          if (r.path == "/throw") throw std::runtime_error("handler failed");
          if (r.path == "/block") {
            blocked_.set_value();
            release_.get_future().wait();
          }
          return {200, "text/plain",
                  std::to_string(listener) + " " + r.method + " " + r.path + " " + r.query};
        },
        options);
    ASSERT_TRUE(started.ok()) << started.status().message();
    server_ = std::move(started).value();
  }

  std::string first_, second_;
  std::atomic<int> calls_{0};
  std::promise<void> blocked_, release_;
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

TEST_F(HttpServerTest, ConnectionsPastTheLimitAreRefusedUntilOneCloses) {
  HttpServer::Options o;
  o.max_connections = 2;
  Start(o);
  auto first = std::make_unique<Client>(first_);
  Client second(second_);
  first->Send("GET /1 HTTP/1.1\r\n\r\n");
  second.Send("GET /2 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(first->Read().status, 200);
  ASSERT_EQ(second.Read().status, 200);
  Client third(first_);
  EXPECT_TRUE(third.ClosedByServer());
  EXPECT_EQ(server_->refused(), 1u);
  first.reset();
  // The first connection's thread ends on its EOF; then there is room again.
  for (int i = 0; i < 100; ++i) {
    Client again(first_);
    again.Send("GET /3 HTTP/1.1\r\n\r\n");
    if (again.Read(false, milliseconds(2000)).body == "0 GET /3 ") return;
    std::this_thread::sleep_for(milliseconds(20));
  }
  FAIL() << "no room after a connection closed";
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
  blocked_.get_future().wait();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_.reset();
    stopped = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(stopped.load()) << "the server stopped under a running handler";
  release_.set_value();
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
