// CurlTransport: requests through libcurl's multi-socket interface on the daemon's libuv loop
// (uv_poll per socket, one uv_timer; no extra threads). http and https, redirects included; HTTP/2
// with multiplexing when the server offers it over ALPN, HTTP/1.1 otherwise.
//
// Promises:
// * At most `max_streams_per_connection` concurrent streams share one connection; beyond that
//   libcurl opens another. A burst of requests fills connections instead of opening one per
//   request: requests beyond what the ready connections can carry wait in order (not in libcurl)
//   while one of them opens the next connection, and go once it is ready. (libcurl 7.88, asked
//   for more streams than its connections allow, opens a new connection for every such transfer
//   until one is ready: 2,000 watches started at once took 1,902 connections.)
// * Each request takes the CA and the client certificate current when it starts, and the token
//   (TransportContext: the HttpClient's). libcurl reuses a connection only
//   for the same certificate; RotateConnections ends the streams of an older pair at once.
// * gzip accepted (libcurl decodes it), TCP keepalive, connect and per-request timeouts;
//   `Warning` response headers are logged.
// * Every callback runs on the loop thread, never inside Start and never after Cancel or the
//   transport's destruction; a completion callback may destroy the transport. No exception
//   escapes into libuv or libcurl: a throwing callback is logged and its request aborted.
// Loaded by Create (dlopen, curl_library.h). Not thread-safe.
#ifndef VOLUMEMANAGER_KUBECLIENT_TRANSPORT_CURL_TRANSPORT_H_
#define VOLUMEMANAGER_KUBECLIENT_TRANSPORT_CURL_TRANSPORT_H_

#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "kubeclient/transport/transport.h"
#include "kubeclient/transport/transport_context.h"

namespace kubeclient {

class CurlTransport : public Transport {
 public:
  // Fails when libcurl cannot be loaded or its multi handle made.
  static base::Result<std::unique_ptr<CurlTransport>> Create(TransportContext context);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  void Start(RequestId id, HttpRequest request, HttpDoneCallback done,
             StreamCallbacks stream) override;
  bool Cancel(RequestId id) override;
  // libcurl reuses a connection only for the same certificate, so new requests get new
  // connections; the streams of an older pair end here with `why` (their connections then close),
  // the other requests finish where they are. Completion callbacks run inside this call.
  void RotateConnections(const std::string& why) override;
  TransportStats stats() const override;

  struct Transfer;       // one request in flight (internal)
  struct SocketContext;  // one polled socket (internal)

 private:
  explicit CurlTransport(TransportContext context);

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

  TransportContext context_;
  // With tls-server-name: the URL requests go to and the CONNECT_TO entry that sends them to
  // the server's own address (empty otherwise).
  std::string url_base_;
  std::string connect_to_;
  void* multi_ = nullptr;        // CURLM*
  uv_timer_t* timer_ = nullptr;  // heap: it outlives the transport until its close callback
  std::unordered_map<RequestId, std::unique_ptr<Transfer>> transfers_;
  std::unordered_map<int, SocketContext*> sockets_;
  // Requests started but not yet handed to libcurl (see Admit), oldest first.
  std::deque<RequestId> waiting_;
  size_t in_curl_count_ = 0;  // handed to libcurl, not yet removed
  size_t unconfirmed_ = 0;    // of those, not yet on a ready connection (prereq not seen)
  // Local ports of the connections a request has been sent on (ready: TLS and ALPN done).
  std::unordered_set<int> ready_ports_;
  long connections_opened_ = 0;
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

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_CURL_TRANSPORT_H_
