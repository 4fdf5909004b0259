#include "reload/http_caller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "base/catch_all.h"
#include "base/http_head.h"
#include "base/version.h"

namespace reload {

struct HttpCaller::Transfer {
  HttpCaller* owner = nullptr;
  Id id = 0;
  HttpCallRequest request;
  std::string pod_key;         // HttpCaller::PodKey
  bool timed_out_pod = false;  // started with a timeout held against its pod
  Done done;
  uv_tcp_t tcp{};
  uv_connect_t connect{};
  uv_write_t write{};
  uv_timer_t timer{};
  std::string out;  // the request, alive until the write completes
  std::string in;   // the answer's head so far
  char buffer[4096];
  int open_handles = 0;
  bool finished = false;
  bool reading = false;
};

namespace {

// The status code of an answer whose status line is HTTP/1.x (base/http_head.h), or 0. Only the
// status line is read: the header fields, even malformed, change nothing, and an answer cut off
// (closed, or longer than the limit) before the end of its head still has its status line.
int StatusCode(std::string_view answer) {
  base::HttpStatusLine line;
  std::string why;
  if (!base::ParseHttpStatusLine(base::HttpFirstLine(answer), &line, &why)) return 0;
  return line.major == 1 ? line.status : 0;
}

std::string UvError(const char* what, int err) {
  return std::string(what) + ": " + uv_strerror(err);
}

}  // namespace

std::string HttpCallResult::Describe() const {
  if (!transport.ok()) return transport.message();
  return "HTTP " + std::to_string(status);
}

HttpCaller::HttpCaller(uv_loop_t* loop, HttpCallerOptions options)
    : loop_(loop), options_(std::move(options)) {
  if (options_.max_concurrent == 0) options_.max_concurrent = 1;
}

HttpCaller::~HttpCaller() {
  // Close() has run and its handles are closed: nothing is left but what never started.
  waiting_.clear();
}

// A UID never holds a NUL byte (refused at validation), so a call without a pod gets a key no
// pod can have: a pod of its own.
std::string HttpCaller::PodKey(const HttpCallRequest& request, Id id) {
  return request.pod.empty() ? std::string(1, '\0') + std::to_string(id) : request.pod;
}

int HttpCaller::timeouts_of(const std::string& pod) const {
  auto it = timeouts_.find(pod);
  if (it == timeouts_.end()) return 0;
  const uint64_t memory = static_cast<uint64_t>(options_.timeout_memory.count());
  return uv_now(loop_) - it->second.last_ms < memory ? it->second.count : 0;
}

size_t HttpCaller::slots_for_timed_out_pods() const {
  const size_t n = options_.max_concurrent;
  return n < 2 ? n : n - std::max<size_t>(1, n / 4);
}

int HttpCaller::Rank(const std::string& key) {
  if (key.empty() || key[0] == '\0') return 0;
  return timeouts_of(key);
}

// A pod's rank changed (a call of it ended) while others of its calls wait: it keeps its turn
// within the new rank.
void HttpCaller::Rerank(const std::string& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  const int rank = Rank(key);
  if (rank == it->second.rank) return;
  ready_.erase({it->second.rank, it->second.turn, key});
  it->second.rank = rank;
  ready_.insert({rank, it->second.turn, key});
}

void HttpCaller::RecordEnd(const std::string& key, bool deadline) {
  if (key.empty() || key[0] == '\0') return;
  if (!deadline) {
    // It answered, or failed before the deadline (refused, reset): its listener holds no slot
    // for long, whatever it did before.
    if (timeouts_.erase(key) > 0) Rerank(key);
    return;
  }
  const uint64_t now = uv_now(loop_);
  Timeouts& t = timeouts_[key];
  t.count = timeouts_of(key) + 1;
  t.last_ms = now;
  if (timeouts_.size() >= prune_at_) {
    const uint64_t memory = static_cast<uint64_t>(options_.timeout_memory.count());
    for (auto it = timeouts_.begin(); it != timeouts_.end();) {
      it = now - it->second.last_ms >= memory ? timeouts_.erase(it) : std::next(it);
    }
    prune_at_ = std::max<size_t>(64, 2 * timeouts_.size());
  }
  Rerank(key);
}

HttpCaller::Id HttpCaller::Call(HttpCallRequest request, Done done) {
  const Id id = ++next_id_;
  if (closed_) return id;  // never called back
  std::string key = PodKey(request, id);
  auto [it, added] = waiting_.try_emplace(key);
  if (added) {
    it->second.rank = Rank(key);
    it->second.turn = ++next_turn_;
    ready_.insert({it->second.rank, it->second.turn, key});
  }
  it->second.calls.push_back(Queued{id, std::move(request), std::move(done)});
  waiting_pod_[id] = std::move(key);
  ++queued_;
  // Started from the loop, never inside this call (a callback may run at once on an error).
  StartQueued();
  return id;
}

void HttpCaller::StartQueued() {
  while (!closed_ && !ready_.empty() && active_.size() < options_.max_concurrent) {
    auto [rank, turn, key] = *ready_.begin();
    // ready_ is ordered by rank first: when its first pod has a timeout held against it, so has
    // every pod waiting, and the slots left are kept for pods that answer.
    if (rank > 0 && timed_out_in_flight_ >= slots_for_timed_out_pods()) break;
    ready_.erase(ready_.begin());
    auto it = waiting_.find(key);
    PodQueue& pod = it->second;
    Queued q = std::move(pod.calls.front());
    pod.calls.pop_front();
    waiting_pod_.erase(q.id);
    --queued_;
    if (pod.calls.empty()) {
      waiting_.erase(it);
    } else {
      // Its next call waits behind every other pod of its rank waiting now.
      pod.turn = ++next_turn_;
      ready_.insert({pod.rank, pod.turn, key});
    }
    Start(std::move(q), rank > 0);
  }
}

void HttpCaller::Start(Queued q, bool timed_out_pod) {
  auto* t = new Transfer;
  t->owner = this;
  t->id = q.id;
  t->pod_key = PodKey(q.request, q.id);
  t->request = std::move(q.request);
  t->done = std::move(q.done);
  t->timed_out_pod = timed_out_pod;
  if (timed_out_pod) ++timed_out_in_flight_;
  active_[t->id] = t;

  sockaddr_storage addr{};
  const bool v6 = t->request.ip.find(':') != std::string::npos;
  const std::string dial = options_.connect_address_for_testing
                               ? options_.connect_address_for_testing(t->request.ip)
                               : t->request.ip;
  int rc = dial.find(':') != std::string::npos
               ? uv_ip6_addr(dial.c_str(), t->request.port, reinterpret_cast<sockaddr_in6*>(&addr))
               : uv_ip4_addr(dial.c_str(), t->request.port, reinterpret_cast<sockaddr_in*>(&addr));
  const std::string host =
      (v6 ? "[" + t->request.ip + "]" : t->request.ip) + ":" + std::to_string(t->request.port);
  t->out = t->request.method + " " + t->request.path + " HTTP/1.1\r\nHost: " + host +
           "\r\nUser-Agent: " + options_.user_agent + "/" + base::kVersion +
           "\r\nAccept: */*\r\nConnection: close\r\n" +
           (t->request.method == "GET" ? "" : "Content-Length: 0\r\n") + "\r\n";

  uv_tcp_init(loop_, &t->tcp);
  t->tcp.data = t;
  uv_timer_init(loop_, &t->timer);
  t->timer.data = t;
  t->open_handles = 2;
  if (rc != 0) {
    // A failure reported from the loop, like every other.
    uv_timer_start(
        &t->timer,
        [](uv_timer_t* h) {
          auto* tr = static_cast<Transfer*>(h->data);
          tr->owner->Finish(
              tr, {base::Status::Error("not a numeric IP address: " + tr->request.ip), 0});
        },
        0, 0);
    return;
  }
  uv_timer_start(&t->timer, &OnTimeout, static_cast<uint64_t>(options_.timeout.count()), 0);
  t->connect.data = t;
  rc = uv_tcp_connect(&t->connect, &t->tcp, reinterpret_cast<const sockaddr*>(&addr), &OnConnect);
  if (rc < 0) {
    uv_timer_start(
        &t->timer,
        [](uv_timer_t* h) {
          auto* tr = static_cast<Transfer*>(h->data);
          tr->owner->Finish(tr, {base::Status::Error("connect failed"), 0});
        },
        0, 0);
  }
}

// Each libuv callback's body runs inside CatchAll: whatever it throws ends its transfer as a
// failure instead of unwinding into libuv.
template <typename Body>
void HttpCaller::Guarded(Transfer* t, const char* where, Body&& body) {
  if (t->finished) return;
  base::Status s = base::CatchAll(where, std::forward<Body>(body));
  if (!s.ok() && !t->finished) t->owner->Finish(t, {s, 0});
}

void HttpCaller::OnTimeout(uv_timer_t* h) {
  auto* t = static_cast<Transfer*>(h->data);
  Guarded(t, "reload HTTP timer", [t] {
    const auto ms = t->owner->options_.timeout.count();
    t->owner->Finish(
        t,
        {base::Status::Error("no answer within " + (ms % 1000 == 0 ? std::to_string(ms / 1000) + "s"
                                                                   : std::to_string(ms) + "ms")),
         0},
        /*deadline=*/true);
  });
}

void HttpCaller::OnConnect(uv_connect_t* req, int status) {
  auto* t = static_cast<Transfer*>(req->data);
  Guarded(t, "reload HTTP connect", [t, status] {
    if (status < 0) {
      t->owner->Finish(t, {base::Status::Error(UvError("connect", status), -status), 0});
      return;
    }
    uv_buf_t buf = uv_buf_init(t->out.data(), static_cast<unsigned int>(t->out.size()));
    t->write.data = t;
    const int w = uv_write(&t->write, reinterpret_cast<uv_stream_t*>(&t->tcp), &buf, 1, &OnWrite);
    if (w < 0) {
      t->owner->Finish(t, {base::Status::Error(UvError("send", w), -w), 0});
      return;
    }
    t->reading = true;
    uv_read_start(reinterpret_cast<uv_stream_t*>(&t->tcp), &OnAlloc, &OnRead);
  });
}

void HttpCaller::OnWrite(uv_write_t* req, int status) {
  auto* t = static_cast<Transfer*>(req->data);
  if (t == nullptr || status >= 0) return;
  Guarded(t, "reload HTTP send", [t, status] {
    t->owner->Finish(t, {base::Status::Error(UvError("send", status), -status), 0});
  });
}

void HttpCaller::OnAlloc(uv_handle_t* h, size_t, uv_buf_t* out) {
  auto* t = static_cast<Transfer*>(h->data);
  *out = uv_buf_init(t->buffer, sizeof(t->buffer));
}

void HttpCaller::OnRead(uv_stream_t* stream, ssize_t n, const uv_buf_t*) {
  auto* t = static_cast<Transfer*>(stream->data);
  Guarded(t, "reload HTTP receive", [t, n] {
    HttpCaller* self = t->owner;
    if (n == 0) return;
    if (n > 0) {
      const size_t room = self->options_.max_response_head -
                          std::min(t->in.size(), self->options_.max_response_head);
      t->in.append(t->buffer, std::min(static_cast<size_t>(n), room));
      base::HttpResponseHead head;
      std::string why;
      const bool head_done =
          base::ParseHttpResponseHead(t->in, &head, &why) != base::HttpHeadParse::kIncomplete;
      if (!head_done && t->in.size() < self->options_.max_response_head) return;
    } else if (n != UV_EOF) {
      const int err = static_cast<int>(n);
      self->Finish(t, {base::Status::Error(UvError("receive", err), -err), 0});
      return;
    }
    const int code = StatusCode(t->in);
    if (code == 0) {
      self->Finish(t, {base::Status::Error(t->in.empty() ? "connection closed without an answer"
                                                         : "the answer is not HTTP/1.x"),
                       0});
    } else {
      self->Finish(t, {base::Status::OK(), code});
    }
  });
}

void HttpCaller::Finish(Transfer* t, HttpCallResult result, bool deadline) {
  if (t->finished) return;
  t->finished = true;
  Done done = std::move(t->done);
  // Before the callback: a retry it asks for is ranked by this result.
  RecordEnd(t->pod_key, deadline);
  Release(t);
  if (done) {
    if (base::Status s = base::CatchAll("reload HTTP callback", [&] { done(result); }); !s.ok()) {
      spdlog::error("{}", s.message());
    }
  }
  StartQueued();
}

void HttpCaller::Release(Transfer* t) {
  active_.erase(t->id);
  if (t->timed_out_pod) --timed_out_in_flight_;
  ++closing_;
  uv_timer_stop(&t->timer);
  if (t->reading) uv_read_stop(reinterpret_cast<uv_stream_t*>(&t->tcp));
  auto on_close = [](uv_handle_t* h) {
    auto* x = static_cast<Transfer*>(h->data);
    if (--x->open_handles > 0) return;
    HttpCaller* self = x->owner;
    delete x;
    --self->closing_;
    self->MaybeClosed();
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&t->tcp), on_close);
  uv_close(reinterpret_cast<uv_handle_t*>(&t->timer), on_close);
}

void HttpCaller::Cancel(Id id) {
  if (auto w = waiting_pod_.find(id); w != waiting_pod_.end()) {
    auto pod = waiting_.find(w->second);
    auto& calls = pod->second.calls;
    calls.erase(
        std::find_if(calls.begin(), calls.end(), [id](const Queued& q) { return q.id == id; }));
    --queued_;
    if (calls.empty()) {
      ready_.erase({pod->second.rank, pod->second.turn, pod->first});
      waiting_.erase(pod);
    }
    waiting_pod_.erase(w);
    return;
  }
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Transfer* t = it->second;
  t->finished = true;
  t->done = nullptr;
  Release(t);
  StartQueued();
}

void HttpCaller::Close(std::function<void()> done) {
  closed_ = true;
  close_done_ = std::move(done);
  waiting_.clear();
  ready_.clear();
  waiting_pod_.clear();
  queued_ = 0;
  while (!active_.empty()) {
    Transfer* t = active_.begin()->second;
    t->finished = true;
    t->done = nullptr;
    Release(t);
  }
  MaybeClosed();
}

void HttpCaller::MaybeClosed() {
  if (!closed_ || closing_ > 0 || !active_.empty() || !close_done_) return;
  auto done = std::move(close_done_);
  close_done_ = nullptr;
  done();
}

}  // namespace reload
