// HttpServer: a small HTTP/1.1 server for the admin endpoints, on plain sockets and threads, so
// that the daemon maps no HTTP or TLS library to answer its probes.
//
// Threads: one acceptor for all listeners, and one thread per open connection (at most
// Options::max_connections; past that a new connection is closed at once). A connection's thread
// reads a request head (HTTP/1.0 or 1.1, keep-alive and pipelining; no body is ever read), calls
// the handler, writes the answer with Content-Length, and waits for the next request. The
// handler may block (the admin server waits up to a second for the event loop); it never runs on
// the acceptor, so a slow answer delays only its own connection.
//
// Limits: a request head is at most Options::max_head_bytes (431 past it) and must be complete
// within Options::head_timeout of its first byte (408 otherwise: a client trickling a head cannot
// hold one of the few connections for long); a connection that sends nothing for
// Options::idle_timeout, or does not take the answer within it, is closed (408 when a request was
// begun). A request that announces a body is answered and the connection closed. Stopping (the
// destructor) closes the listeners, wakes every thread and joins them; a handler running then
// finishes first.
#ifndef VOLUMEMANAGER_SERVER_HTTP_SERVER_H_
#define VOLUMEMANAGER_SERVER_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "server/http_request.h"

namespace server {

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  struct Options {
    size_t max_connections = 32;
    std::chrono::milliseconds idle_timeout{30000};
    std::chrono::milliseconds head_timeout{10000};
    size_t max_head_bytes = 16 * 1024;
  };
  // Called on a connection's thread with the index of the listener (in the order given to
  // Start) the request came in on. What it throws becomes a 500 and a log line. HEAD requests
  // reach it as they are; the server sends only the head of its answer.
  using Handler = std::function<HttpResponse(size_t listener, const HttpRequest& request)>;

  // A socket bound to `address` ("IP:PORT" or "[IP]:PORT"; port 0: a free one) and listening;
  // *bound is the address with the port the kernel chose. Errors name the address and why.
  static base::Result<int> Listen(const std::string& address, std::string* bound);

  // Serves on the listening sockets (the server owns them from here, also on failure).
  static base::Result<std::unique_ptr<HttpServer>> Start(std::vector<int> listen_fds,
                                                         Handler handler, Options options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Connections closed at once because max_connections were open (for tests and logs).
  size_t refused() const;

 private:
  struct Connection {
    std::thread thread;
    bool done = false;  // guarded by mu_
  };
  HttpServer(std::vector<int> listen_fds, Handler handler, Options options);
  void AcceptLoop();
  void Accept(int listen_fd, size_t listener);
  void Serve(int fd, size_t listener);
  // Joins the connection threads that have ended.
  void Reap();
  // Waits until `fd` has `events` or the server stops; false on stop or after `timeout`.
  bool WaitFor(int fd, short events, std::chrono::milliseconds timeout) const;
  bool SendAll(int fd, std::string_view data) const;
  // Sends `out` (a whole answer), then closes the connection.
  void SendAndClose(int fd, std::string_view out) const;
  // Answers `status` with a text body, then closes the connection.
  void FailAndClose(int fd, unsigned status, const std::string& body) const;

  std::vector<int> listen_fds_;
  Handler handler_;
  Options options_;
  int stop_fd_ = -1;    // eventfd, written once at stop and never read: wakes every poll
  int reaped_fd_ = -1;  // eventfd: a connection thread has ended
  std::thread acceptor_;
  bool accept_failing_ = false;  // acceptor thread only
  mutable std::mutex mu_;
  std::list<Connection> connections_;  // guarded by mu_
  size_t open_ = 0;                    // guarded by mu_
  size_t refused_ = 0;                 // guarded by mu_
};

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_HTTP_SERVER_H_
