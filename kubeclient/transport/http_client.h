// HttpClient: HTTP(S) requests to one server (the API server, or a --manifest-url) on the
// daemon's libuv loop, through libcurl's multi-socket interface (uv_poll per socket, one uv_timer;
// no extra threads). Only http and https are ever spoken, redirects included.
//
// Promises:
// * HTTP/2 with multiplexing when the server offers it over ALPN, HTTP/1.1 otherwise. At most
//   `max_streams_per_connection` concurrent streams share one connection (default 100); beyond
//   that libcurl opens another connection, so thousands of watches never queue behind each other.
//   A burst of requests fills connections instead of opening one per request: requests beyond
//   what the ready connections can carry wait in order (not in libcurl) while one of them opens
//   the next connection, and go once it is ready. (libcurl 7.88, asked for more streams than its
//   connections allow, opens a new connection for every such transfer until one is ready: 2,000
//   watches started at once took 1,902 connections.)
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
//   destroyed. Callbacks may start or cancel requests. No exception escapes into libuv or libcurl:
//   a throwing callback is logged and its request aborted.
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

namespace kubeclient {

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
  using RequestId = std::uint64_t;

  struct Stats {
    // Connections opened by requests that have finished (new TCP+TLS connections, not reuses).
    long connections_opened = 0;
    // Sockets open now (in use by requests or idle in libcurl's connection cache).
    size_t open_connections = 0;
    size_t requests_in_flight = 0;
    // Of those, waiting for a connection to be ready before they are handed to libcurl.
    size_t requests_waiting = 0;
  };

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

  struct Transfer;       // one request in flight (internal)
  struct SocketContext;  // one polled socket (internal)

 private:
  HttpClient(uv_loop_t* loop, Credentials credentials, HttpClientOptions options);
  // Loads libcurl and makes the multi handle, once; the same answer afterwards.
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
  void ProcessMessages();
  void Finish(Transfer* transfer, base::Status transport);
  void Remove(Transfer* transfer);

  static int OnSocket(void* easy, int fd, int what, void* userp, void* socketp);
  static int OnTimer(void* multi, long timeout_ms, void* userp);
  static void OnPoll(uv_poll_t* handle, int status, int events);
  static void OnUvTimer(uv_timer_t* handle);
  static int OnCloseSocket(void* clientp, int fd);
  static int OnPrereq(void* clientp, char* remote_ip, char* local_ip, int remote_port,
                      int local_port);
  // Hands waiting requests to libcurl, in order, as far as the ready connections allow.
  // `all`: every waiting request, whatever the connections (see the .cc).
  void Admit(bool all = false);
  void AddToCurl(Transfer* transfer);
  static size_t OnHeader(char* data, size_t size, size_t count, void* userp);
  static size_t OnWrite(char* data, size_t size, size_t count, void* userp);
  // The bodies of OnHeader and OnWrite; false ends the transfer.
  bool Header(Transfer* transfer, std::string_view line);
  bool Body(Transfer* transfer, std::string_view data);
  // curl_multi_socket_action, then the transfers it finished; nothing escapes.
  void DriveCurl(int fd, int flags);
  void Fault(const char* callback);
  // Marks a transfer for ProcessMessages; never allocates.
  void QueueFinish(RequestId id) noexcept;

  uv_loop_t* loop_;
  Credentials credentials_;
  HttpClientOptions options_;
  TokenSource tokens_;
  // Set when options_.native_http2 and the server is https (see there).
  std::unique_ptr<Http2Transport> h2_;
  std::optional<base::Status> curl_status_;  // EnsureCurl's answer, once asked
  std::unordered_set<RequestId> failing_;    // requests FailLater will fail
  void* multi_ = nullptr;                    // CURLM*
  uv_timer_t* timer_ = nullptr;  // heap: it outlives the client until its close callback
  std::unordered_map<RequestId, std::unique_ptr<Transfer>> transfers_;
  std::unordered_map<int, SocketContext*> sockets_;
  RequestId next_id_ = 1;
  // Requests started but not yet handed to libcurl (see Admit), oldest first.
  std::deque<RequestId> waiting_;
  size_t in_curl_count_ = 0;  // handed to libcurl, not yet removed
  size_t unconfirmed_ = 0;    // of those, not yet on a ready connection (prereq not seen)
  // Local ports of the connections a request has been sent on (ready: TLS and ALPN done).
  std::unordered_set<int> ready_ports_;
  long connections_opened_ = 0;
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
  // Set while libcurl is running callbacks: Cancel() then defers curl_multi_remove_handle.
  int in_curl_ = 0;
  // Transfers completed, aborted or cancelled inside libcurl and not yet finished or removed
  // (ids; a transfer may appear twice). Finishing them costs O(their number), not a walk of every
  // transfer: with 10,000 watches a walk per completion made a storm of failures quadratic.
  std::vector<RequestId> finishing_;
  // Set when an id could not be queued without allocating: the next pass walks every transfer.
  bool scan_all_ = false;
  // Non-null while alive; callbacks scheduled on the loop check it.
  std::shared_ptr<bool> alive_;
};

// "volumemanager/<version> (linux/<arch>)".
std::string DefaultUserAgent();

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP_CLIENT_H_
