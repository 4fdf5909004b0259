#include "kubeclient/transport/http_client.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "base/catch_all.h"
#include "base/durable_file.h"
#include "base/redacted_url.h"
#include "base/uv_timer.h"
#include "base/version.h"
#include "kubeclient/transport/curl_transport.h"
#include "kubeclient/transport/http2_transport.h"
#include "kubeclient/transport/server_url.h"

namespace kubeclient {
namespace {

const char* Arch() {
#if defined(__x86_64__)
  return "amd64";
#elif defined(__aarch64__)
  return "arm64";
#else
  return "unknown";
#endif
}

base::Result<std::string> ReadFile(const std::string& path) {
  return base::ReadRegularFile(path, kMaxCredentialFileBytes, /*follow_symlinks=*/true);
}

}  // namespace

std::string DefaultUserAgent() {
  return std::string("volumemanager/") + base::kVersion + " (linux/" + Arch() + ")";
}

HttpClient::HttpClient(uv_loop_t* loop, Credentials credentials, HttpClientOptions options)
    : loop_(loop),
      credentials_(std::move(credentials)),
      options_(options),
      tokens_(credentials_.token, credentials_.token_file, options.token_refresh),
      ca_pem_(std::make_shared<const std::string>(credentials_.tls.ca_pem)),
      user_agent_(DefaultUserAgent()),
      alive_(std::make_shared<bool>(true)) {}

base::Result<std::unique_ptr<HttpClient>> HttpClient::Create(uv_loop_t* loop,
                                                             const Credentials& credentials,
                                                             HttpClientOptions options) {
  ServerUrl parts;
  if (!SplitServerUrl(credentials.server, &parts)) {
    return base::Status::Error("server URL " + base::RedactedUrl(credentials.server) +
                               " is not http(s)://host");
  }
  // Credentials in the URL itself are libcurl's to send (basic auth); the transport of our own
  // takes the kubeconfig's token or client certificate only.
  const bool native =
      options.native_http2 && credentials.server.starts_with("https://") && !parts.userinfo;
  std::unique_ptr<HttpClient> client(new HttpClient(loop, credentials, options));
  ClientCertSource::Options cert_options;
  cert_options.check_interval = options.client_cert_check_interval;
  auto certs = ClientCertSource::Create(credentials.tls, std::move(cert_options));
  if (!certs.ok()) return certs.status().WithContext(credentials.source);
  client->certs_ = std::move(*certs);
  if (client->certs_ != nullptr) {
    client->cert_generation_ = client->certs_->Current()->generation;
    if (client->certs_->FollowsFiles()) {
      client->cert_timer_ = base::NewTimer(loop, client.get());
      const auto every =
          static_cast<uint64_t>(std::max<int64_t>(1, client->certs_->check_interval().count()));
      uv_timer_start(client->cert_timer_, &HttpClient::OnCertTimerCallback, every, every);
      // Looking at the files is no reason to keep the loop running.
      uv_unref(reinterpret_cast<uv_handle_t*>(client->cert_timer_));
    }
  }
  if (!credentials.tls.ca_file.empty()) {
    client->ca_file_identity_ = base::FileStamp(credentials.tls.ca_file);
    client->ca_checked_at_ = std::chrono::steady_clock::now();
  }
  if (native) {
    HttpClient* self = client.get();
    auto transport = Http2Transport::Create(
        client->Context(), {parts.host, parts.port, parts.rest}, Http2Transport::Options{},
        [self](RequestId id, HttpRequest request, HttpDoneCallback done, StreamCallbacks stream) {
          self->StartCurl(id, std::move(request), std::move(done), std::move(stream));
        });
    if (!transport.ok()) return transport.status();
    client->h2_ = std::move(*transport);
  } else if (base::Status s = client->EnsureCurl(); !s.ok()) {
    return s;
  }
  if (credentials.exec) {
    ExecCredentialSource::Options exec;
    exec.timeout = options.exec_timeout;
    exec.max_output = options.exec_max_output;
    client->exec_ = std::make_unique<ExecCredentialSource>(loop, *credentials.exec,
                                                           client->credentials_, std::move(exec));
  }
  if (credentials.tls.insecure_skip_tls_verify) {
    spdlog::warn("TLS verification of {} is disabled (insecure-skip-tls-verify)",
                 credentials.server);
  }
  return client;
}

TransportContext HttpClient::Context() {
  TransportContext context;
  context.loop = loop_;
  context.credentials = &credentials_;
  context.tokens = &tokens_;
  context.current_ca = [this] {
    RefreshCa();
    return ca_pem_;
  };
  context.current_cert = [this] { return CurrentCert(); };
  context.connect_timeout = options_.connect_timeout;
  context.request_timeout = options_.request_timeout;
  context.max_streams_per_connection = options_.max_streams_per_connection;
  context.user_agent = user_agent_;
  context.callback_fault = options_.callback_fault;
  return context;
}

base::Status HttpClient::EnsureCurl() {
  if (curl_status_) return *curl_status_;
  auto transport = CurlTransport::Create(Context());
  if (!transport.ok()) {
    curl_status_ = transport.status();
    return *curl_status_;
  }
  curl_ = std::move(*transport);
  curl_status_ = base::Status::OK();
  return *curl_status_;
}

HttpClient::~HttpClient() {
  *alive_ = false;
  h2_.reset();
  curl_.reset();
  if (cert_timer_ != nullptr) base::CloseTimer(cert_timer_);
}

void HttpClient::InvalidateToken() {
  tokens_.Invalidate();
  if (certs_ != nullptr) certs_->Invalidate();
  if (exec_ != nullptr) exec_->Invalidate();
}

bool HttpClient::ExecReady() {
  const ExecCredential* credential = exec_->Cached();
  if (credential == nullptr) return false;
  if (credential->generation != exec_generation_) {
    exec_generation_ = credential->generation;
    tokens_.SetToken(credential->token);
    if (credential->cert != nullptr) {
      if (certs_ == nullptr) {
        certs_ = ClientCertSource::FromPair(*credential->cert);
        cert_generation_ = certs_->Current()->generation;
      } else {
        certs_->Replace(*credential->cert);
      }
      if (cert_timer_ == nullptr) {
        cert_timer_ = base::NewTimer(loop_, this);
        uv_unref(reinterpret_cast<uv_handle_t*>(cert_timer_));
      }
      // A new pair: the connections of the old one are retired as for a rotated file, from the
      // loop (never inside Start).
      CurrentCert();
    }
  }
  return true;
}

void HttpClient::OnExecDone(base::Status status) {
  std::deque<ExecWaiting> waiting;
  waiting.swap(exec_waiting_);
  if (status.ok() && !ExecReady()) {
    status = base::Status::Error(exec_->Describe() + ": its credential has already expired");
  }
  std::weak_ptr<bool> alive = alive_;
  for (ExecWaiting& w : waiting) {
    if (status.ok()) {
      Dispatch(w.id, std::move(w.request), std::move(w.done), std::move(w.stream));
    } else {
      FailLater(w.id, std::move(w.done), status.message());
    }
    if (auto a = alive.lock(); !a || !*a) return;
  }
}

std::shared_ptr<const ClientCertPair> HttpClient::CurrentCert() {
  if (certs_ == nullptr) return nullptr;
  std::shared_ptr<const ClientCertPair> pair = certs_->Current();
  if (pair->generation != cert_generation_ && cert_timer_ != nullptr) {
    // The timer's callback ends what the old pair carried: not here, inside a request's start.
    uv_timer_start(cert_timer_, &HttpClient::OnCertTimerCallback, 0,
                   uv_timer_get_repeat(cert_timer_));
  }
  return pair;
}

void HttpClient::OnCertTimerCallback(uv_timer_t* handle) {
  auto* self = static_cast<HttpClient*>(handle->data);
  base::Status s = base::CatchAll("client certificate timer", [&] { self->OnCertTimer(); });
  if (!s.ok()) spdlog::error("http client: {}", s.message());
}

void HttpClient::OnCertTimer() {
  certs_->CheckNow();
  if (certs_->Current()->generation != cert_generation_) RotateConnections();
}

void HttpClient::RotateConnections() {
  cert_generation_ = certs_->Current()->generation;
  const std::string why =
      "the client certificate changed (" + certs_->Describe() + "); reconnecting with the new one";
  // The HTTP/2 transport's completion callbacks run later; libcurl's run inside its call, last.
  if (h2_ != nullptr) h2_->RotateConnections(why);
  if (curl_ != nullptr) curl_->RotateConnections(why);
}

void HttpClient::RefreshCa() {
  const std::string& file = credentials_.tls.ca_file;
  if (file.empty()) return;
  auto now = std::chrono::steady_clock::now();
  if (now - ca_checked_at_ < options_.ca_check_interval) return;
  ca_checked_at_ = now;
  std::string identity = base::FileStamp(file);
  if (identity.empty() || identity == ca_file_identity_) return;
  auto pem = ReadFile(file);
  if (!pem.ok() || pem->empty()) {
    spdlog::warn("CA file {} changed but cannot be read; keeping the previous CA", file);
    return;
  }
  ca_file_identity_ = identity;
  ca_pem_ = std::make_shared<const std::string>(std::move(*pem));
  spdlog::info("CA file {} changed; new connections verify against the new CA", file);
}

HttpClient::RequestId HttpClient::Start(HttpRequest request, HttpDoneCallback done,
                                        StreamCallbacks stream) {
  const RequestId id = next_id_++;
  if (exec_ != nullptr && (!exec_waiting_.empty() || !ExecReady())) {
    // Waits for the plugin (one run for every request that arrives meanwhile).
    exec_waiting_.push_back({id, std::move(request), std::move(done), std::move(stream)});
    if (exec_waiting_.size() == 1) {
      std::weak_ptr<bool> alive = alive_;
      exec_->Get([this, alive](base::Status status) {
        if (auto a = alive.lock(); !a || !*a) return;
        OnExecDone(std::move(status));
      });
    }
    return id;
  }
  Dispatch(id, std::move(request), std::move(done), std::move(stream));
  return id;
}

void HttpClient::Dispatch(RequestId id, HttpRequest request, HttpDoneCallback done,
                          StreamCallbacks stream) {
  if (h2_ != nullptr && h2_->mode() != Http2Transport::Mode::kHttp1 && !request.follow_redirects) {
    h2_->Start(id, std::move(request), std::move(done), std::move(stream));
  } else {
    StartCurl(id, std::move(request), std::move(done), std::move(stream));
  }
}

void HttpClient::FailLater(RequestId id, HttpDoneCallback done, std::string message) {
  struct Pending {
    std::weak_ptr<bool> alive;
    HttpClient* client;
    RequestId id;
    HttpDoneCallback done;
    std::string message;
  };
  failing_.insert(id);  // Cancel() takes it out: then no callback
  auto* timer =
      base::NewTimer(loop_, new Pending{alive_, this, id, std::move(done), std::move(message)});
  uv_timer_start(
      timer,
      [](uv_timer_t* h) {
        std::unique_ptr<Pending> p(static_cast<Pending*>(h->data));
        base::CloseTimer(h);
        if (auto a = p->alive.lock(); !a || !*a) return;
        if (p->client->failing_.erase(p->id) == 0 || !p->done) return;  // cancelled
        base::Status s = base::CatchAll("http completion callback", [&] {
          p->done(base::Status::Error(p->message), HttpResponse{});
        });
        if (!s.ok()) spdlog::error("http client: {}", s.message());
      },
      0, 0);
}

void HttpClient::StartCurl(RequestId id, HttpRequest request, HttpDoneCallback done,
                           StreamCallbacks stream) {
  if (base::Status s = EnsureCurl(); !s.ok()) {
    FailLater(id, std::move(done), s.message());
    return;
  }
  curl_->Start(id, std::move(request), std::move(done), std::move(stream));
}

void HttpClient::Cancel(RequestId id) {
  for (auto it = exec_waiting_.begin(); it != exec_waiting_.end(); ++it) {
    if (it->id == id) {
      exec_waiting_.erase(it);
      return;
    }
  }
  if (h2_ != nullptr && h2_->Cancel(id)) return;
  if (failing_.erase(id) > 0) return;
  if (curl_ != nullptr) curl_->Cancel(id);
}

HttpClient::Stats HttpClient::stats() const {
  Stats stats{0, 0, exec_waiting_.size(), exec_waiting_.size()};
  for (const Transport* t :
       {static_cast<const Transport*>(h2_.get()), static_cast<const Transport*>(curl_.get())}) {
    if (t == nullptr) continue;
    const TransportStats s = t->stats();
    stats.connections_opened += s.connections_opened;
    stats.open_connections += s.open_connections;
    stats.requests_in_flight += s.requests_in_flight;
    stats.requests_waiting += s.requests_waiting;
  }
  return stats;
}

}  // namespace kubeclient
