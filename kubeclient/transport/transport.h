// The HTTP transports' common ground: a request, its response, the callbacks that receive them,
// what stopped a request that got no answer, and `Transport`, the interface both transports
// implement (libcurl's, `CurlTransport`; the project's own HTTP/2 client, `Http2Transport`).
// `HttpClient` (http_client.h) holds the credentials and picks the transport for each request.
#ifndef VOLUMEMANAGER_KUBECLIENT_TRANSPORT_TRANSPORT_H_
#define VOLUMEMANAGER_KUBECLIENT_TRANSPORT_TRANSPORT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kubeclient {

// What stopped a request that got no answer (ApiError::fault, HttpResponse::fault): set by both
// transports (libcurl's result code, GnuTLS's handshake), so that both classify alike.
enum class TransportFault {
  kNone,               // a response arrived
  kOther,              // refused, reset, DNS, timeout, ...: the server may answer again
  kUntrustedServer,    // its certificate does not verify (CA, name), or the CA cannot be used
  kClientCertificate,  // the client certificate or key cannot be used
};

struct HttpRequest {
  std::string method = "GET";
  // Appended to the server URL (whose path prefix is kept): "/api/v1/pods?watch=true".
  std::string path;
  std::string body;
  // Defaults to application/json when there is a body.
  std::string content_type;
  // 0: the client's request_timeout for buffered requests, none for streams.
  std::chrono::milliseconds timeout{0};
  // Streamed: the body goes to StreamCallbacks::on_data as it arrives (watches).
  bool stream = false;
  // The Accept header; empty: libcurl's "*/*".
  std::string accept = "application/json";
  // Follow redirects (at most 10, http and https only).
  bool follow_redirects = false;
  // A buffered body longer than this fails the request ("body larger than N bytes"); 0: no limit.
  size_t max_body_bytes = 0;
};

struct HttpResponse {
  long status = 0;
  // 2 for HTTP/2, 1 for HTTP/1.x, 0 when unknown.
  int http_major = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // empty for streamed requests
  // When no response arrived: what kind of failure (both transports set it alike).
  TransportFault fault = TransportFault::kNone;
};

struct StreamCallbacks {
  // Once, before the first body byte (or at the end for a body-less response). For a 2xx
  // response the headers are handed over here only: the HttpDoneCallback's response then has
  // the status without them.
  std::function<void(const HttpResponse& head)> on_headers;
  // Body bytes, in order, any chunking. Return false to abort the transfer.
  std::function<bool(std::string_view data)> on_data;
};

// `transport` is OK when a response arrived (any status); otherwise it describes the failure
// (refused, reset, timeout, TLS, aborted by on_data).
using HttpDoneCallback = std::function<void(base::Status transport, HttpResponse response)>;

// A request id, unique within one HttpClient (the transports share its ids: a request handed from
// one transport to the other keeps its id).
using RequestId = std::uint64_t;

struct TransportStats {
  // Connections opened so far (new TCP+TLS connections, not reuses).
  long connections_opened = 0;
  // Connections open now (in use or idle).
  size_t open_connections = 0;
  size_t requests_in_flight = 0;
  // Of those, waiting for a connection to be ready.
  size_t requests_waiting = 0;
};

// One way of carrying requests to the server. Every call and callback on the loop thread.
class Transport {
 public:
  virtual ~Transport() = default;
  // Sends `request` under `id`; `done` runs once, never inside Start.
  virtual void Start(RequestId id, HttpRequest request, HttpDoneCallback done,
                     StreamCallbacks stream) = 0;
  // No callback of the request runs afterwards. False when the id is not this transport's
  // (unknown, finished, or handed on).
  virtual bool Cancel(RequestId id) = 0;
  // The client certificate changed: the connections opened with an older pair take no new
  // request; their streamed requests fail with `why` (their owners reconnect), the others finish;
  // each closes once it has no request left.
  virtual void RotateConnections(const std::string& why) = 0;
  virtual TransportStats stats() const = 0;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_TRANSPORT_H_
