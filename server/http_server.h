// HttpServer: a small HTTP/1.1 server for the admin endpoints, on plain sockets and threads, so
// that the daemon maps no HTTP or TLS library to answer its probes.
//
// Threads: one acceptor for all listeners, and one thread per open connection. A connection's
// thread reads a request head (HTTP/1.0 or 1.1, keep-alive and pipelining; no body is ever read),
// calls the handler, writes the answer with Content-Length, and waits for the next request. The
// handler may block (the admin server waits up to a second for the event loop); it never runs on
// the acceptor, so a slow answer delays only its own connection.
//
// Connection budgets: each listener has its own (Listener::max_connections), so that clients of
// one listener can never take the connections another one needs (the admin server's probe
// listener must answer the kubelet whatever is done to its debug listener). When a listener's
// budget is full, a new connection is admitted by closing one of that listener's connections,
// chosen in this order:
//  1. an idle keep-alive connection (a request answered, nothing of the next one received), the
//     one idle longest;
//  2. otherwise the connection that has waited longest on its client: for its first request
//     since it was accepted, for the rest of a request head since its first byte, or to take an
//     answer since it was sent;
// and the new connection is closed at once (refused) only when every connection of the listener
// is running the handler. Why not refuse the newcomer when the budget is full of requests in
// progress: anyone who can reach the listener can open connections and send a byte now and then,
// and would then hold the budget for good by opening a new connection as soon as one is closed.
// Closing the longest-waiting one instead means a client is closed only after as many newer
// connections came in as the budget holds while it still owed bytes; a probe sends its request
// at once (one segment) and is answered long before that, unless the listener is flooded faster
// than its connection threads can read. A connection closed this way is shut down (its thread
// wakes and ends) without an answer.
//
// Limits: a request head is at most Options::max_head_bytes (431 past it) and must be complete
// within Options::head_timeout of the first byte received for it, empty lines before the request
// line included (408 otherwise: a client trickling a head, or only line ends, cannot hold a
// connection for long); a connection that sends nothing for Options::idle_timeout, or does not
// take the answer within it, is closed (408 when a request was begun). A request that announces a
// body is answered and the connection closed. Stopping (the destructor) closes the listeners,
// wakes every thread and joins them; a handler running then finishes first.
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

  // A listening socket (Listen) and its connection budget: how many connections accepted on it
  // are served at once. A connection closed to make room ends as soon as its thread runs; until
  // then it counts apart, and while twice the budget are still ending, a new connection is
  // refused: a listener never has more than three times its budget of threads.
  struct Listener {
    int fd = -1;
    size_t max_connections = 32;
  };

  // Serves on the listening sockets (the server owns them from here, also on failure).
  static base::Result<std::unique_ptr<HttpServer>> Start(std::vector<Listener> listeners,
                                                         Handler handler, Options options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // New connections closed at once because their listener's budget was full of connections
  // running the handler (for tests and logs).
  size_t refused() const;
  // Connections closed to make room for a new one (for tests and logs).
  size_t evicted() const;
  // Connections waiting for their next request (for tests: a connection is marked idle after
  // its answer is sent, so a client may read the answer before).
  size_t idle() const;

 private:
  using Clock = std::chrono::steady_clock;
  // What a connection's thread waits for; it says whether the connection may be closed to make
  // room, and which one first.
  enum class Wait {
    kIdle,     // the next request, after answering one; nothing of it received
    kClient,   // the client otherwise: a first request, the rest of a head, taking an answer
    kHandler,  // the handler: never closed to make room
  };
  struct Connection {
    std::thread thread;
    size_t listener = 0;
    // The fields below are guarded by mu_.
    int fd = -1;  // -1 once its thread is closing it: never shut down after that
    Wait wait = Wait::kClient;
    Clock::time_point since;  // when `wait` began (kClient: the wait for the current request)
    bool evicted = false;     // shut down to make room
    bool done = false;        // its thread has ended
  };
  struct ListenerState {
    int fd = -1;
    size_t max_connections = 0;
    size_t live = 0;    // open and not evicted; guarded by mu_
    size_t ending = 0;  // evicted, their threads not ended yet; guarded by mu_
  };
  HttpServer(std::vector<Listener> listeners, Handler handler, Options options);
  void AcceptLoop();
  void Accept(size_t listener);
  // Makes room on a full listener by shutting one connection down; false when none may be.
  bool EvictOne(size_t listener);  // requires mu_
  // Runs one connection; the caller closes `fd` afterwards.
  void Serve(Connection* conn, int fd, size_t listener);
  // Records what the connection waits for now; false when it was evicted (then stop serving).
  bool Mark(Connection* conn, Wait wait);
  // Joins the connection threads that have ended.
  void Reap();
  // Waits until `fd` has `events` or the server stops; false on stop or after `timeout`.
  bool WaitFor(int fd, short events, std::chrono::milliseconds timeout) const;
  bool SendAll(int fd, std::string_view data) const;
  // Sends `out` (a whole answer), then drains what the client still sends (lingering close);
  // the caller closes the connection.
  void SendAndLinger(int fd, std::string_view out) const;
  // Answers `status` with a text body and lingers, as SendAndLinger.
  void Fail(int fd, unsigned status, const std::string& body) const;

  std::vector<ListenerState> listeners_;
  Handler handler_;
  Options options_;
  int stop_fd_ = -1;    // eventfd, written once at stop and never read: wakes every poll
  int reaped_fd_ = -1;  // eventfd: a connection thread has ended
  std::thread acceptor_;
  bool accept_failing_ = false;  // acceptor thread only
  mutable std::mutex mu_;
  std::list<Connection> connections_;  // guarded by mu_
  size_t refused_ = 0;                 // guarded by mu_
  size_t evicted_ = 0;                 // guarded by mu_
};

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_HTTP_SERVER_H_
