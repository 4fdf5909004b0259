#include "kubeclient/transport/curl_transport.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/catch_all.h"
#include "base/http_head.h"
#include "base/redacted_url.h"
#include "base/strings.h"
#include "base/uv_timer.h"
#include "kubeclient/dl/curl_library.h"
#include "kubeclient/transport/server_url.h"

namespace kubeclient {
namespace {

CURLM* Multi(void* m) { return static_cast<CURLM*>(m); }

// libcurl's result as ClassifyApiError reads it (api_error.h): the same faults as
// Http2Transport's handshake reports.
TransportFault FaultOf(CURLcode code) {
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:  // the chain or the name does not verify
    case CURLE_SSL_CACERT_BADFILE:        // the CA cannot be used
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      return TransportFault::kUntrustedServer;
    case CURLE_SSL_CERTPROBLEM:  // the client certificate or key cannot be used
      return TransportFault::kClientCertificate;
    default:
      return TransportFault::kOther;
  }
}

// CURLOPT_BUFFERSIZE (libcurl's default: 16 KiB; a larger body arrives in more pieces).
// Streamed requests (watches): libcurl's minimum. A watch lives for minutes with mostly small
// events, and over HTTP/2 the transfer that reads for its connection fills its buffer with other
// streams' frames too: 1,000 watches through nghttpx held 1.9 MiB less.
constexpr long kStreamBufferBytes = 1024;
// Other requests: their buffers are freed when they end, but the daemon's start lists every
// watched object once, and 1,000 lists left 1,000 freed 16 KiB buffers between long-lived
// allocations (8 MiB of free heap, 2 MiB of it resident); at 4 KiB the holes are reused.
constexpr long kRequestBufferBytes = 4096;

// libcurl's functions. Create() loads the library before a transfer exists, so every use below
// finds it loaded.
const CurlLibrary& Curl() { return *LoadCurl().value(); }

// Not copied: libcurl reads the bytes while the easy handle lives (a connection keeps a copy of
// its own), and the caller keeps them alive that long. A copy per transfer would cost every watch
// the CA's size (about 1.1 KiB for a cluster's RSA CA) for its whole life.
curl_blob Blob(const std::string& s) {
  return curl_blob{const_cast<char*>(s.data()), s.size(), CURL_BLOB_NOCOPY};
}

}  // namespace

// One uv_poll per socket, from the first time libcurl wants it polled until libcurl closes it.
// libcurl's CURL_POLL_REMOVE only stops polling (the socket may go back to the connection cache
// and be polled again); the handle is closed, and only then the socket, from libcurl's
// close-socket callback. Closing the fd before libuv has closed its handle would let the number
// be reused by a new connection whose epoll registration libuv's late close then deletes.
struct CurlTransport::SocketContext {
  uv_poll_t poll;
  int fd;
  CurlTransport* transport;
};

namespace {
void CloseSocketContext(uv_poll_t* poll) {
  uv_poll_stop(poll);
  uv_close(reinterpret_cast<uv_handle_t*>(poll), [](uv_handle_t* h) {
    auto* ctx = static_cast<CurlTransport::SocketContext*>(h->data);
    close(ctx->fd);
    delete ctx;
  });
}
}  // namespace

struct CurlTransport::Transfer {
  CurlTransport* transport = nullptr;
  RequestId id = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  curl_slist* connect_to = nullptr;
  HttpRequest request;
  HttpDoneCallback done;
  StreamCallbacks stream;
  HttpResponse response;
  bool headers_delivered = false;
  long status_line_code = 0;  // from the last status line seen
  bool buffer_body = true;
  bool cancelled = false;
  bool added = false;      // handed to libcurl (Admit)
  bool confirmed = false;  // libcurl is about to send it on a ready connection (prereq)
  // libcurl reported the end of the transfer (result in `curl_result`); finished after libcurl
  // returns.
  bool completed = false;
  CURLcode curl_result = CURLE_OK;
  // A callback of this transfer failed: finished with `abort_reason` after libcurl returns.
  bool aborted = false;
  std::string abort_reason;
  char error[CURL_ERROR_SIZE] = {0};
  // The CA this transfer verifies against: libcurl reads it in place (Blob) while the easy handle
  // lives, and the client may re-read a changed CA file meanwhile.
  std::shared_ptr<const std::string> ca_pem;
  // Likewise the client certificate and key, and which generation of them it was started with.
  std::shared_ptr<const ClientCertPair> cert;

  ~Transfer() {
    if (easy != nullptr) Curl().easy_cleanup(easy);
    if (headers != nullptr) Curl().slist_free_all(headers);
    if (connect_to != nullptr) Curl().slist_free_all(connect_to);
  }

  // Delivers on_headers once; false when the callback threw (the transfer is then aborted).
  bool DeliverHeaders() {
    if (headers_delivered) return true;
    headers_delivered = true;
    long code = 0;
    Curl().easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    if (code == 0) code = status_line_code;
    response.status = code;
    long version = 0;
    Curl().easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
    response.http_major = version == CURL_HTTP_VERSION_2_0 ? 2 : version != 0 ? 1 : 0;
    buffer_body = !request.stream || code < 200 || code >= 300;
    if (stream.on_headers && !cancelled) {
      base::Status s = base::CatchAll("on_headers", [&] { stream.on_headers(response); });
      if (!s.ok()) {
        Abort(s);
        return false;
      }
    }
    // A streamed success (a watch) has no further use for its headers, and would hold them
    // (about half a KiB) for its whole life.
    if (!buffer_body) response.headers = {};
    return true;
  }

  // Records why the transfer must end (the first reason wins); the caller then makes libcurl stop
  // it (a write or header callback returns 0) or lets ProcessMessages finish it.
  void Abort(const base::Status& why) noexcept {
    if (!aborted) {
      aborted = true;
      try {
        abort_reason = why.message();
      } catch (...) {
        abort_reason.clear();  // Finish then names libcurl's error
      }
      if (transport != nullptr) transport->QueueFinish(id);
    }
    // Named by its whole URL, as logs may show it: a request to a bare URL (--manifest-url) has no
    // path of its own.
    try {
      spdlog::error("http {} {}: {}", request.method,
                    transport != nullptr
                        ? base::RedactedUrl(transport->context_.credentials->server + request.path)
                        : request.path,
                    why.message());
    } catch (...) {
    }
  }
};

CurlTransport::CurlTransport(TransportContext context)
    : context_(std::move(context)), alive_(std::make_shared<bool>(true)) {}

base::Result<std::unique_ptr<CurlTransport>> CurlTransport::Create(TransportContext context) {
  if (const auto& curl = LoadCurl(); !curl.ok()) return curl.status();
  std::unique_ptr<CurlTransport> t(new CurlTransport(std::move(context)));
  const Credentials& credentials = *t->context_.credentials;
  ServerUrl url;
  if (!credentials.tls.server_name.empty() && SplitServerUrl(credentials.server, &url)) {
    // Verify (and send SNI for) tls-server-name while connecting to the URL's address.
    const std::string& name = credentials.tls.server_name;
    const std::string host = url.ipv6 ? "[" + url.host + "]" : url.host;
    t->url_base_ = "https://" + name + ":" + url.port + url.rest;
    t->connect_to_ = name + ":" + url.port + ":" + host + ":" + url.port;
  }
  t->multi_ = Curl().multi_init();
  if (t->multi_ == nullptr) return base::Status::Error("curl_multi_init failed");
  CURLM* multi = Multi(t->multi_);
  Curl().multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &CurlTransport::OnSocket);
  Curl().multi_setopt(multi, CURLMOPT_SOCKETDATA, t.get());
  Curl().multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &CurlTransport::OnTimer);
  Curl().multi_setopt(multi, CURLMOPT_TIMERDATA, t.get());
  Curl().multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  Curl().multi_setopt(multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
                      t->context_.max_streams_per_connection);
  t->timer_ = base::NewTimer(t->context_.loop, t.get());
  return t;
}

CurlTransport::~CurlTransport() {
  *alive_ = false;
  for (auto& [id, transfer] : transfers_) {
    if (transfer->added) Curl().multi_remove_handle(Multi(multi_), transfer->easy);
  }
  transfers_.clear();
  if (multi_ != nullptr) Curl().multi_cleanup(Multi(multi_));
  for (auto& [fd, ctx] : sockets_) CloseSocketContext(&ctx->poll);
  sockets_.clear();
  if (timer_ != nullptr) base::CloseTimer(timer_);
}

void CurlTransport::Start(RequestId id, HttpRequest request, HttpDoneCallback done,
                          StreamCallbacks stream) {
  std::shared_ptr<const std::string> ca_pem = context_.current_ca();
  auto transfer = std::make_unique<Transfer>();
  Transfer* t = transfer.get();
  t->transport = this;
  t->id = id;
  t->request = std::move(request);
  t->done = std::move(done);
  t->stream = std::move(stream);
  t->easy = Curl().easy_init();
  CURL* e = t->easy;

  const TlsConfig& tls = context_.credentials->tls;
  const std::string url =
      (url_base_.empty() ? context_.credentials->server : url_base_) + t->request.path;
  if (!connect_to_.empty()) {
    t->connect_to = Curl().slist_append(nullptr, connect_to_.c_str());
    Curl().easy_setopt(e, CURLOPT_CONNECT_TO, t->connect_to);
  }
  Curl().easy_setopt(e, CURLOPT_URL, url.c_str());
  Curl().easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  if (t->request.follow_redirects) {
    Curl().easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    Curl().easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    Curl().easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  }
  Curl().easy_setopt(e, CURLOPT_PRIVATE, t);
  Curl().easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  Curl().easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  // libcurl gives every transfer a receive buffer for its whole life (16 KiB by default).
  Curl().easy_setopt(e, CURLOPT_BUFFERSIZE,
                     t->request.stream ? kStreamBufferBytes : kRequestBufferBytes);
  Curl().easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  Curl().easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  Curl().easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  Curl().easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  Curl().easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
  Curl().easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
  Curl().easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(context_.connect_timeout.count()));
  auto timeout = t->request.timeout.count() > 0 ? t->request.timeout
                 : t->request.stream            ? std::chrono::milliseconds(0)
                                                : context_.request_timeout;
  Curl().easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  Curl().easy_setopt(e, CURLOPT_USERAGENT, context_.user_agent.c_str());
  if (tls.insecure_skip_tls_verify) {
    Curl().easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    Curl().easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (ca_pem != nullptr && !ca_pem->empty()) {
    t->ca_pem = std::move(ca_pem);  // the blob below points into it
    curl_blob ca = Blob(*t->ca_pem);
    Curl().easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (std::shared_ptr<const ClientCertPair> pair = context_.current_cert(); pair != nullptr) {
    t->cert = std::move(pair);  // the blobs below point into it
    curl_blob cert = Blob(t->cert->cert_pem);
    curl_blob key = Blob(t->cert->key_pem);
    Curl().easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
    Curl().easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    Curl().easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    Curl().easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  }
  curl_slist* headers = nullptr;
  if (!t->request.accept.empty()) {
    headers = Curl().slist_append(headers, ("Accept: " + t->request.accept).c_str());
  }
  if (const std::string& token = context_.tokens->Token(); !token.empty()) {
    headers = Curl().slist_append(headers, ("Authorization: Bearer " + token).c_str());
  }
  if (t->request.method != "GET" && t->request.method != "HEAD") {
    Curl().easy_setopt(e, CURLOPT_CUSTOMREQUEST, t->request.method.c_str());
  }
  if (!t->request.body.empty() || t->request.method == "POST" || t->request.method == "PUT" ||
      t->request.method == "PATCH") {
    std::string type =
        t->request.content_type.empty() ? "application/json" : t->request.content_type;
    headers = Curl().slist_append(headers, ("Content-Type: " + type).c_str());
    Curl().easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(t->request.body.size()));
    Curl().easy_setopt(e, CURLOPT_COPYPOSTFIELDS, t->request.body.c_str());
    // COPYPOSTFIELDS turns the request into a POST; keep the intended method.
    Curl().easy_setopt(e, CURLOPT_CUSTOMREQUEST, t->request.method.c_str());
  }
  // Never send "Expect: 100-continue": the API server answers at once.
  headers = Curl().slist_append(headers, "Expect:");
  Curl().easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  Curl().easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &CurlTransport::OnCloseSocket);
  Curl().easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
  Curl().easy_setopt(e, CURLOPT_HEADERFUNCTION, &CurlTransport::OnHeader);
  Curl().easy_setopt(e, CURLOPT_HEADERDATA, t);
  Curl().easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlTransport::OnWrite);
  Curl().easy_setopt(e, CURLOPT_WRITEDATA, t);
  Curl().easy_setopt(e, CURLOPT_PREREQFUNCTION, &CurlTransport::OnPrereq);
  Curl().easy_setopt(e, CURLOPT_PREREQDATA, t);

  t->headers = headers;

  transfers_[id] = std::move(transfer);
  // Room for every transfer to be queued for finishing without an allocation (QueueFinish).
  finishing_.reserve(transfers_.size());
  waiting_.push_back(id);
  Admit();
}

bool CurlTransport::Cancel(RequestId id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return false;
  Transfer* t = it->second.get();
  t->cancelled = true;
  if (in_curl_ > 0) {
    QueueFinish(id);  // removed after libcurl returns (see ProcessMessages)
    return true;
  }
  Remove(t);
  return true;
}

void CurlTransport::RotateConnections(const std::string& why) {
  std::shared_ptr<const ClientCertPair> current = context_.current_cert();
  if (current == nullptr) return;
  const uint64_t generation = current->generation;
  std::weak_ptr<bool> alive = alive_;
  std::vector<RequestId> ending;
  for (auto& [id, t] : transfers_) {
    if (t->request.stream && t->cert != nullptr && t->cert->generation != generation &&
        !t->cancelled && !t->completed && !t->aborted) {
      ending.push_back(id);
    }
  }
  for (RequestId id : ending) {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) continue;  // a completion callback cancelled it
    Finish(it->second.get(), base::Status::Error(why));
    if (auto a = alive.lock(); !a || !*a) return;  // a callback destroyed the transport
  }
}

TransportStats CurlTransport::stats() const {
  size_t waiting = 0;
  for (RequestId id : waiting_) {
    auto it = transfers_.find(id);
    if (it != transfers_.end() && !it->second->added && !it->second->cancelled) ++waiting;
  }
  return TransportStats{connections_opened_, sockets_.size(), transfers_.size(), waiting};
}

// libcurl 7.88 multiplexes a transfer only onto a connection that is ready; while the only
// connection with free streams is still connecting, it opens yet another connection for each
// transfer (even with CURLOPT_PIPEWAIT, once the first connection is known to multiplex). So a
// request goes to libcurl only when the ready connections have a free stream for it or when no
// request is waiting for its connection; the others wait here, in order, and go as soon as a
// connection becomes ready (OnPrereq) or a request ends. A request that ended before its
// connection was ready (refused, timed out, cancelled) lets every waiting request go, as before
// this gate, so a server that is slow to refuse never makes them wait in single file.
void CurlTransport::Admit(bool all) {
  if (in_curl_ > 0) return;  // DriveCurl admits once libcurl has returned
  const size_t per_connection = context_.max_streams_per_connection > 0
                                    ? static_cast<size_t>(context_.max_streams_per_connection)
                                    : 1;
  while (!waiting_.empty()) {
    if (!all && unconfirmed_ > 0 && in_curl_count_ >= per_connection * ready_ports_.size()) {
      return;
    }
    const RequestId id = waiting_.front();
    waiting_.pop_front();
    auto it = transfers_.find(id);
    if (it == transfers_.end() || it->second->cancelled || it->second->added) continue;
    AddToCurl(it->second.get());
  }
}

void CurlTransport::AddToCurl(Transfer* t) {
  const RequestId id = t->id;
  CURLMcode rc = Curl().multi_add_handle(Multi(multi_), t->easy);
  if (rc != CURLM_OK) {
    // Report asynchronously: callers never get a callback from inside Start().
    std::weak_ptr<bool> alive = alive_;
    auto* req = new uv_timer_t;
    struct Pending {
      CurlTransport* transport;
      RequestId id;
      std::weak_ptr<bool> alive;
      std::string message;
    };
    req->data = new Pending{this, id, alive, Curl().multi_strerror(rc)};
    uv_timer_init(context_.loop, req);
    uv_timer_start(
        req,
        [](uv_timer_t* h) {
          auto* p = static_cast<Pending*>(h->data);
          base::Status s = base::CatchAll("http start failure callback", [&] {
            if (auto a = p->alive.lock(); a && *a) {
              auto it = p->transport->transfers_.find(p->id);
              if (it != p->transport->transfers_.end()) {
                p->transport->Finish(it->second.get(), base::Status::Error(p->message));
              }
            }
          });
          if (!s.ok()) spdlog::error("http client: {}", s.message());
          delete p;
          uv_close(reinterpret_cast<uv_handle_t*>(h),
                   [](uv_handle_t* hh) { delete reinterpret_cast<uv_timer_t*>(hh); });
        },
        0, 0);
    return;
  }
  t->added = true;
  ++in_curl_count_;
  ++unconfirmed_;
}

void CurlTransport::Remove(Transfer* t) {
  bool unconfirmed = false;
  if (t->added) {
    Curl().multi_remove_handle(Multi(multi_), t->easy);
    --in_curl_count_;
    if (!t->confirmed) {
      --unconfirmed_;
      unconfirmed = true;
    }
  }
  transfers_.erase(t->id);
  if (!waiting_.empty()) Admit(unconfirmed);
}

void CurlTransport::Finish(Transfer* t, base::Status transport) {
  long connects = 0;
  Curl().easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &connects);
  connections_opened_ += connects;
  if (transport.ok() && !t->headers_delivered) {
    if (!t->DeliverHeaders()) transport = base::Status::Error(t->abort_reason);
  }
  const std::string where = t->request.method + " " + t->request.path;
  HttpDoneCallback done = std::move(t->done);
  HttpResponse response = std::move(t->response);
  if (!transport.ok()) response.fault = FaultOf(t->curl_result);
  bool cancelled = t->cancelled;
  Remove(t);
  if (cancelled || !done) return;
  base::Status s = base::CatchAll("http completion callback",
                                  [&] { done(std::move(transport), std::move(response)); });
  if (!s.ok()) spdlog::error("http {}: {}", where, s.message());
}

void CurlTransport::ProcessMessages() {
  // Marks in place first (no allocation), so a failure below loses no message of libcurl's: the
  // marks stay and the next call finishes those transfers.
  int pending = 0;
  while (CURLMsg* msg = Curl().multi_info_read(Multi(multi_), &pending)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    Curl().easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    if (t == nullptr || t->completed) continue;
    t->completed = true;
    t->curl_result = msg->data.result;
    QueueFinish(t->id);
  }
  if (finishing_.empty() && !scan_all_) return;
  std::vector<RequestId> ready;
  if (scan_all_) {
    for (auto& [id, t] : transfers_) {
      if (t->completed || t->aborted || t->cancelled) ready.push_back(id);
    }
  } else {
    ready.assign(finishing_.begin(), finishing_.end());
  }
  finishing_.clear();
  scan_all_ = false;
  for (RequestId id : ready) {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) continue;  // cancelled by an earlier completion callback
    Transfer* t = it->second.get();
    if (t->cancelled) {
      Remove(t);
    } else if (t->aborted || (t->curl_result != CURLE_OK && !t->abort_reason.empty())) {
      Finish(t, base::Status::Error(t->abort_reason.empty() ? "aborted" : t->abort_reason));
    } else if (t->curl_result == CURLE_OK) {
      Finish(t, base::Status::OK());
    } else {
      std::string message = Curl().easy_strerror(t->curl_result);
      if (t->error[0] != '\0') message += std::string(": ") + t->error;
      Finish(t, base::Status::Error(message));
    }
  }
}

void CurlTransport::QueueFinish(RequestId id) noexcept {
  if (finishing_.size() < finishing_.capacity()) {
    finishing_.push_back(id);  // within capacity: no allocation, cannot throw
  } else {
    scan_all_ = true;
  }
}

void CurlTransport::Fault(const char* callback) {
  if (context_.callback_fault) context_.callback_fault(callback);
}

void CurlTransport::DriveCurl(int fd, int flags) {
  int running = 0;
  std::weak_ptr<bool> alive = alive_;
  ++in_curl_;
  base::Status s = base::CatchAll("http poll callback", [&] {
    Fault("poll");
    Curl().multi_socket_action(Multi(multi_), fd, flags, &running);
  });
  --in_curl_;
  if (auto a = alive.lock(); !a || !*a) return;  // a completion callback destroyed the transport
  if (s.ok()) s = base::CatchAll("http completion processing", [&] { ProcessMessages(); });
  if (auto a = alive.lock(); !a || !*a) return;
  // Connections that became ready take the requests waiting for them.
  if (s.ok() && !waiting_.empty()) s = base::CatchAll("http admission", [&] { Admit(); });
  if (!s.ok()) {
    // What was marked stays marked: retry from the timer on the next loop iteration.
    spdlog::error("http client: {}; retrying", s.message());
    scan_all_ = true;
    uv_timer_start(timer_, &CurlTransport::OnUvTimer, 0, 0);
  }
}

int CurlTransport::OnSocket(void* easy, int fd, int what, void* userp, void* socketp) {
  auto* self = static_cast<CurlTransport*>(userp);
  auto* ctx = static_cast<SocketContext*>(socketp);
  if (ctx == nullptr) {
    auto it = self->sockets_.find(fd);
    if (it != self->sockets_.end()) ctx = it->second;
  }
  if (what == CURL_POLL_REMOVE) {
    if (ctx != nullptr) uv_poll_stop(&ctx->poll);
    return 0;
  }
  base::Status s = base::CatchAll("http socket callback", [&]() -> base::Status {
    self->Fault("socket");
    if (ctx != nullptr) return base::Status::OK();
    // Whatever may throw comes before the poll handle exists: nothing to undo then.
    auto fresh = std::make_unique<SocketContext>();
    fresh->fd = fd;
    fresh->transport = self;
    fresh->poll.data = fresh.get();
    auto slot = self->sockets_.try_emplace(fd, nullptr).first;
    if (int rc = uv_poll_init_socket(self->context_.loop, &fresh->poll, fd); rc != 0) {
      self->sockets_.erase(slot);
      return base::Status::Error(std::string("cannot poll a socket: ") + uv_strerror(rc));
    }
    ctx = slot->second = fresh.release();
    Curl().multi_assign(Multi(self->multi_), fd, ctx);
    return base::Status::OK();
  });
  if (!s.ok()) {
    // Returning -1 would stop libcurl's whole multi handle: fail only this transfer instead.
    Transfer* t = nullptr;
    Curl().easy_getinfo(static_cast<CURL*>(easy), CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    if (t != nullptr) t->Abort(s);
    if (ctx == nullptr) return 0;
  }
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
  uv_poll_start(&ctx->poll, events, &CurlTransport::OnPoll);
  return 0;
}

int CurlTransport::OnTimer(void* /*multi*/, long timeout_ms, void* userp) {
  auto* self = static_cast<CurlTransport*>(userp);
  base::Status s = base::CatchAll("http timer callback", [&] { self->Fault("timer"); });
  // libcurl's timeouts must keep running whatever happened: arm the timer in any case.
  if (!s.ok()) spdlog::error("http client: {}", s.message());
  if (timeout_ms < 0) {
    uv_timer_stop(self->timer_);
  } else {
    uv_timer_start(self->timer_, &CurlTransport::OnUvTimer, static_cast<uint64_t>(timeout_ms), 0);
  }
  return 0;
}

void CurlTransport::OnPoll(uv_poll_t* handle, int status, int events) {
  auto* ctx = static_cast<SocketContext*>(handle->data);
  int flags = 0;
  if (status < 0) {
    flags = CURL_CSELECT_ERR;
  } else {
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  }
  ctx->transport->DriveCurl(ctx->fd, flags);
}

void CurlTransport::OnUvTimer(uv_timer_t* handle) {
  static_cast<CurlTransport*>(handle->data)->DriveCurl(CURL_SOCKET_TIMEOUT, 0);
}

int CurlTransport::OnCloseSocket(void* clientp, int fd) {
  auto* self = static_cast<CurlTransport*>(clientp);
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    if (local.ss_family == AF_INET) {
      self->ready_ports_.erase(ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port));
    } else if (local.ss_family == AF_INET6) {
      self->ready_ports_.erase(ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port));
    }
  }
  auto it = self->sockets_.find(fd);
  if (it == self->sockets_.end()) return close(fd);
  SocketContext* ctx = it->second;
  self->sockets_.erase(it);
  CloseSocketContext(&ctx->poll);  // closes the fd once libuv is done with it
  return 0;
}

int CurlTransport::OnPrereq(void* clientp, char* /*remote_ip*/, char* /*local_ip*/,
                            int /*remote_port*/, int local_port) {
  auto* t = static_cast<Transfer*>(clientp);
  CurlTransport* self = t->transport;
  if (!t->confirmed) {
    t->confirmed = true;
    --self->unconfirmed_;
  }
  // Only the count of ready connections is lost if this fails: the gate then opens more slowly.
  base::Status s =
      base::CatchAll("http prereq callback", [&] { self->ready_ports_.insert(local_port); });
  if (!s.ok()) spdlog::error("http client: {}", s.message());
  return CURL_PREREQFUNC_OK;
}

size_t CurlTransport::OnHeader(char* data, size_t size, size_t count, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  const size_t n = size * count;
  bool keep_going = true;
  base::Status s = base::CatchAll("http header callback", [&] {
    t->transport->Fault("header");
    keep_going = t->transport->Header(t, std::string_view(data, n));
  });
  if (!s.ok()) t->Abort(s);
  return s.ok() && keep_going ? n : 0;  // 0 makes libcurl end the transfer
}

bool CurlTransport::Header(Transfer* t, std::string_view data) {
  // One line of the head as libcurl passed it on (HTTP/2's too, which libcurl writes as
  // "HTTP/2 200" and "name: value" lines), read with the process's HTTP head parser.
  const std::string_view line = base::HttpFirstLine(data);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response.headers.clear();  // a new response (after 100 Continue)
    base::HttpStatusLine status;
    std::string why;
    t->status_line_code = base::ParseHttpStatusLine(line, &status, &why) ? status.status : 0;
    return true;
  }
  if (line.empty()) {
    // End of a header block: announce a final response now, not at its first body byte (a
    // watch may stay silent for minutes).
    return t->status_line_code < 200 || t->cancelled || t->DeliverHeaders();
  }
  base::HttpField field;
  std::string why;
  if (!base::ParseHttpField(line, &field, &why)) return true;  // libcurl judged the head; skipped
  std::string name(field.name);
  for (char& c : name) c = base::AsciiLower(c);
  if (name == "warning") {
    spdlog::warn("API server warning on {} {}: {}", t->request.method, t->request.path,
                 field.value);
  }
  t->response.headers[name] = std::string(field.value);
  return true;
}

size_t CurlTransport::OnWrite(char* data, size_t size, size_t count, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  const size_t n = size * count;
  bool keep_going = true;
  base::Status s = base::CatchAll("http write callback", [&] {
    t->transport->Fault("write");
    keep_going = t->transport->Body(t, std::string_view(data, n));
  });
  if (!s.ok()) t->Abort(s);
  return s.ok() && keep_going ? n : 0;  // 0 makes libcurl end the transfer
}

bool CurlTransport::Body(Transfer* t, std::string_view data) {
  if (t->cancelled) return false;
  if (!t->DeliverHeaders()) return false;
  if (t->cancelled) return false;
  if (t->buffer_body) {
    const size_t limit = t->request.max_body_bytes;
    if (limit > 0 && t->response.body.size() + data.size() > limit) {
      t->Abort(base::Status::Error("body larger than " + std::to_string(limit) + " bytes"));
      return false;
    }
    t->response.body.append(data);
    return true;
  }
  if (!t->stream.on_data) return true;
  bool more = true;
  base::Status s = base::CatchAll("stream callback", [&] { more = t->stream.on_data(data); });
  if (!s.ok()) {
    t->Abort(s);
    return false;
  }
  if (!more) {
    if (t->abort_reason.empty()) t->abort_reason = "aborted by the stream consumer";
    return false;
  }
  return !t->cancelled;
}
}  // namespace kubeclient
