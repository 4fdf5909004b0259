#include "kubeclient/transport/http2_transport.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "base/catch_all.h"
#include "base/uv_timer.h"
#include "kubeclient/dl/gnutls_library.h"
#include "kubeclient/dl/nghttp2_library.h"

namespace kubeclient {
namespace {

const Nghttp2Library& H2() { return *LoadNghttp2().value(); }
const GnutlsLibrary& Gnutls() { return *LoadGnutls().value(); }

// Flow-control windows the server may fill before the client has read: a list of thousands of
// objects arrives at the speed of the link, not of round trips. Credits only: nothing is
// allocated for them.
constexpr int32_t kStreamWindow = 1 << 20;
constexpr int32_t kConnectionWindow = 16 << 20;
// Frames gathered from nghttp2 before one TLS write.
constexpr size_t kSendGather = 64 * 1024;
// Bytes one recv may bring for TLS (Http2Callbacks::TlsPull): a TLS record's largest size, so
// that a burst of records takes a recv per 16 KiB instead of two per record.
constexpr size_t kReadAhead = 16 * 1024 + 256;

bool IsIpAddress(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// The socket and its poll handle: the fd is closed once libuv has closed the handle, so its number
// cannot be reused by a new socket whose epoll registration libuv's late close would delete. Not in
// the anonymous namespace: Http2Transport::Connection, a type with linkage, holds one.
namespace http2_internal {
struct PolledSocket {
  uv_poll_t poll;
  int fd;
  // The events the handle polls for (0: stopped). uv_poll_start takes the fd out of epoll and puts
  // it back even for the events it has: not called again for those (two system calls a frame).
  int started_events = 0;
};
}  // namespace http2_internal
using http2_internal::PolledSocket;

namespace {

void ClosePolledSocket(PolledSocket* socket) {
  uv_poll_stop(&socket->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&socket->poll), [](uv_handle_t* h) {
    auto* s = reinterpret_cast<PolledSocket*>(h);
    close(s->fd);
    delete s;
  });
}

}  // namespace

struct Http2Transport::TlsCredentials {
  gnutls_certificate_credentials_t cred = nullptr;
  ~TlsCredentials() {
    if (cred != nullptr) Gnutls().certificate_free_credentials(cred);
  }
};

struct Http2Transport::Stream {
  RequestId id = 0;
  HttpRequest request;
  HttpDoneCallback done;
  StreamCallbacks callbacks;
  HttpResponse response;
  Connection* connection = nullptr;  // while open on one
  int32_t stream_id = -1;
  size_t body_sent = 0;
  bool waiting = false;  // in waiting_
  std::list<RequestId>::iterator waiting_at;
  bool has_deadline = false;
  std::multimap<std::chrono::steady_clock::time_point, RequestId>::iterator deadline_at;
  std::chrono::milliseconds timeout{0};
  bool headers_seen = false;  // a final (non-1xx) header block arrived
  bool headers_delivered = false;
  bool buffer_body = true;
  bool completed = false;  // queued in completed_
  base::Status result;
  int refused = 0;
};

struct Http2Transport::Connection {
  enum class State { kResolving, kConnecting, kHandshake, kSettings, kReady };
  Http2Transport* owner = nullptr;
  uint64_t serial = 0;
  State state = State::kResolving;
  bool dead = false;
  bool going_away = false;
  addrinfo* addresses = nullptr;
  addrinfo* next_address = nullptr;
  PolledSocket* socket = nullptr;
  uv_timer_t* timer = nullptr;  // connect timeout, then idle timeout
  bool idle_armed = false;
  gnutls_session_t tls = nullptr;
  std::shared_ptr<TlsCredentials> credentials;
  // The client certificate it presents (null: none, or not yet at its TLS handshake, when it
  // takes the pair current then).
  std::shared_ptr<const ClientCertPair> cert;
  nghttp2_session* h2 = nullptr;
  std::string out;  // TLS bytes not yet written
  size_t out_offset = 0;
  size_t active = 0;  // streams submitted and not yet closed by nghttp2
  int poll_events = 0;
  std::string last_error;
  // TLS's read side (Http2Callbacks::TlsPull): what the last recv brought that GnuTLS has not
  // taken yet. GnuTLS asks for a record's 5-byte header, then its body, then the next header:
  // read from the socket one by one, that is two system calls a record and a third that finds
  // nothing. Here one recv serves them, and one that came back short means the socket had no
  // more then: the next ask gets EAGAIN without a system call, and the poll (level-triggered)
  // reports what arrives since. Allocated at the connection's first read and kept with it: an
  // allocation and a free at every wake-up would cost more than the calls saved; only the pages
  // a read reaches are touched.
  std::unique_ptr<uint8_t[]> in;
  size_t in_pos = 0;
  size_t in_len = 0;
  bool in_short = false;  // the last recv came back short: the socket held no more then

  // Before a read that readiness (or a new state) calls for: the socket is asked again.
  void StartRead() { in_short = false; }
  bool HasReadAhead() const { return in_pos < in_len; }
  // Whether GnuTLS, having answered EAGAIN with bytes read ahead, is worth calling again: it took
  // some since `before`, or has not yet answered so kIdleTlsCalls times in a row (it handles
  // the messages of one record one per call, taking nothing new). Not a spin on a stuck library.
  static constexpr int kIdleTlsCalls = 64;
  bool StillReading(size_t before, int* idle_calls) const {
    *idle_calls = in_pos == before ? *idle_calls + 1 : 0;
    return *idle_calls < kIdleTlsCalls;
  }

  ~Connection() {
    if (h2 != nullptr) H2().session_del(h2);
    if (tls != nullptr) Gnutls().deinit(tls);
    if (addresses != nullptr) uv_freeaddrinfo(addresses);
    if (socket != nullptr) ClosePolledSocket(socket);
    if (timer != nullptr) base::CloseTimer(timer);
  }
  void CloseSocket() {
    if (socket != nullptr) ClosePolledSocket(socket);
    socket = nullptr;
    poll_events = 0;
  }
};

// nghttp2's callbacks: each finds its connection in the session's user data and its request in
// the stream's (null once the request is cancelled or finished).
struct Http2Callbacks {
  using Connection = Http2Transport::Connection;
  using Stream = Http2Transport::Stream;

  static Stream* StreamOf(nghttp2_session* session, int32_t stream_id) {
    return static_cast<Stream*>(H2().get_stream_user_data(session, stream_id));
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t /*flags*/,
                      void* /*user*/) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream* s = StreamOf(session, frame->hd.stream_id);
    if (s == nullptr || s->headers_seen) return 0;  // trailers are ignored
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    base::Status st = base::CatchAll("http2 header callback", [&] {
      if (n == ":status") {
        s->response.status = std::atol(std::string(v).c_str());
      } else if (!n.empty() && n[0] != ':') {
        if (n == "warning") {
          spdlog::warn("API server warning on {} {}: {}", s->request.method, s->request.path, v);
        }
        s->response.headers[std::string(n)] = std::string(v);
      }
    });
    if (!st.ok()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the stream
    return 0;
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<Connection*>(user);
    Http2Transport* t = c->owner;
    switch (frame->hd.type) {
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 && c->state == Connection::State::kSettings) {
          c->state = Connection::State::kReady;
          t->mode_ = Http2Transport::Mode::kHttp2;
          ++t->connections_opened_;
          uv_timer_stop(c->timer);
        }
        break;
      case NGHTTP2_GOAWAY:
        // No new stream on it; nghttp2 closes the streams the server will not process
        // (REFUSED_STREAM: sent again elsewhere) and keeps the others to their end.
        c->going_away = true;
        break;
      case NGHTTP2_HEADERS: {
        Stream* s = StreamOf(session, frame->hd.stream_id);
        if (s == nullptr || s->headers_seen || (frame->hd.flags & NGHTTP2_FLAG_END_HEADERS) == 0) {
          break;
        }
        if (s->response.status >= 100 && s->response.status < 200) {
          s->response.status = 0;  // informational: the final response follows
          s->response.headers.clear();
          break;
        }
        s->headers_seen = true;
        t->DeliverHeaders(s);
        break;
      }
      default:
        break;
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session* session, uint8_t /*flags*/, int32_t stream_id,
                         const uint8_t* data, size_t len, void* user) {
    Stream* s = StreamOf(session, stream_id);
    if (s != nullptr) static_cast<Connection*>(user)->owner->Data(s, data, len);
    return 0;
  }

  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* user) {
    auto* c = static_cast<Connection*>(user);
    Http2Transport* t = c->owner;
    if (c->active > 0) --c->active;
    Stream* s = StreamOf(session, stream_id);
    if (s == nullptr) return 0;
    H2().set_stream_user_data(session, stream_id, nullptr);
    s->connection = nullptr;
    s->stream_id = -1;
    if (error_code == NGHTTP2_REFUSED_STREAM && !s->headers_seen && s->refused < 3) {
      // Never processed (RFC 9113 8.7): send it again, first in line.
      ++s->refused;
      s->body_sent = 0;
      s->response = HttpResponse{};
      base::Status st = base::CatchAll("http2 stream close callback", [&] {
        s->waiting_at = t->waiting_.insert(t->waiting_.begin(), s->id);
        s->waiting = true;
      });
      if (st.ok()) return 0;
      t->Complete(s, st);
      return 0;
    }
    if (error_code != NGHTTP2_NO_ERROR) {
      t->Complete(s, base::Status::Error(std::string("HTTP/2 stream reset by the server (") +
                                         H2().http2_strerror(error_code) + ")"));
    } else if (!s->headers_seen) {
      t->Complete(s, base::Status::Error("the server ended the stream without a response"));
    } else {
      t->Complete(s, base::Status::OK());
    }
    return 0;
  }

  // libuv callbacks shared by every connection and timer of the transport.
  static void OnConnectionTimer(uv_timer_t* h) {
    auto* conn = static_cast<Connection*>(h->data);
    conn->owner->Guard("http2 connection timer", [&] { conn->owner->OnConnectionTimer(conn); });
  }
  // GnuTLS's pull function (the transport pointer is the connection): see Connection::in.
  static ssize_t TlsPull(gnutls_transport_ptr_t ptr, void* data, size_t size) {
    auto* c = static_cast<Connection*>(ptr);
    if (c->in_pos == c->in_len) {
      if (c->in_short || c->socket == nullptr) {
        Gnutls().transport_set_errno(c->tls, EAGAIN);
        return -1;
      }
      if (c->in == nullptr) c->in.reset(new uint8_t[kReadAhead]);
      ssize_t n;
      do {
        n = ::recv(c->socket->fd, c->in.get(), kReadAhead, 0);
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        const int err = errno == EWOULDBLOCK ? EAGAIN : errno;
        if (err == EAGAIN) c->in_short = true;
        Gnutls().transport_set_errno(c->tls, err);
        return -1;
      }
      if (n == 0) return 0;  // the peer's end of the stream
      c->in_pos = 0;
      c->in_len = static_cast<size_t>(n);
      c->in_short = c->in_len < kReadAhead;
    }
    const size_t k = std::min(size, c->in_len - c->in_pos);
    std::memcpy(data, c->in.get() + c->in_pos, k);
    c->in_pos += k;
    return static_cast<ssize_t>(k);
  }
  // Whether there is something to read, for GnuTLS: never waits (the loop thread must not
  // block; the transport sets no TLS timeout, so GnuTLS asks only with 0).
  static int TlsPullTimeout(gnutls_transport_ptr_t ptr, unsigned int /*ms*/) {
    auto* c = static_cast<Connection*>(ptr);
    if (c->in_pos < c->in_len) return 1;
    if (c->socket == nullptr) return 0;
    pollfd p{c->socket->fd, POLLIN, 0};
    int rc;
    do {
      rc = ::poll(&p, 1, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
      const int err = errno;
      Gnutls().transport_set_errno(c->tls, err);
    }
    return rc;
  }

  static void OnPoll(uv_poll_t* h, int status, int events) {
    auto* conn = static_cast<Connection*>(h->data);
    conn->owner->Guard("http2 poll callback", [&] { conn->owner->OnEvents(conn, status, events); });
  }
  static void OnKick(uv_timer_t* h) {
    static_cast<Http2Transport*>(h->data)->Guard("http2 completion", [] {});
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source* /*source*/, void* /*user*/) {
    Stream* s = StreamOf(session, stream_id);
    if (s == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::string& body = s->request.body;
    const size_t n = std::min(length, body.size() - s->body_sent);
    std::memcpy(buf, body.data() + s->body_sent, n);
    s->body_sent += n;
    if (s->body_sent == body.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
};

base::Result<std::unique_ptr<Http2Transport>> Http2Transport::Create(TransportContext context,
                                                                     const ServerAddress& address,
                                                                     Options options,
                                                                     Fallback fallback) {
  if (const auto& lib = LoadNghttp2(); !lib.ok()) return lib.status();
  if (const auto& lib = LoadGnutls(); !lib.ok()) return lib.status();
  const Credentials& credentials = *context.credentials;
  if (address.host.empty() || address.port.empty()) {
    return base::Status::Error("no host and port in the server URL " + credentials.server);
  }
  std::unique_ptr<Http2Transport> t(
      new Http2Transport(std::move(context), std::move(options), std::move(fallback)));
  t->host_ = address.host;
  t->port_ = address.port;
  t->prefix_ = address.path_prefix;
  const TlsConfig& tls = credentials.tls;
  if (!tls.server_name.empty()) {
    t->authority_ = tls.server_name + ":" + t->port_;
    t->verify_name_ = tls.server_name;
  } else {
    t->authority_ = t->Where();
    t->verify_name_ = t->host_;
  }
  t->sni_ = !IsIpAddress(t->verify_name_);
  if (tls.insecure_skip_tls_verify) t->verify_name_.clear();
  return t;
}

Http2Transport::Http2Transport(TransportContext context, Options options, Fallback fallback)
    : context_(std::move(context)),
      loop_(context_.loop),
      options_(std::move(options)),
      fallback_(std::move(fallback)),
      alive_(std::make_shared<bool>(true)) {
  deadline_timer_ = base::NewTimer(loop_, this);
  kick_timer_ = base::NewTimer(loop_, this);
}

Http2Transport::~Http2Transport() {
  *alive_ = false;
  connections_.clear();
  streams_.clear();
  base::CloseTimer(deadline_timer_);
  base::CloseTimer(kick_timer_);
}

std::string Http2Transport::Where() const {
  return (host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_) + ":" + port_;
}

void Http2Transport::Fault(const char* callback) {
  if (context_.callback_fault) context_.callback_fault(callback);
}

Http2Transport::Stream* Http2Transport::Find(RequestId id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

template <typename Fn>
void Http2Transport::Guard(const char* what, Fn&& body) {
  std::weak_ptr<bool> alive = alive_;
  ++in_io_;
  base::Status s = base::CatchAll(what, [&] {
    Fault("poll");
    body();
  });
  --in_io_;
  if (!s.ok()) spdlog::error("http2 client: {}", s.message());
  if (auto a = alive.lock(); !a || !*a) return;
  AfterIo(/*deliver=*/true);
}

void Http2Transport::Start(RequestId id, HttpRequest request, HttpDoneCallback done,
                           StreamCallbacks stream) {
  auto owned = std::make_unique<Stream>();
  Stream* s = owned.get();
  s->id = id;
  s->request = std::move(request);
  s->done = std::move(done);
  s->callbacks = std::move(stream);
  s->timeout = s->request.timeout.count() > 0 ? s->request.timeout
               : s->request.stream            ? std::chrono::milliseconds(0)
                                              : context_.request_timeout;
  streams_[id] = std::move(owned);
  if (s->timeout.count() > 0) {
    s->deadline_at = deadlines_.emplace(std::chrono::steady_clock::now() + s->timeout, id);
    s->has_deadline = true;
  }
  s->waiting_at = waiting_.insert(waiting_.end(), id);
  s->waiting = true;
  // Inside an I/O callback (a callback of another request's), the callback's epilogue sends it.
  if (in_io_ == 0) AfterIo(/*deliver=*/false);
}

bool Http2Transport::Cancel(RequestId id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return false;
  Stream* s = it->second.get();
  if (s->connection != nullptr && s->connection->h2 != nullptr) {
    H2().set_stream_user_data(s->connection->h2, s->stream_id, nullptr);
    H2().submit_rst_stream(s->connection->h2, NGHTTP2_FLAG_NONE, s->stream_id, NGHTTP2_CANCEL);
  }
  if (s->waiting) waiting_.erase(s->waiting_at);
  if (s->has_deadline) deadlines_.erase(s->deadline_at);
  streams_.erase(it);  // completed_ may still name it: DeliverCompletions skips it
  ++streams_erased_;
  if (in_io_ == 0) AfterIo(/*deliver=*/false);
  return true;
}

void Http2Transport::RotateConnections(const std::string& why) {
  // Only the connections of an older pair retire. One that took the new pair as it opened (the
  // rotation may be noticed right there, in Tls()) or that will take it at its handshake stays:
  // retiring it too threw a connection of the new pair away, and the requests waiting for it
  // (the watches just ended on the old one among them) waited for yet another.
  const std::shared_ptr<const ClientCertPair> current =
      context_.current_cert ? context_.current_cert() : nullptr;
  auto old_pair = [&current](const Connection& c) {
    return c.cert != nullptr && (current == nullptr || c.cert->generation != current->generation);
  };
  size_t ended = 0, retired = 0;
  for (auto& c : connections_) {
    if (c->dead || c->going_away || !old_pair(*c)) continue;
    c->going_away = true;  // no new stream: Admit opens a connection with the new certificate
    ++retired;
  }
  // Collected first: Abort changes what the loop would walk.
  std::vector<Stream*> streams;
  for (auto& [id, s] : streams_) {
    if (s->request.stream && s->connection != nullptr && !s->completed &&
        old_pair(*s->connection)) {
      streams.push_back(s.get());
    }
  }
  for (Stream* s : streams) {
    Abort(s, why, /*log=*/false);
    ++ended;
  }
  if (retired > 0) {
    spdlog::info(
        "{}: {} HTTP/2 connections to {} close once their requests end, {} watches "
        "reconnect",
        why, retired, Where(), ended);
  }
  if (in_io_ == 0) AfterIo(/*deliver=*/false);
}

Http2Transport::Stats Http2Transport::stats() const {
  size_t open = 0;
  for (const auto& c : connections_) {
    if (!c->dead && c->socket != nullptr) ++open;
  }
  return Stats{connections_opened_, open, streams_.size(), waiting_.size()};
}

void Http2Transport::Admit() {
  if (mode_ == Mode::kHttp1) {
    // A stream refused on a connection of before the switch: libcurl takes it.
    HandWaitingToFallback();
    return;
  }
  const size_t ours = context_.max_streams_per_connection > 0
                          ? static_cast<size_t>(context_.max_streams_per_connection)
                          : 1;
  while (!waiting_.empty()) {
    Connection* target = nullptr;
    bool opening = false;
    for (auto& c : connections_) {
      if (c->dead || c->going_away) continue;
      if (c->state != Connection::State::kReady) {
        opening = true;
        continue;
      }
      const size_t theirs =
          H2().get_remote_settings(c->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
      if (c->active < std::min(ours, theirs)) {
        target = c.get();
        break;
      }
    }
    if (target == nullptr) {
      // One connection opening at a time, and no more connections than the requests need at
      // our own limit (a server allowing no stream at all must not make us open them forever).
      if (!opening && connections_.size() < streams_.size() / ours + 2) OpenConnection();
      return;
    }
    Stream* s = Find(waiting_.front());
    waiting_.pop_front();
    if (s == nullptr) continue;
    s->waiting = false;
    Submit(target, s);
  }
}

void Http2Transport::Submit(Connection* c, Stream* s) {
  const HttpRequest& r = s->request;
  const std::string path = prefix_ + r.path;
  const std::string& token = context_.tokens->Token();
  const std::string authorization = token.empty() ? "" : "Bearer " + token;
  const bool has_body =
      !r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH";
  const std::string type = r.content_type.empty() ? "application/json" : r.content_type;
  const std::string length = std::to_string(r.body.size());
  nghttp2_nv nv[10];
  size_t n = 0;
  nv[n++] = Header(":method", r.method);
  nv[n++] = Header(":scheme", "https");
  nv[n++] = Header(":authority", authority_);
  nv[n++] = Header(":path", path);
  nv[n++] = Header("user-agent", context_.user_agent);
  nv[n++] = Header("accept", r.accept.empty() ? std::string_view("*/*") : r.accept);
  if (!authorization.empty()) nv[n++] = Header("authorization", authorization);
  if (has_body) {
    nv[n++] = Header("content-type", type);
    nv[n++] = Header("content-length", length);
  }
  nghttp2_data_provider body{};
  body.read_callback = &Http2Callbacks::ReadBody;
  const int32_t stream_id =
      H2().submit_request(c->h2, nullptr, nv, n, r.body.empty() ? nullptr : &body, s);
  if (stream_id < 0) {
    Complete(s, base::Status::Error(std::string("cannot send the request: ") +
                                    H2().strerror(stream_id)));
    return;
  }
  s->connection = c;
  s->stream_id = stream_id;
  ++c->active;
}

void Http2Transport::OpenConnection() {
  auto owned = std::make_unique<Connection>();
  Connection* c = owned.get();
  c->owner = this;
  c->serial = next_connection_++;
  c->timer = base::NewTimer(loop_, c);
  connections_.push_back(std::move(owned));
  uv_timer_start(c->timer, &Http2Callbacks::OnConnectionTimer,
                 static_cast<uint64_t>(context_.connect_timeout.count()), 0);

  struct Resolve {
    uv_getaddrinfo_t request;
    std::weak_ptr<bool> alive;
    Http2Transport* transport;
    uint64_t serial;
  };
  auto* resolve = new Resolve{{}, alive_, this, c->serial};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = uv_getaddrinfo(
      loop_, &resolve->request,
      [](uv_getaddrinfo_t* req, int status, addrinfo* result) {
        std::unique_ptr<Resolve> r(reinterpret_cast<Resolve*>(req));
        auto alive = r->alive.lock();
        Connection* conn = nullptr;
        if (alive && *alive) {
          for (auto& candidate : r->transport->connections_) {
            if (candidate->serial == r->serial && !candidate->dead) conn = candidate.get();
          }
        }
        if (conn == nullptr) {
          if (result != nullptr) uv_freeaddrinfo(result);
          return;
        }
        conn->addresses = result;
        conn->next_address = result;
        conn->owner->Guard("http2 resolve callback", [&] {
          if (status < 0) {
            conn->owner->Fail(conn,
                              "cannot resolve " + conn->owner->host_ + ": " + uv_strerror(status));
            return;
          }
          conn->state = Connection::State::kConnecting;
          conn->owner->ConnectNext(conn);
        });
      },
      host_.c_str(), port_.c_str(), &hints);
  if (rc != 0) {
    delete resolve;
    Fail(c, "cannot resolve " + host_ + ": " + uv_strerror(rc));
  }
}

void Http2Transport::ConnectNext(Connection* c) {
  c->CloseSocket();
  while (c->next_address != nullptr) {
    addrinfo* a = c->next_address;
    c->next_address = a->ai_next;
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      c->last_error = std::strerror(errno);
      continue;
    }
    int one = 1, idle = 30;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      c->last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    auto* socket = new PolledSocket;
    socket->fd = fd;
    if (int rc = uv_poll_init_socket(loop_, &socket->poll, fd); rc != 0) {
      c->last_error = std::string("cannot poll a socket: ") + uv_strerror(rc);
      close(fd);
      delete socket;
      continue;
    }
    socket->poll.data = c;
    c->socket = socket;
    c->state = Connection::State::kConnecting;
    c->poll_events = UV_WRITABLE;
    UpdatePoll(c);
    return;
  }
  Fail(c, "cannot connect to " + Where() + ": " + c->last_error);
}

void Http2Transport::OnEvents(Connection* c, int status, int events) {
  if (c->dead) return;
  // An error status comes from a handle libuv has stopped: the next UpdatePoll starts it again.
  if (status < 0 && c->socket != nullptr) c->socket->started_events = 0;
  switch (c->state) {
    case Connection::State::kResolving:
      return;
    case Connection::State::kConnecting: {
      // The socket's own error first: libuv's status for a failed connect says less.
      int error = 0;
      socklen_t length = sizeof(error);
      if (getsockopt(c->socket->fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error == 0 && status < 0) error = -status;
      if (error != 0) {
        c->last_error = std::strerror(error);
        ConnectNext(c);
        return;
      }
      StartTls(c);
      return;
    }
    case Connection::State::kHandshake:
      Handshake(c);
      return;
    case Connection::State::kSettings:
    case Connection::State::kReady:
      if (status < 0 || (events & UV_READABLE) != 0) ReadFrom(c);
      if (!c->dead && (events & UV_WRITABLE) != 0) Flush(c);
      return;
  }
}

std::shared_ptr<Http2Transport::TlsCredentials> Http2Transport::Tls(std::string* error,
                                                                    TransportFault* fault) {
  std::shared_ptr<const std::string> ca = context_.current_ca();
  std::shared_ptr<const ClientCertPair> cert =
      context_.current_cert ? context_.current_cert() : nullptr;
  if (tls_ != nullptr && tls_ca_ == ca && tls_cert_ == cert) return tls_;
  auto creds = std::make_shared<TlsCredentials>();
  if (int rc = Gnutls().certificate_allocate_credentials(&creds->cred); rc < 0) {
    *error = std::string("TLS set-up failed: ") + Gnutls().strerror(rc);
    return nullptr;
  }
  const TlsConfig& tls = context_.credentials->tls;
  if (!tls.insecure_skip_tls_verify) {
    if (ca != nullptr && !ca->empty()) {
      gnutls_datum_t d{reinterpret_cast<unsigned char*>(const_cast<char*>(ca->data())),
                       static_cast<unsigned>(ca->size())};
      int rc = Gnutls().certificate_set_x509_trust_mem(creds->cred, &d, GNUTLS_X509_FMT_PEM);
      if (rc <= 0) {
        *error = rc == 0 ? "the CA bundle holds no certificate"
                         : std::string("the CA bundle cannot be used: ") + Gnutls().strerror(rc);
        *fault = TransportFault::kUntrustedServer;
        return nullptr;
      }
    } else if (int rc = Gnutls().certificate_set_x509_system_trust(creds->cred); rc < 0) {
      *error =
          std::string("the system's CA certificates cannot be loaded: ") + Gnutls().strerror(rc);
      return nullptr;
    }
  }
  if (cert != nullptr) {
    gnutls_datum_t cert_pem{
        reinterpret_cast<unsigned char*>(const_cast<char*>(cert->cert_pem.data())),
        static_cast<unsigned>(cert->cert_pem.size())};
    gnutls_datum_t key_pem{
        reinterpret_cast<unsigned char*>(const_cast<char*>(cert->key_pem.data())),
        static_cast<unsigned>(cert->key_pem.size())};
    if (int rc = Gnutls().certificate_set_x509_key_mem(creds->cred, &cert_pem, &key_pem,
                                                       GNUTLS_X509_FMT_PEM);
        rc < 0) {
      *error =
          std::string("the client certificate or key cannot be used: ") + Gnutls().strerror(rc);
      *fault = TransportFault::kClientCertificate;
      return nullptr;
    }
  }
  tls_ = std::move(creds);
  tls_ca_ = std::move(ca);
  tls_cert_ = std::move(cert);
  return tls_;
}

void Http2Transport::StartTls(Connection* c) {
  std::string error;
  TransportFault fault = TransportFault::kOther;
  c->credentials = Tls(&error, &fault);
  if (c->credentials == nullptr) {
    Fail(c, "TLS to " + Where() + ": " + error, fault);
    return;
  }
  c->cert = tls_cert_;
  int rc = Gnutls().init(&c->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
  if (rc >= 0) rc = Gnutls().set_default_priority(c->tls);
  if (rc >= 0) rc = Gnutls().credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->credentials->cred);
  if (rc >= 0 && sni_) {
    const std::string& name = context_.credentials->tls.server_name.empty()
                                  ? host_
                                  : context_.credentials->tls.server_name;
    rc = Gnutls().server_name_set(c->tls, GNUTLS_NAME_DNS, name.data(), name.size());
  }
  if (rc >= 0) {
    gnutls_datum_t protocols[2] = {
        {reinterpret_cast<unsigned char*>(const_cast<char*>("h2")), 2},
        {reinterpret_cast<unsigned char*>(const_cast<char*>("http/1.1")), 8}};
    rc = Gnutls().alpn_set_protocols(c->tls, protocols, 2, 0);
  }
  if (rc < 0) {
    Fail(c, std::string("TLS set-up failed: ") + Gnutls().strerror(rc));
    return;
  }
  if (!verify_name_.empty()) Gnutls().session_set_verify_cert(c->tls, verify_name_.c_str(), 0);
  Gnutls().transport_set_int2(c->tls, c->socket->fd, c->socket->fd);
  // Reads through TlsPull (the connection as its pointer); writes stay GnuTLS's own, on the fd.
  Gnutls().transport_set_ptr2(
      c->tls, c, reinterpret_cast<gnutls_transport_ptr_t>(static_cast<intptr_t>(c->socket->fd)));
  Gnutls().transport_set_pull_function(c->tls, &Http2Callbacks::TlsPull);
  Gnutls().transport_set_pull_timeout_function(c->tls, &Http2Callbacks::TlsPullTimeout);
  c->state = Connection::State::kHandshake;
  Handshake(c);
}

void Http2Transport::Handshake(Connection* c) {
  c->StartRead();
  int rc;
  for (int idle_calls = 0;;) {
    const size_t before = c->in_pos;
    rc = Gnutls().handshake(c->tls);
    if (rc != GNUTLS_E_AGAIN && rc != GNUTLS_E_INTERRUPTED) break;
    // GnuTLS may answer EAGAIN with bytes still read ahead (a message handled, call again): the
    // poll would not report them.
    if (!c->HasReadAhead()) break;
    if (!c->StillReading(before, &idle_calls)) {
      Fail(c, "TLS handshake with " + Where() + ": the TLS library stopped reading");
      return;
    }
  }
  // What the handshake left read ahead is the server's first frames: ReadFrom takes them.
  if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
    c->poll_events = Gnutls().record_get_direction(c->tls) == 1 ? UV_WRITABLE : UV_READABLE;
    UpdatePoll(c);
    return;
  }
  if (rc < 0) {
    std::string why = Gnutls().strerror(rc);
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
      gnutls_datum_t text{};
      unsigned status = Gnutls().session_get_verify_cert_status(c->tls);
      if (Gnutls().certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0) {
        why = std::string(reinterpret_cast<const char*>(text.data), text.size);
        (*Gnutls().free)(text.data);
        while (!why.empty() && (why.back() == ' ' || why.back() == '.')) why.pop_back();
      }
      const std::string& name = context_.credentials->tls.server_name;
      Fail(c,
           "the TLS certificate of " + Where() + (name.empty() ? "" : " (for " + name + ")") +
               " is not trusted: " + why,
           TransportFault::kUntrustedServer);
      return;
    }
    Fail(c, "TLS handshake with " + Where() + " failed: " + why);
    return;
  }
  gnutls_datum_t alpn{};
  const bool h2 = Gnutls().alpn_get_selected_protocol(c->tls, &alpn) == 0 && alpn.size == 2 &&
                  std::memcmp(alpn.data, "h2", 2) == 0;
  if (!h2) {
    SwitchToHttp1(c);
    return;
  }
  nghttp2_session_callbacks* callbacks = nullptr;
  if (H2().callbacks_new(&callbacks) != 0) {
    Fail(c, "out of memory");
    return;
  }
  H2().set_on_header(callbacks, &Http2Callbacks::OnHeader);
  H2().set_on_frame_recv(callbacks, &Http2Callbacks::OnFrameRecv);
  H2().set_on_data_chunk_recv(callbacks, &Http2Callbacks::OnDataChunk);
  H2().set_on_stream_close(callbacks, &Http2Callbacks::OnStreamClose);
  rc = H2().session_client_new(&c->h2, callbacks, c);
  H2().callbacks_del(callbacks);
  if (rc != 0) {
    Fail(c, std::string("HTTP/2 set-up failed: ") + H2().strerror(rc));
    return;
  }
  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                       {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  H2().submit_settings(c->h2, NGHTTP2_FLAG_NONE, settings, 2);
  H2().set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
  c->state = Connection::State::kSettings;
  c->poll_events = UV_READABLE;
  if (Flush(c)) ReadFrom(c);  // TLS may hold the server's first frames already
}

void Http2Transport::ReadFrom(Connection* c) {
  uint8_t buffer[16384];
  c->StartRead();
  for (int idle_calls = 0;;) {
    const size_t before = c->in_pos;
    ssize_t n = Gnutls().record_recv(c->tls, buffer, sizeof(buffer));
    if (n == GNUTLS_E_AGAIN) {
      // After a TLS 1.3 post-handshake message (a session ticket) GnuTLS answers EAGAIN, asking
      // to be called again: with bytes still read ahead, it is, here (the poll would not report
      // them).
      if (!c->HasReadAhead()) break;
      if (!c->StillReading(before, &idle_calls)) {
        Fail(c, "reading from " + Where() + ": the TLS library stopped reading");
        return;
      }
      continue;
    }
    if (n == GNUTLS_E_INTERRUPTED) continue;
    if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
      Fail(c, "the server closed the connection");
      return;
    }
    if (n < 0) {
      Fail(c, "reading from " + Where() + ": " + Gnutls().strerror(static_cast<int>(n)));
      return;
    }
    ssize_t rv = H2().mem_recv(c->h2, buffer, static_cast<size_t>(n));
    if (rv < 0) {
      Fail(c, "HTTP/2 error on the connection to " + Where() + ": " +
                  H2().strerror(static_cast<int>(rv)));
      return;
    }
  }
  Flush(c);
}

bool Http2Transport::Flush(Connection* c) {
  if (c->dead || c->h2 == nullptr) return !c->dead;
  for (;;) {
    if (c->out_offset == c->out.size()) {
      c->out.clear();
      c->out_offset = 0;
      while (c->out.size() < kSendGather) {
        const uint8_t* data = nullptr;
        ssize_t n = H2().mem_send(c->h2, &data);
        if (n < 0) {
          Fail(c, "HTTP/2 error on the connection to " + Where() + ": " +
                      H2().strerror(static_cast<int>(n)));
          return false;
        }
        if (n == 0) break;
        c->out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
      }
      if (c->out.empty()) break;
    }
    ssize_t n =
        Gnutls().record_send(c->tls, c->out.data() + c->out_offset, c->out.size() - c->out_offset);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
      break;  // sent again, as is, when writable
    if (n < 0) {
      Fail(c, "writing to " + Where() + ": " + Gnutls().strerror(static_cast<int>(n)));
      return false;
    }
    c->out_offset += static_cast<size_t>(n);
  }
  if (c->out.empty() && c->out.capacity() > kSendGather) std::string().swap(c->out);
  c->poll_events = UV_READABLE | (c->out_offset < c->out.size() ? UV_WRITABLE : 0);
  UpdatePoll(c);
  if (!H2().want_read(c->h2) && !H2().want_write(c->h2) && c->out_offset == c->out.size()) {
    c->dead = true;  // the session is over (after a GOAWAY, once its streams ended)
    c->CloseSocket();
  }
  return true;
}

void Http2Transport::UpdatePoll(Connection* c) {
  if (c->socket == nullptr || c->socket->started_events == c->poll_events) return;
  c->socket->started_events = c->poll_events;
  uv_poll_start(&c->socket->poll, c->poll_events, &Http2Callbacks::OnPoll);
}

void Http2Transport::Fail(Connection* c, const std::string& why, TransportFault fault) {
  if (c->dead) return;
  const bool was_ready = c->state == Connection::State::kReady;
  c->dead = true;
  c->CloseSocket();
  size_t failed = 0;
  for (auto& [id, s] : streams_) {
    if (s->connection != c) continue;
    s->connection = nullptr;
    s->stream_id = -1;
    s->response.fault = fault;
    Complete(s.get(), base::Status::Error(why));
    ++failed;
  }
  bool others_opening = false;
  for (auto& other : connections_) {
    if (!other->dead && other->state != Connection::State::kReady) others_opening = true;
  }
  if (!was_ready && !others_opening) {
    // Nothing else is opening: the waiting requests fail with what stopped this one (as each
    // would have failed on its own connection).
    while (!waiting_.empty()) {
      Stream* s = Find(waiting_.front());
      waiting_.pop_front();
      if (s == nullptr) continue;
      s->waiting = false;
      s->response.fault = fault;
      Complete(s, base::Status::Error(why));
      ++failed;
    }
  }
  if (failed > 0) {
    spdlog::info("HTTP/2 connection {} to {} ended, {} requests failed: {}", c->serial, Where(),
                 failed, why);
  }
}

void Http2Transport::SwitchToHttp1(Connection* c) {
  gnutls_datum_t alpn{};
  std::string offered = Gnutls().alpn_get_selected_protocol(c->tls, &alpn) == 0
                            ? std::string(reinterpret_cast<const char*>(alpn.data), alpn.size)
                            : "none";
  spdlog::info("{} does not offer HTTP/2 (ALPN: {}); using HTTP/1.1 through libcurl", Where(),
               offered);
  mode_ = Mode::kHttp1;
  c->dead = true;
  c->CloseSocket();
  HandWaitingToFallback();
}

void Http2Transport::HandWaitingToFallback() {
  while (!waiting_.empty()) {
    auto it = streams_.find(waiting_.front());
    waiting_.pop_front();
    if (it == streams_.end()) continue;
    std::unique_ptr<Stream> s = std::move(it->second);
    streams_.erase(it);
    ++streams_erased_;
    if (s->has_deadline) deadlines_.erase(s->deadline_at);
    fallback_(s->id, std::move(s->request), std::move(s->done), std::move(s->callbacks));
  }
}

void Http2Transport::OnConnectionTimer(Connection* c) {
  if (c->dead) return;
  if (c->state != Connection::State::kReady) {
    Fail(c, "connecting to " + Where() + " timed out after " +
                std::to_string(context_.connect_timeout.count()) + " ms");
    return;
  }
  if (c->active == 0) {
    // Idle: say goodbye and close.
    H2().terminate_session(c->h2, NGHTTP2_NO_ERROR);
    Flush(c);
    c->dead = true;
  }
}

bool Http2Transport::DeliverHeaders(Stream* s) {
  if (s->headers_delivered) return true;
  s->headers_delivered = true;
  s->response.http_major = 2;
  const long code = s->response.status;
  s->buffer_body = !s->request.stream || code < 200 || code >= 300;
  const RequestId id = s->id;
  if (s->callbacks.on_headers) {
    const uint64_t erased = streams_erased_;
    base::Status st = base::CatchAll("on_headers", [&] {
      Fault("header");
      s->callbacks.on_headers(s->response);
    });
    s = FindAfterCallback(s, id, erased);  // the callback may have cancelled it
    if (s == nullptr) return false;
    if (!st.ok()) {
      Abort(s, st.message());
      return false;
    }
  }
  if (!s->buffer_body) s->response.headers = {};
  return true;
}

void Http2Transport::Data(Stream* s, const uint8_t* data, size_t len) {
  if (s->completed) return;
  if (!s->headers_delivered && !DeliverHeaders(s)) return;
  std::string_view chunk(reinterpret_cast<const char*>(data), len);
  if (s->buffer_body) {
    const size_t limit = s->request.max_body_bytes;
    if (limit > 0 && s->response.body.size() + len > limit) {
      Abort(s, "body larger than " + std::to_string(limit) + " bytes");
      return;
    }
    base::Status st = base::CatchAll("http2 body", [&] { s->response.body.append(chunk); });
    if (!st.ok()) Abort(s, st.message());
    return;
  }
  if (!s->callbacks.on_data) return;
  const RequestId id = s->id;
  const uint64_t erased = streams_erased_;
  bool more = true;
  base::Status st = base::CatchAll("stream callback", [&] {
    Fault("write");
    more = s->callbacks.on_data(chunk);
  });
  s = FindAfterCallback(s, id, erased);  // the callback may have cancelled it
  if (s == nullptr) return;
  if (!st.ok()) {
    Abort(s, st.message());
  } else if (!more) {
    Abort(s, "aborted by the stream consumer", /*log=*/false);
  }
}

void Http2Transport::Abort(Stream* s, const std::string& why, bool log) {
  // A failing callback is logged here, as libcurl's path does; a timeout or the consumer's own
  // stop is its caller's to report.
  if (log) spdlog::error("http {} {}: {}", s->request.method, s->request.path, why);
  if (s->connection != nullptr && s->connection->h2 != nullptr) {
    H2().set_stream_user_data(s->connection->h2, s->stream_id, nullptr);
    H2().submit_rst_stream(s->connection->h2, NGHTTP2_FLAG_NONE, s->stream_id, NGHTTP2_CANCEL);
  }
  s->connection = nullptr;
  s->stream_id = -1;
  Complete(s, base::Status::Error(why));
}

void Http2Transport::Complete(Stream* s, base::Status transport) {
  if (s->completed) {
    // Already ended, not yet delivered: a failure found meanwhile (on_headers threw) wins.
    if (s->result.ok() && !transport.ok()) s->result = std::move(transport);
    return;
  }
  s->completed = true;
  s->result = std::move(transport);
  if (s->has_deadline) {
    deadlines_.erase(s->deadline_at);
    s->has_deadline = false;
  }
  if (s->waiting) {
    waiting_.erase(s->waiting_at);
    s->waiting = false;
  }
  completed_.push_back(s->id);
  if (in_io_ == 0) {
    uv_timer_start(kick_timer_, &Http2Callbacks::OnKick, 0, 0);
  }
}

void Http2Transport::DeliverCompletions() {
  std::weak_ptr<bool> alive = alive_;
  while (!completed_.empty()) {
    std::vector<RequestId> batch;
    batch.swap(completed_);
    for (size_t i = 0; i < batch.size(); ++i) {
      Stream* found = Find(batch[i]);
      if (found == nullptr) continue;  // cancelled meanwhile
      if (found->result.ok() && !found->headers_delivered) {
        DeliverHeaders(found);  // a failure there becomes the result
        if (auto a = alive.lock(); !a || !*a) return;
        found = Find(batch[i]);
        if (found == nullptr) continue;  // on_headers cancelled it
      }
      auto it = streams_.find(batch[i]);
      std::unique_ptr<Stream> s = std::move(it->second);
      streams_.erase(it);
      ++streams_erased_;
      if (!s->done) continue;
      const std::string where = s->request.method + " " + s->request.path;
      base::Status st = base::CatchAll("http completion callback", [&] {
        s->done(std::move(s->result), std::move(s->response));
      });
      if (!st.ok()) spdlog::error("http {}: {}", where, st.message());
      if (auto a = alive.lock(); !a || !*a) return;  // a callback destroyed the client
    }
  }
}

void Http2Transport::OnDeadlines() {
  const auto now = std::chrono::steady_clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const RequestId id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    Stream* s = Find(id);
    if (s == nullptr) continue;
    s->has_deadline = false;
    const std::string why = "timed out after " + std::to_string(s->timeout.count()) + " ms";
    if (s->connection != nullptr) {
      Abort(s, why, /*log=*/false);
    } else {
      Complete(s, base::Status::Error(why + " waiting for a connection"));
    }
  }
}

void Http2Transport::AfterIo(bool deliver) {
  base::Status st = base::CatchAll("http2 client", [&] {
    if (!waiting_.empty()) Admit();
    for (auto& c : connections_) {
      if (c->dead || c->state < Connection::State::kSettings) continue;
      if (!Flush(c.get())) continue;
      if (c->dead) continue;
      if (c->going_away && c->active == 0) {
        c->dead = true;
        continue;
      }
      const bool idle = c->state == Connection::State::kReady && c->active == 0;
      if (idle && !c->idle_armed) {
        c->idle_armed = true;
        uv_timer_start(c->timer, &Http2Callbacks::OnConnectionTimer,
                       static_cast<uint64_t>(options_.idle_timeout.count()), 0);
      } else if (!idle && c->idle_armed) {
        c->idle_armed = false;
        uv_timer_stop(c->timer);
      }
    }
    // Closed connections go (their streams have been completed or sent again).
    for (auto it = connections_.begin(); it != connections_.end();) {
      it = (*it)->dead ? connections_.erase(it) : std::next(it);
    }
    // A refused stream went back to waiting: admit it on what is left.
    if (!waiting_.empty()) {
      Admit();
      for (auto& c : connections_) {
        if (!c->dead && c->state == Connection::State::kReady) Flush(c.get());
      }
    }
    if (deadlines_.empty()) {
      uv_timer_stop(deadline_timer_);
    } else {
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadlines_.begin()->first - std::chrono::steady_clock::now());
      uv_timer_start(
          deadline_timer_,
          [](uv_timer_t* h) {
            auto* t = static_cast<Http2Transport*>(h->data);
            t->Guard("http2 deadline timer", [t] { t->OnDeadlines(); });
          },
          static_cast<uint64_t>(std::max<int64_t>(0, wait.count() + 1)), 0);
    }
  });
  if (!st.ok()) spdlog::error("http2 client: {}", st.message());
  if (!completed_.empty()) {
    if (deliver) {
      std::weak_ptr<bool> alive = alive_;
      DeliverCompletions();
      if (auto a = alive.lock(); !a || !*a) return;  // a callback destroyed the client
    } else {
      uv_timer_start(kick_timer_, &Http2Callbacks::OnKick, 0, 0);
    }
  }
  UpdateLoopRefs();
}

void Http2Transport::UpdateLoopRefs() {
  // An open connection keeps the loop running only while the transport has requests: a daemon
  // that has stopped its watches must see uv_run return (as libcurl's idle connections let it).
  const bool busy = !streams_.empty();
  for (auto& c : connections_) {
    if (c->dead) continue;
    for (uv_handle_t* h :
         {reinterpret_cast<uv_handle_t*>(c->timer),
          c->socket != nullptr ? reinterpret_cast<uv_handle_t*>(&c->socket->poll) : nullptr}) {
      if (h == nullptr) continue;
      if (busy) {
        uv_ref(h);
      } else {
        uv_unref(h);
      }
    }
  }
}

}  // namespace kubeclient
