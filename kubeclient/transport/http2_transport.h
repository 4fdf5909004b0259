// Http2Transport: HttpClient's requests to an https server that speaks HTTP/2, on connections of
// the project's own: a non-blocking socket polled by the libuv loop, TLS by GnuTLS and HTTP/2
// framing by libnghttp2 (both opened at run time: gnutls_library.h, nghttp2_library.h). Internal to
// HttpClient (http_client.h), which routes a request here when HttpClientOptions::native_http2 is
// set, the server URL is https and the request follows no redirects.
//
// Why: a watch is one long-lived stream. Through libcurl every stream holds an easy handle and its
// transfer state (about 11 KiB; 1,000 watches: 11 MiB), and libcurl maps OpenSSL, Kerberos, LDAP
// and more (about 7 MiB of library pages); here a stream is a small record in nghttp2's session.
//
// Promises (the same as HttpClient's, which it serves):
// * ALPN offers h2 and http/1.1. The first connection whose server picks anything but h2 switches
//   the transport to HTTP/1.1 for good: that request, every waiting one and every later one go
//   back to HttpClient's libcurl path (the `fallback`), with their ids.
// * At most min(max_streams_per_connection, the server's SETTINGS_MAX_CONCURRENT_STREAMS) streams
//   per connection; beyond that another connection, one opening at a time, requests waiting in
//   order meanwhile. A connection is ready once TLS, ALPN and the server's first SETTINGS are
//   done. An idle connection is closed after `idle_timeout`.
// * TLS verified against the CA (the system's roots when none) for tls-server-name (else the URL's
//   host; IP addresses against the certificate's IP SANs), SNI for DNS names only; a client
//   certificate when configured; no verification with insecure-skip-tls-verify. Each connection
//   takes the CA and the client certificate current when it opens. RotateConnections() retires
//   the connections opened with an older client certificate: no new stream on them, their
//   streamed requests (watches) end at once, the others run to their end, then the connection
//   closes. One that opened with the new certificate (the rotation noticed as it opened) stays.
// * A stream the server refuses (REFUSED_STREAM, or beyond a GOAWAY's last stream id: never
//   processed) is sent again on another connection; any other reset, a lost connection or a
//   timeout fails the request with a message naming it.
// * Callbacks run on the loop thread; on_headers and on_data while the connection's bytes are
//   being read, the completion callback afterwards, outside nghttp2 (it may destroy the client).
//   None runs after Cancel(). Nothing escapes into libuv or nghttp2: a throwing callback fails its
//   own request.
#ifndef VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP2_TRANSPORT_H_
#define VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP2_TRANSPORT_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kubeclient/auth/client_cert_source.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/auth/token_source.h"
#include "kubeclient/transport/transport.h"
#include "kubeclient/transport/transport_context.h"

namespace kubeclient {

class Http2Transport : public Transport {
 public:
  using Fallback = std::function<void(RequestId id, HttpRequest request, HttpDoneCallback done,
                                      StreamCallbacks stream)>;
  enum class Mode { kUnknown, kHttp2, kHttp1 };

  struct Options {
    // A connection without requests closes after it.
    std::chrono::milliseconds idle_timeout{90000};
  };

  // The https server's URL in parts (HttpClient splits it).
  struct ServerAddress {
    std::string host;  // without brackets
    std::string port;
    std::string path_prefix;
  };

  // Fails when libnghttp2 cannot be loaded.
  static base::Result<std::unique_ptr<Http2Transport>> Create(TransportContext context,
                                                              const ServerAddress& address,
                                                              Options options, Fallback fallback);
  ~Http2Transport() override;
  Http2Transport(const Http2Transport&) = delete;
  Http2Transport& operator=(const Http2Transport&) = delete;

  Mode mode() const { return mode_; }
  void Start(RequestId id, HttpRequest request, HttpDoneCallback done,
             StreamCallbacks stream) override;
  // False when the id is not this transport's (unknown, finished, or handed to the fallback).
  bool Cancel(RequestId id) override;
  // The client certificate changed: the connections opened with an older pair take no new
  // request; their streamed requests fail with `why` (their owners reconnect), the others finish;
  // each closes once it has no request left. A connection that presents the current pair (it
  // noticed the rotation as it opened) or has not reached its TLS handshake yet (it will take the
  // current pair) stays, its streams too. Completion callbacks run later, never inside this call.
  void RotateConnections(const std::string& why) override;

  using Stats = TransportStats;
  Stats stats() const override;

  struct Stream;      // one request (internal)
  struct Connection;  // one TCP + TLS + HTTP/2 connection (internal)
  struct TlsCredentials;

 private:
  Http2Transport(TransportContext context, Options options, Fallback fallback);

  // Sends waiting requests on ready connections, opens a connection when none has room.
  void Admit();
  void Submit(Connection* c, Stream* s);
  void OpenConnection();
  void ConnectNext(Connection* c);
  void OnEvents(Connection* c, int status, int events);
  void StartTls(Connection* c);
  void Handshake(Connection* c);
  void ReadFrom(Connection* c);
  // Hands nghttp2's pending frames to TLS; false when the connection failed.
  bool Flush(Connection* c);
  void UpdatePoll(Connection* c);
  // The connection is done: its streams fail with `why`, and its waiting requests too when it
  // never became ready and no other connection is opening. Freed by AfterIo.
  // Fails the connection's requests (and, when nothing else is opening, the waiting ones) with
  // `why`; `fault` tells ClassifyApiError what kind of failure it is.
  void Fail(Connection* c, const std::string& why, TransportFault fault = TransportFault::kOther);
  void SwitchToHttp1(Connection* c);
  // Every waiting request to the fallback (libcurl), in order, with its id.
  void HandWaitingToFallback();
  void OnConnectionTimer(Connection* c);
  // Ends a stream that is still open on its connection: RST_STREAM(CANCEL), then Complete.
  void Abort(Stream* s, const std::string& why, bool log = true);
  // A request ends: queued for DeliverCompletions, which runs its callback outside nghttp2.
  void Complete(Stream* s, base::Status transport);
  void DeliverCompletions();
  // After every callback of libuv's and after Start/Cancel: admits waiting requests, flushes the
  // connections, frees closed ones, arms the deadline timer; `deliver`: runs completion callbacks
  // (last: one may destroy the client), else leaves them to the next loop iteration.
  void AfterIo(bool deliver);
  // Connections keep the loop alive (uv_ref) while there are requests, not after.
  void UpdateLoopRefs();
  // Runs `body` as an I/O callback of the loop: nothing escapes, AfterIo(true) follows.
  template <typename Fn>
  void Guard(const char* what, Fn&& body);
  void OnDeadlines();
  void Fault(const char* callback);
  std::shared_ptr<TlsCredentials> Tls(std::string* error, TransportFault* fault);
  Stream* Find(RequestId id);
  // `s` (request `id`) after a callback, or null when it is gone: looked up again only when a
  // stream was erased since `erased` (streams_erased_ before the callback).
  Stream* FindAfterCallback(Stream* s, RequestId id, uint64_t erased) {
    return erased == streams_erased_ ? s : Find(id);
  }
  bool DeliverHeaders(Stream* s);
  void Data(Stream* s, const uint8_t* data, size_t len);
  std::string Where() const;
  friend struct Http2Callbacks;  // nghttp2's callbacks (the .cc)

  TransportContext context_;
  uv_loop_t* loop_;  // context_.loop
  Options options_;
  Fallback fallback_;
  std::string host_;  // to connect to (no brackets)
  std::string port_;
  std::string prefix_;       // the URL's path prefix
  std::string authority_;    // :authority
  std::string verify_name_;  // checked in the certificate; empty: no check
  bool sni_ = false;

  Mode mode_ = Mode::kUnknown;
  std::unordered_map<RequestId, std::unique_ptr<Stream>> streams_;
  uint64_t streams_erased_ = 0;  // erasures from streams_ so far (FindAfterCallback)
  std::list<RequestId> waiting_;
  std::list<std::unique_ptr<Connection>> connections_;
  std::vector<RequestId> completed_;
  std::multimap<std::chrono::steady_clock::time_point, RequestId> deadlines_;
  uv_timer_t* deadline_timer_ = nullptr;
  uv_timer_t* kick_timer_ = nullptr;  // completions queued outside I/O callbacks
  std::shared_ptr<TlsCredentials> tls_;
  std::shared_ptr<const std::string> tls_ca_;       // the CA tls_ was made from
  std::shared_ptr<const ClientCertPair> tls_cert_;  // and the client certificate
  long connections_opened_ = 0;
  uint64_t next_connection_ = 1;
  int in_io_ = 0;
  std::shared_ptr<bool> alive_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_HTTP2_TRANSPORT_H_
