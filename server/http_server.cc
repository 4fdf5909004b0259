#include "server/http_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>

#include "base/bind_address.h"
#include "base/catch_all.h"

namespace server {
namespace {

constexpr int kListenBacklog = 64;
// After accept() failed for want of descriptors or memory: how long before trying again.
constexpr int kAcceptRetryMs = 100;
// A closing connection's unread input is drained this long at most (RFC 9112 9.6: closing with
// input unread would reset the connection and could lose the answer at the client).
constexpr int kLingerMs = 1000;
constexpr size_t kLingerBytes = 64 * 1024;

std::string Errno(int err) { return std::strerror(err); }

void Log(spdlog::level::level_enum level, const std::string& message) {
  base::CatchAll("admin server log", [&] {
    spdlog::log(level, "admin server: {}", message);
  }).IgnoreError();
}

std::string HttpDate() {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  const size_t n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

std::string ResponseHead(const HttpResponse& r, bool keep_alive, int minor_version) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " ";
  head += ReasonPhrase(r.status);
  head += "\r\nDate: " + HttpDate() + "\r\nContent-Type: " + r.content_type +
          "\r\nContent-Length: " + std::to_string(r.body.size()) +
          "\r\nCache-Control: no-store\r\n";
  if (r.status == 405) head += "Allow: GET, HEAD\r\n";
  if (!keep_alive) {
    head += "Connection: close\r\n";
  } else if (minor_version == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  return head;
}

}  // namespace

base::Result<int> HttpServer::Listen(const std::string& address, std::string* bound) {
  auto addr = base::ParseBindAddress(address);
  if (!addr.ok()) return addr.status();
  const int fd =
      ::socket(addr->ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return base::Status::Error(address + ": cannot listen: socket: " + Errno(errno));
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    return base::Status::Error(address + ": cannot listen: " + what + Errno(err) +
                               (err == EADDRNOTAVAIL ? " (not an address of this host)" : ""));
  };
  // A restart binds again at once, whatever connections of the last run are in TIME_WAIT.
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return fail("SO_REUSEADDR: ");
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr->addr), addr->len) != 0) return fail("");
  if (::listen(fd, kListenBacklog) != 0) return fail("listen: ");
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    return fail("getsockname: ");
  }
  const int port =
      ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  *bound = base::FormatBindAddress(addr->host, addr->ipv6, port);
  return fd;
}

HttpServer::HttpServer(std::vector<int> listen_fds, Handler handler, Options options)
    : listen_fds_(std::move(listen_fds)), handler_(std::move(handler)), options_(options) {}

base::Result<std::unique_ptr<HttpServer>> HttpServer::Start(std::vector<int> listen_fds,
                                                            Handler handler, Options options) {
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(listen_fds), std::move(handler), options));
  server->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  server->reaped_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->stop_fd_ < 0 || server->reaped_fd_ < 0) {
    return base::Status::Error("admin server: eventfd: " + Errno(errno));
  }
  base::Status s = base::CatchAll("admin server start", [&] {
    server->acceptor_ = std::thread([p = server.get()] { p->AcceptLoop(); });
  });
  if (!s.ok()) return s;
  return server;
}

HttpServer::~HttpServer() {
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
  }
  if (acceptor_.joinable()) acceptor_.join();
  // The acceptor has stopped: no thread is added now.
  std::list<Connection> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections.swap(connections_);
  }
  for (Connection& c : connections) c.thread.join();
  for (int fd : listen_fds_) ::close(fd);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (reaped_fd_ >= 0) ::close(reaped_fd_);
}

size_t HttpServer::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

void HttpServer::AcceptLoop() {
  std::vector<pollfd> fds;
  for (int fd : listen_fds_) fds.push_back({fd, POLLIN, 0});
  fds.push_back({reaped_fd_, POLLIN, 0});
  fds.push_back({stop_fd_, POLLIN, 0});
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Log(spdlog::level::err, "poll: " + Errno(errno) + "; no longer accepting");
      return;
    }
    if (fds.back().revents != 0) return;
    if (fds[fds.size() - 2].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t r = ::read(reaped_fd_, &count, sizeof(count));
      Reap();
    }
    for (size_t i = 0; i < listen_fds_.size(); ++i) {
      if (fds[i].revents != 0) Accept(listen_fds_[i], i);
    }
  }
}

void HttpServer::Accept(int listen_fd, size_t listener) {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // Out of descriptors or memory: the pending connection stays queued; try again shortly
      // rather than spin on a listener that stays readable. Said once per spell.
      if (!accept_failing_) {
        Log(spdlog::level::warn, "accept: " + Errno(err) + "; trying again every 100 ms");
      }
      accept_failing_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(kAcceptRetryMs));
      return;
    }
    if (accept_failing_) Log(spdlog::level::info, "accepting connections again");
    accept_failing_ = false;
    std::unique_lock<std::mutex> lock(mu_);
    if (open_ >= options_.max_connections) {
      ++refused_;
      lock.unlock();
      ::close(fd);
      Log(spdlog::level::debug,
          "connection refused: " + std::to_string(options_.max_connections) + " already open");
      continue;
    }
    Connection& c = connections_.emplace_back();
    ++open_;
    base::Status s = base::CatchAll("admin server connection", [&] {
      c.thread = std::thread([this, fd, listener, conn = &c] {
        Serve(fd, listener);
        {
          std::lock_guard<std::mutex> done_lock(mu_);
          conn->done = true;
          --open_;
        }
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t w = ::write(reaped_fd_, &one, sizeof(one));
      });
    });
    if (!s.ok()) {
      connections_.pop_back();
      --open_;
      lock.unlock();
      ::close(fd);
      Log(spdlog::level::warn, s.message());
    }
  }
}

void HttpServer::Reap() {
  std::list<Connection> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (it->done) ended.splice(ended.end(), connections_, it);
      it = next;
    }
  }
  for (Connection& c : ended) c.thread.join();
}

bool HttpServer::WaitFor(int fd, short events, std::chrono::milliseconds timeout) const {
  pollfd fds[2] = {{fd, events, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    const int n = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(timeout.count(), 0)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || fds[1].revents != 0) return false;
    return true;  // the event, or an error or hang-up the next call reports
  }
}

bool HttpServer::SendAll(int fd, std::string_view data) const {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(fd, POLLOUT, options_.idle_timeout)) return false;
    } else {
      return false;
    }
  }
  return true;
}

void HttpServer::SendAndClose(int fd, std::string_view out) const {
  if (SendAll(fd, out)) {
    // Lingering close: stop sending, then read what the client still sends (a body never read),
    // so that closing does not reset the connection before the client has the answer.
    ::shutdown(fd, SHUT_WR);
    pollfd p = {fd, POLLIN, 0};
    char buf[4096];
    size_t drained = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kLingerMs);
    while (drained < kLingerBytes) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      drained += static_cast<size_t>(n);
    }
  }
  ::close(fd);
}

void HttpServer::FailAndClose(int fd, unsigned status, const std::string& body) const {
  const HttpResponse r{status, "text/plain; charset=utf-8", body};
  SendAndClose(fd, ResponseHead(r, false, 1) + r.body);
}

void HttpServer::Serve(int fd, size_t listener) {
  using Clock = std::chrono::steady_clock;
  std::string in;
  char buf[4096];
  // When the head being read must be complete; unset until its first byte.
  std::optional<Clock::time_point> head_deadline;
  for (;;) {
    HttpRequest request;
    size_t head_size = 0;
    std::string why;
    const HeadParse parsed = ParseRequestHead(in, &request, &head_size, &why);
    if (parsed == HeadParse::kIncomplete) {
      if (in.size() >= options_.max_head_bytes) {
        return FailAndClose(fd, 431,
                            "the request head is longer than " +
                                std::to_string(options_.max_head_bytes) + " bytes\n");
      }
      const bool begun = in.find_first_not_of("\r\n") != std::string::npos;
      if (begun && !head_deadline) head_deadline = Clock::now() + options_.head_timeout;
      if (begun && Clock::now() >= *head_deadline) return FailAndClose(fd, 408, "timed out\n");
      const std::chrono::milliseconds wait =
          begun ? std::min(options_.idle_timeout, std::chrono::ceil<std::chrono::milliseconds>(
                                                      *head_deadline - Clock::now()))
                : options_.idle_timeout;
      if (!WaitFor(fd, POLLIN, wait)) {
        // Quiet too long, the head too slow, or stopping. A request begun gets a 408; an idle
        // keep-alive connection just closes.
        if (begun) return FailAndClose(fd, 408, "timed out\n");
        break;
      }
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        in.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        break;  // closed by the client, or reset
      }
      continue;
    }
    if (parsed == HeadParse::kBad) {
      return FailAndClose(fd, 400, "bad request: " + why + "\n");
    }
    if (parsed == HeadParse::kVersion) {
      return FailAndClose(fd, 505, why + "\n");
    }
    in.erase(0, head_size);
    head_deadline.reset();
    HttpResponse response;
    base::Status s =
        base::CatchAll("admin server request", [&] { response = handler_(listener, request); });
    if (!s.ok()) {
      response = {500, "text/plain; charset=utf-8", "internal error\n"};
      Log(spdlog::level::err, s.message());
    }
    std::string out = ResponseHead(response, request.keep_alive, request.minor_version);
    if (request.method != "HEAD") out += response.body;
    if (!request.keep_alive) return SendAndClose(fd, out);
    if (!SendAll(fd, out)) break;
  }
  ::close(fd);
}

}  // namespace server
