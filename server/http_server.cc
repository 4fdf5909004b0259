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
// A listener's connections closed to make room and still ending, in budgets, past which a new
// connection is refused instead (http_server.h, Listener).
constexpr size_t kEndingBudgets = 2;

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

HttpServer::HttpServer(std::vector<Listener> listeners, Handler handler, Options options)
    : handler_(std::move(handler)), options_(options) {
  for (const Listener& l : listeners) {
    ListenerState& state = listeners_.emplace_back();
    state.fd = l.fd;
    state.max_connections = l.max_connections;
  }
}

base::Result<std::unique_ptr<HttpServer>> HttpServer::Start(std::vector<Listener> listeners,
                                                            Handler handler, Options options) {
  std::unique_ptr<HttpServer> server;
  base::Status s = base::CatchAll("admin server start", [&] {
    server.reset(new HttpServer(listeners, std::move(handler), options));
  });
  if (!s.ok()) {
    for (const Listener& l : listeners) ::close(l.fd);
    return s;
  }
  server->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  server->reaped_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->stop_fd_ < 0 || server->reaped_fd_ < 0) {
    return base::Status::Error("admin server: eventfd: " + Errno(errno));
  }
  s = base::CatchAll("admin server start", [&] {
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
  for (const ListenerState& l : listeners_) ::close(l.fd);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (reaped_fd_ >= 0) ::close(reaped_fd_);
}

size_t HttpServer::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

size_t HttpServer::evicted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_;
}

size_t HttpServer::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Connection& c : connections_) {
    if (!c.done && !c.evicted && c.fd >= 0 && c.wait == Wait::kIdle) ++n;
  }
  return n;
}

void HttpServer::AcceptLoop() {
  std::vector<pollfd> fds;
  for (const ListenerState& l : listeners_) fds.push_back({l.fd, POLLIN, 0});
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
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (fds[i].revents != 0) Accept(i);
    }
  }
}

bool HttpServer::EvictOne(size_t listener) {
  ListenerState& l = listeners_[listener];
  // Evicted threads end as soon as they run (they are never in the handler); twice the budget
  // still ending means they are not getting to run (a flood), and closing more would only add
  // threads.
  if (l.ending >= kEndingBudgets * l.max_connections) return false;
  Connection* victim = nullptr;
  for (Connection& c : connections_) {
    if (c.listener != listener || c.done || c.evicted || c.fd < 0 || c.wait == Wait::kHandler) {
      continue;
    }
    // Idle ones first, then the one waiting longest.
    if (victim == nullptr || (c.wait == Wait::kIdle && victim->wait != Wait::kIdle) ||
        (c.wait == victim->wait && c.since < victim->since)) {
      victim = &c;
    }
  }
  if (victim == nullptr) return false;
  // Wakes its thread wherever it waits on the socket (poll reports the hang-up; recv returns 0,
  // send fails); the thread closes the descriptor, after clearing victim->fd under mu_, so the
  // number shut down here is still this connection's.
  ::shutdown(victim->fd, SHUT_RDWR);
  victim->evicted = true;
  --l.live;
  ++l.ending;
  ++evicted_;
  return true;
}

void HttpServer::Accept(size_t listener) {
  ListenerState& l = listeners_[listener];
  for (;;) {
    const int fd = ::accept4(l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    if (l.live >= l.max_connections && !EvictOne(listener)) {
      ++refused_;
      lock.unlock();
      ::close(fd);
      Log(spdlog::level::debug, "connection refused: " + std::to_string(l.max_connections) +
                                    " open on listener " + std::to_string(listener) +
                                    " and none can be closed to make room");
      continue;
    }
    Connection& c = connections_.emplace_back();
    c.listener = listener;
    c.fd = fd;
    c.wait = Wait::kClient;
    c.since = Clock::now();
    ++l.live;
    base::Status s = base::CatchAll("admin server connection", [&] {
      c.thread = std::thread([this, fd, listener, conn = &c] {
        // Nothing thrown (out of memory) ends the daemon from here: the connection just closes.
        base::Status served =
            base::CatchAll("admin server connection", [&] { Serve(conn, fd, listener); });
        if (!served.ok()) Log(spdlog::level::err, served.message());
        {
          std::lock_guard<std::mutex> done_lock(mu_);
          // No shutdown() reaches this descriptor from here on: closing it below may free its
          // number for the next accept.
          conn->fd = -1;
          ListenerState& state = listeners_[listener];
          if (conn->evicted) {
            --state.ending;
          } else {
            --state.live;
          }
          conn->done = true;
        }
        ::close(fd);
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t w = ::write(reaped_fd_, &one, sizeof(one));
      });
    });
    if (!s.ok()) {
      connections_.pop_back();
      --l.live;
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

bool HttpServer::Mark(Connection* conn, Wait wait) {
  std::lock_guard<std::mutex> lock(mu_);
  conn->wait = wait;
  conn->since = Clock::now();
  return !conn->evicted;
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

void HttpServer::SendAndLinger(int fd, std::string_view out) const {
  if (!SendAll(fd, out)) return;
  // Lingering close: stop sending, then read what the client still sends (a body never read),
  // so that closing does not reset the connection before the client has the answer.
  ::shutdown(fd, SHUT_WR);
  pollfd p = {fd, POLLIN, 0};
  char buf[4096];
  size_t drained = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kLingerMs);
  while (drained < kLingerBytes) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

void HttpServer::Fail(int fd, unsigned status, const std::string& body) const {
  const HttpResponse r{status, "text/plain; charset=utf-8", body};
  SendAndLinger(fd, ResponseHead(r, false, 1) + r.body);
}

void HttpServer::Serve(Connection* conn, int fd, size_t listener) {
  std::string in;
  char buf[4096];
  // When the head being read must be complete; unset until its first byte (any byte: a client
  // sending only line ends, which the parser skips, is on the clock too).
  std::optional<Clock::time_point> head_deadline;
  // What the connection waits for, as last Marked (the acceptor starts it at kClient).
  Wait waiting = Wait::kClient;
  for (;;) {
    HttpRequest request;
    size_t head_size = 0;
    std::string why;
    const HeadParse parsed = ParseRequestHead(in, &request, &head_size, &why);
    if (parsed == HeadParse::kIncomplete) {
      if (in.size() >= options_.max_head_bytes) {
        return Fail(fd, 431,
                    "the request head is longer than " + std::to_string(options_.max_head_bytes) +
                        " bytes\n");
      }
      const bool begun = !in.empty();
      if (begun && !head_deadline) head_deadline = Clock::now() + options_.head_timeout;
      if (begun && Clock::now() >= *head_deadline) return Fail(fd, 408, "timed out\n");
      // Idle between requests, or waiting on the client for this one.
      if (begun && waiting == Wait::kIdle) {
        waiting = Wait::kClient;
        if (!Mark(conn, waiting)) return;
      }
      const std::chrono::milliseconds timeout =
          begun ? std::min(options_.idle_timeout, std::chrono::ceil<std::chrono::milliseconds>(
                                                      *head_deadline - Clock::now()))
                : options_.idle_timeout;
      if (!WaitFor(fd, POLLIN, timeout)) {
        // Quiet too long, the head too slow, or stopping. A request begun gets a 408; an idle
        // keep-alive connection just closes.
        if (begun) return Fail(fd, 408, "timed out\n");
        return;
      }
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        in.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        return;  // closed by the client, reset, or evicted
      }
      continue;
    }
    if (parsed == HeadParse::kBad) {
      return Fail(fd, 400, "bad request: " + why + "\n");
    }
    if (parsed == HeadParse::kVersion) {
      return Fail(fd, 505, why + "\n");
    }
    in.erase(0, head_size);
    head_deadline.reset();
    if (!Mark(conn, Wait::kHandler)) return;
    HttpResponse response;
    base::Status s =
        base::CatchAll("admin server request", [&] { response = handler_(listener, request); });
    if (!s.ok()) {
      response = {500, "text/plain; charset=utf-8", "internal error\n"};
      Log(spdlog::level::err, s.message());
    }
    // Sending: waiting on the client to take the answer.
    if (!Mark(conn, Wait::kClient)) return;
    std::string out = ResponseHead(response, request.keep_alive, request.minor_version);
    if (request.method != "HEAD") out += response.body;
    if (!request.keep_alive) return SendAndLinger(fd, out);
    if (!SendAll(fd, out)) return;
    // Pipelined bytes already read are the next request, begun; otherwise the connection idles.
    waiting = in.empty() ? Wait::kIdle : Wait::kClient;
    if (!Mark(conn, waiting)) return;
  }
}

}  // namespace server
