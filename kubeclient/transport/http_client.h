// HttpClient: HTTP(S) requests to one server (the API server, or a --manifest-url) on the
// daemon's libuv loop, with the server's credentials, each carried by a Transport (transport.h):
// the project's HTTP/2 client (Http2Transport, http2_transport.h) for an https server with
// `native_http2` while the server speaks HTTP/2, libcurl's (CurlTransport, curl_transport.h)
// otherwise and for redirects. Only http and https are ever spoken, redirects included.
//
// Promises:
// * HTTP/2 with multiplexing when the server offers it over ALPN, HTTP/1.1 otherwise. At most
//   `max_streams_per_connection` concurrent streams share one connection (default 100); beyond
//   that the transport opens another connection, so thousands of watches never queue behind each
//   other. A burst of requests fills connections instead of opening one per request.
// * TLS verified against the configured CA (system roots when none), with tls-server-name; a
//   client certificate when configured; insecure-skip-tls-verify honoured with a warning. A CA file
//   is re-read when its modification time, size or inode changes (checked at most every
//   `ca_check_interval`); new connections use the new CA.
// * A client certificate from files follows them as they rotate (ClientCertSource,
//   client_cert_source.h; looked at every `client_cert_check_interval`, on a timer that does not
//   keep the loop alive, and before a request once that long has passed, and after a 401). New
//   connections present the new pair. The connections opened with the old one take no new
//   request and close once their requests have ended; the streamed requests on them (watches)
//   end at once with a transport error naming the rotation, so their owners reconnect (the
//   reflector re-watches from where it was) with the new certificate, as client-go's connection
//   rotation does.
// * With an exec credential plugin (ExecCredentialSource, exec_credential.h): a request waits while
//   the plugin runs (one run for every request that arrives meanwhile) and then carries its token
//   and/or client certificate; a failed run fails the waiting requests with its error. A 401
//   (InvalidateToken) or the credential's expiry makes the next request run it again.
// * `Authorization: Bearer` from the TokenSource on every request (re-read as it rotates),
//   `User-Agent: volumemanager/<version> (linux/<arch>)`, `Accept: application/json`, gzip accepted
//   (libcurl decodes it), TCP keepalive, connect and per-request timeouts. `Warning` response
//   headers are logged.
// * Every callback runs on the loop thread; none runs after Cancel() or after the client is
//   destroyed. Callbacks may start or cancel requests. No exception escapes into libuv, libcurl or
//   nghttp2: a throwing callback is logged and its request aborted.
// Not thread-safe: use it from the loop thread only. Destroy it on the loop thread; its libuv
// handles finish closing on the next loop iteration.
#ifndef VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP_CLIENT_H_
#define VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP_CLIENT_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "kubeclient/auth/client_cert_source.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/auth/exec_credential.h"
#include "kubeclient/auth/token_source.h"
#include "kubeclient/transport/transport.h"
#include "kubeclient/transport/transport_context.h"

namespace kubeclient {

class CurlTransport;
class Http2Transport;

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{10000};
  // Total time for a non-streaming request that sets no timeout of its own.
  std::chrono::milliseconds request_timeout{60000};
  long max_streams_per_connection = 100;
  std::chrono::milliseconds ca_check_interval{10000};
  std::chrono::milliseconds token_refresh{50000};
  // How often a client certificate from files is looked at (one stat per file).
  std::chrono::milliseconds client_cert_check_interval{30000};
  // An exec credential plugin's limits (exec_credential.h).
  std::chrono::milliseconds exec_timeout{30000};
  size_t exec_max_output = 1 << 20;
  // https servers: requests (but those following redirects) go over HTTP/2 on the project's own
  // transport (http2_transport.h) instead of libcurl, which is then loaded only if the server
  // turns out not to speak HTTP/2. The daemon's API clients set it; a --manifest-url does not.
  bool native_http2 = false;
  // Fault injection for tests: called at the start of every libuv and libcurl callback body with
  // the callback's name ("socket", "timer", "poll", "header", "write"); it may throw, as an
  // allocation inside the callback could.
  std::function<void(const char* callback)> callback_fault;
};

class HttpClient {
 public:
  using RequestId = kubeclient::RequestId;
  // Both transports' together; requests waiting for an exec plugin count as in flight and
  // waiting.
  using Stats = TransportStats;

  // Fails when the URL is not http(s), or libcurl (libnghttp2 with native_http2) cannot be loaded.
  static base::Result<std::unique_ptr<HttpClient>> Create(uv_loop_t* loop,
                                                          const Credentials& credentials,
                                                          HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  RequestId Start(HttpRequest request, HttpDoneCallback done, StreamCallbacks stream = {});
  // No callback of this request runs afterwards. Unknown or finished ids are ignored.
  void Cancel(RequestId id);

  // After a 401: the next request re-reads the token file and looks at the client certificate's
  // files; an exec plugin's credential is dropped (the next request runs the plugin again).
  void InvalidateToken();
  Stats stats() const;
  const Credentials& credentials() const { return credentials_; }
  uv_loop_t* loop() const { return loop_; }

 private:
  HttpClient(uv_loop_t* loop, Credentials credentials, HttpClientOptions options);
  // What the transports take from the client (transport_context.h).
  TransportContext Context();
  // Loads libcurl and makes its transport, once; the same answer afterwards.
  base::Status EnsureCurl();
  // The libcurl path of Start (and of the requests the HTTP/2 transport hands back).
  void StartCurl(RequestId id, HttpRequest request, HttpDoneCallback done, StreamCallbacks stream);
  // Runs `done` with a transport failure on the next loop iteration (never inside Start),
  // unless `id` is cancelled first.
  void FailLater(RequestId id, HttpDoneCallback done, std::string message);
  void RefreshCa();
  // The client certificate for a new connection (null: none). A changed pair schedules
  // RotateConnections on the loop (never inside Start).
  std::shared_ptr<const ClientCertPair> CurrentCert();
  // The timer's work: looks at the certificate's files, then ends what the old pair carried.
  void OnCertTimer();
  static void OnCertTimerCallback(uv_timer_t* handle);
  void RotateConnections();
  // With an exec plugin: whether its credential is at hand (then applied to the token and client
  // certificate in use); false: the request waits for the plugin (exec_waiting_).
  bool ExecReady();
  void OnExecDone(base::Status status);
  // Sends a request now, on the HTTP/2 transport or libcurl.
  void Dispatch(RequestId id, HttpRequest request, HttpDoneCallback done, StreamCallbacks stream);

  uv_loop_t* loop_;
  Credentials credentials_;
  HttpClientOptions options_;
  TokenSource tokens_;
  // Set when options_.native_http2 and the server is https (see there).
  std::unique_ptr<Http2Transport> h2_;
  // libcurl's: made when first needed (EnsureCurl).
  std::unique_ptr<CurlTransport> curl_;
  std::optional<base::Status> curl_status_;  // EnsureCurl's answer, once asked
  std::unordered_set<RequestId> failing_;    // requests FailLater will fail
  RequestId next_id_ = 1;
  // Current CA and what identified its file when read.
  // Shared with the transfers started with it (libcurl reads it in place).
  std::shared_ptr<const std::string> ca_pem_;
  std::chrono::steady_clock::time_point ca_checked_at_{};
  std::string ca_file_identity_;
  // The client certificate (null: none), the timer that looks at its files, and the generation
  // the connections were last rotated to.
  std::unique_ptr<ClientCertSource> certs_;
  uv_timer_t* cert_timer_ = nullptr;
  uint64_t cert_generation_ = 0;
  // The exec plugin (null: none), the generation of its credential in use, and the requests
  // waiting for it.
  std::unique_ptr<ExecCredentialSource> exec_;
  uint64_t exec_generation_ = 0;
  struct ExecWaiting {
    RequestId id;
    HttpRequest request;
    HttpDoneCallback done;
    StreamCallbacks stream;
  };
  std::deque<ExecWaiting> exec_waiting_;
  std::string user_agent_;
  // Non-null while alive; callbacks scheduled on the loop check it.
  std::shared_ptr<bool> alive_;
};

// "volumemanager/<version> (linux/<arch>)".
std::string DefaultUserAgent();

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP_CLIENT_H_
