// HttpCaller: the requests of HTTP reload actions, on the daemon's libuv loop, over plain TCP to a
// numeric IP address (no name resolution, no proxy whatever the environment says, no TLS, no
// redirect followed: a 3xx is an answer like any other, and not a success). One request per
// connection (`Connection: close`), no body, no credentials: nothing of the volume's content
// or of the daemon's identity leaves with it. Only the status line of the answer is read (the
// head is read to its end, at most `max_response_head` bytes); the body is never read, kept or
// shown.
//
// A node-wide limit of `max_concurrent` requests in flight; the others wait, shared fairly between
// pods rather than first come, first served: a pod's listener that accepts and never answers must
// not hold the slots that other pods' calls wait for. Each request has one deadline (`timeout`)
// for connecting, sending and the answer's head. Waiting calls start in this order:
//   * a pod whose calls keep running out of time goes behind the others: pods without a timeout
//     held against them first, then by the number of their consecutive timeouts (an answer, or
//     any failure before the deadline, clears them; a timeout is forgotten after `timeout_memory`);
//   * between pods of one rank, round robin: a pod's next call waits behind the calls of the
//     other pods of its rank that were waiting when its previous one started;
//   * one pod's calls in the order they were made.
// Calls of pods with a timeout held against them also hold at most three quarters of the slots
// (`max_concurrent` less a quarter of it, and at least one less when it is 2 or more): the rest
// stay free, so a call of a pod that answers does not wait for a hung listener's deadline unless
// such calls fill those too. A pod's first timeout is the first the caller knows of it: until
// then it waits and holds a slot like any other pod.
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
#include <set>
#include <string>
#include <tuple>

#include "base/status.h"

namespace reload {

struct HttpCallRequest {
  std::string ip;  // numeric IPv4 or IPv6, checked by the caller (pod_address.h)
  uint16_t port = 0;
  std::string method = "POST";
  std::string path = "/";  // checked by the annotation parser (reload_spec.h)
  // Whose call this is (the pod's UID): the unit of fairness and of the timeouts held against a
  // pod. Empty: a pod of its own, never ranked behind for another call's timeouts.
  std::string pod;
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
  // How long a pod's timeouts rank its later calls behind other pods' (since its last timeout).
  std::chrono::milliseconds timeout_memory{std::chrono::minutes(10)};
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
  size_t queued() const { return queued_; }
  // The consecutive timeouts held against `pod` now (0: none, or forgotten).
  int timeouts_of(const std::string& pod) const;
  // How many slots the calls of pods with a timeout held against them may hold.
  size_t slots_for_timed_out_pods() const;
  const HttpCallerOptions& options() const { return options_; }

  struct Transfer;  // one request on its connection (internal)

 private:
  struct Queued {
    Id id;
    HttpCallRequest request;
    Done done;
  };
  void Start(Queued q, bool timed_out_pod);
  void Finish(Transfer* t, HttpCallResult result, bool deadline = false);
  void Release(Transfer* t);
  void StartQueued();
  void MaybeClosed();
  // Fair queueing: the key of a call's pod, its rank, and the pod's place in ready_.
  static std::string PodKey(const HttpCallRequest& request, Id id);
  int Rank(const std::string& key);
  void Rerank(const std::string& key);
  void RecordEnd(const std::string& key, bool deadline);
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
  // The calls waiting, per pod (a pod is here only while it has one), and the pods in the order
  // their next calls start: (rank, turn, pod key). A pod's turn is taken when it starts waiting
  // and again each time one of its calls starts.
  struct PodQueue {
    std::deque<Queued> calls;
    int rank = 0;
    uint64_t turn = 0;
  };
  std::map<std::string, PodQueue> waiting_;
  std::set<std::tuple<int, uint64_t, std::string>> ready_;
  std::map<Id, std::string> waiting_pod_;  // call id -> pod key, for Cancel
  size_t queued_ = 0;
  uint64_t next_turn_ = 0;
  // Consecutive timeouts per pod and when the last one ended (uv_now, ms). Pruned of forgotten
  // ones whenever it has doubled since the last prune.
  struct Timeouts {
    int count = 0;
    uint64_t last_ms = 0;
  };
  std::map<std::string, Timeouts> timeouts_;
  size_t prune_at_ = 64;
  size_t timed_out_in_flight_ = 0;  // active calls started with a timeout held against their pod
  std::map<Id, Transfer*> active_;
  // Transfers finished but whose handles are still closing.
  size_t closing_ = 0;
  bool closed_ = false;
  std::function<void()> close_done_;
};

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_HTTP_CALLER_H_
