// HttpCaller: the requests of HTTP reload actions, on the daemon's libuv loop, over plain TCP to a
// numeric IP address (no name resolution, no proxy whatever the environment says, no TLS, no
// redirect followed: a 3xx is an answer like any other, and not a success). One request per
// connection (`Connection: close`), no body, no credentials: nothing of the volume's content
// or of the daemon's identity leaves with it. Only the status line of the answer is read (the
// head is read to its end, at most `max_response_head` bytes); the body is never read, kept or
// shown.
//
// A node-wide limit of `max_concurrent` requests in flight: the others wait in order. Each
// request has one deadline (`timeout`) for connecting, sending and the answer's head.
//
// Loop thread only. Callbacks run on the loop, never inside Call(), never after Cancel() or
// Close(). Close() before destruction; `done` runs once every handle is closed.
#ifndef VOLUMEMANAGER_RELOAD_HTTP_CALLER_H_
#define VOLUMEMANAGER_RELOAD_HTTP_CALLER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"

namespace reload {

struct HttpCallRequest {
  std::string ip;  // numeric IPv4 or IPv6, checked by the caller (pod_address.h)
  uint16_t port = 0;
  std::string method = "POST";
  std::string path = "/";  // checked by the annotation parser (reload_spec.h)
};

struct HttpCallResult {
  // OK when an answer's status line was read; else what went wrong (refused, timed out, ...).
  base::Status transport;
  int status = 0;  // the HTTP status code; 0 without an answer

  bool ok() const { return transport.ok() && status >= 200 && status < 300; }
  // "HTTP 200", "HTTP 503", or the transport error.
  std::string Describe() const;
};

struct HttpCallerOptions {
  std::chrono::milliseconds timeout{5000};
  size_t max_concurrent = 32;
  size_t max_response_head = 16 * 1024;
  std::string user_agent = "volumemanager";
  // Tests only: the address connected to for a call to `ip` (a loopback listener standing in for
  // a pod's own address, which a unit test cannot have without network namespaces). The request
  // itself (its Host header) still names `ip`. Empty: `ip` itself.
  std::function<std::string(const std::string& ip)> connect_address_for_testing;
};

class HttpCaller {
 public:
  using Id = uint64_t;
  using Done = std::function<void(const HttpCallResult&)>;

  HttpCaller(uv_loop_t* loop, HttpCallerOptions options);
  ~HttpCaller();
  HttpCaller(const HttpCaller&) = delete;
  HttpCaller& operator=(const HttpCaller&) = delete;

  // Starts (or queues) a request; `done` runs once with its result.
  Id Call(HttpCallRequest request, Done done);
  // No callback of `id` runs afterwards; unknown or finished ids are ignored.
  void Cancel(Id id);
  // Cancels everything; `done` runs on the loop once every handle is closed.
  void Close(std::function<void()> done);

  size_t in_flight() const { return active_.size(); }
  size_t queued() const { return queue_.size(); }
  const HttpCallerOptions& options() const { return options_; }

  struct Transfer;  // one request on its connection (internal)

 private:
  void Start(Id id, HttpCallRequest request, Done done);
  void Finish(Transfer* t, HttpCallResult result);
  void Release(Transfer* t);
  void StartQueued();
  void MaybeClosed();
  template <typename Body>
  static void Guarded(Transfer* t, const char* where, Body&& body);
  static void OnTimeout(uv_timer_t* h);
  static void OnConnect(uv_connect_t* req, int status);
  static void OnWrite(uv_write_t* req, int status);
  static void OnAlloc(uv_handle_t* h, size_t size, uv_buf_t* out);
  static void OnRead(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf);

  uv_loop_t* loop_;
  HttpCallerOptions options_;
  Id next_id_ = 0;
  struct Queued {
    Id id;
    HttpCallRequest request;
    Done done;
  };
  std::deque<Queued> queue_;
  std::map<Id, Transfer*> active_;
  // Transfers finished but whose handles are still closing.
  size_t closing_ = 0;
  bool closed_ = false;
  std::function<void()> close_done_;
};

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_HTTP_CALLER_H_
