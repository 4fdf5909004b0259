// ApiClient: the Kubernetes REST verbs on top of HttpClient, with client-go's retry rules
// (docs/kubernetes-api.md §1.3) and errors parsed into ApiError.
//
// * A 429 or 5xx carrying an integer Retry-After is repeated after that many seconds, up to
//   `max_retry_after` times, for every verb (the server did not apply it).
// * GETs are also retried after a transport failure (refused, reset, EOF, timeout) or a 5xx
//   without Retry-After, with capped exponential backoff and jitter, up to
//   `max_transient_retries` times, each retry logged (path and error, never a body's data).
//   Writes are not retried (the server may have applied them).
// * A 401 drops the cached token's age, so the next attempt re-reads the token file.
// * Every attempt (retries included) and every stream (watch) set-up first takes a token from the
//   client-side rate limiter (rate_limiter.h, client-go's QPS/burst bucket), as client-go's
//   request.tryThrottle does; waiting for one never blocks the loop.
// * Every attempt's outcome (an HTTP response of any status, or none) goes to the client's
//   ServerReachability (server_reachability.h), which probes a server that stopped answering
//   (`GET /version`, about once a second, only while someone waits) and wakes the waiters when it
//   answers again. A GET retried after getting no answer is one such waiter: it goes again at the
//   end of its backoff or at that reconnect, whichever comes first.
// * With SetHealth, every attempt's outcome also goes to that ApiHealth (api_health.h), shared by
//   the daemon's clients; a retry after a permanent failure (ClassifyApiError) is then logged at
//   debug level only, the tracker saying it at error level, rate-limited.
// Callbacks run on the loop thread, exactly once per call unless the call is cancelled or the
// ApiClient destroyed first. Not thread-safe.
#ifndef VOLUMEMANAGER_KUBECLIENT_API_CLIENT_H_
#define VOLUMEMANAGER_KUBECLIENT_API_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "kubeclient/api_error.h"
#include "kubeclient/api_health.h"
#include "kubeclient/backoff.h"
#include "kubeclient/rate_limiter.h"
#include "kubeclient/server_reachability.h"
#include "kubeclient/transport/http_client.h"

namespace kubeclient {

struct ApiResult {
  std::optional<ApiError> error;
  // The decoded body on success (an object, a list, or a Status for some deletes).
  nlohmann::json object;
  bool ok() const { return !error.has_value(); }
};
using ApiCallback = std::function<void(ApiResult)>;

struct RetryPolicy {
  int max_retry_after = 10;
  int max_transient_retries = 4;
  BackoffOptions backoff{};
  // Upper bound on a single Retry-After wait.
  std::chrono::seconds max_retry_after_wait{60};
};

class ApiClient {
 public:
  using CallId = std::uint64_t;

  // `limits`: no limit by default; the daemon passes ClientGoRateLimits(--kube-api-qps,
  // --kube-api-burst).
  explicit ApiClient(HttpClient* http, RetryPolicy policy = {}, RateLimiterOptions limits = {},
                     ReachabilityOptions reachability = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // `path` includes the query, e.g. "/api/v1/namespaces/a/configmaps?limit=500".
  CallId Get(std::string path, ApiCallback done);
  CallId Create(std::string collection_path, const nlohmann::json& object, ApiCallback done);
  // 409 comes back as ApiError with IsConflict().
  CallId Update(std::string object_path, const nlohmann::json& object, ApiCallback done);
  CallId Patch(std::string object_path, const nlohmann::json& patch, std::string content_type,
               ApiCallback done);
  CallId Delete(std::string object_path, ApiCallback done);
  // A streamed request (a watch): rate-limited like the others, never retried; `on_start` runs
  // when it leaves the rate limiter and goes to the server, then HttpClient's callbacks follow.
  CallId Stream(HttpRequest request, HttpDoneCallback done, StreamCallbacks stream,
                std::function<void()> on_start = nullptr);
  // No callback of that call runs afterwards (also while it waits for the rate limiter).
  void Cancel(CallId id);

  HttpClient* http() const { return http_; }
  const RateLimiter& rate_limiter() const { return limiter_; }
  RateLimiter& rate_limiter() { return limiter_; }
  // Whether the server answers; waits for it to answer again; the reconnect grace.
  const ServerReachability& reachability() const { return *reachability_; }
  ServerReachability& reachability() { return *reachability_; }

  // Every attempt that got an outcome (retries included), by HTTP method and outcome: the status
  // code, or "<error>" when no response came (as client-go's rest_client_requests_total). A
  // stream (watch) counts when it ends; a cancelled call does not count.
  using RequestCounts = std::map<std::pair<std::string, std::string>, uint64_t>;
  const RequestCounts& request_counts() const { return request_counts_; }

  // Where every attempt's outcome goes besides ServerReachability (null: nowhere). Not owned; it
  // must outlive this client.
  // With one, the reachability's "not answering" line is at info level: the tracker warns once
  // an outage lasts.
  void SetHealth(ApiHealth* health);
  const ApiHealth* health() const { return health_; }

 private:
  struct Call;
  CallId StartCall(std::string method, std::string path, std::string body, std::string content_type,
                   ApiCallback done);
  // Takes a rate-limiter token, then sends.
  void Attempt(Call* call);
  void Send(Call* call);
  // Ends a call whose start threw: its callback gets a transport error.
  void Fail(CallId id, const std::string& why);
  void OnDone(CallId id, base::Status transport, HttpResponse response);
  void RetryLater(Call* call, std::chrono::milliseconds delay);
  // The call's next transient-retry delay (its Backoff made on first use).
  std::chrono::milliseconds NextBackoff(Call* call);
  void Complete(CallId id, ApiResult result);
  void CountRequest(const std::string& method, const base::Status& transport, long status);
  // The attempt's outcome to health_ (when set): a response with `status` (any), or none.
  void ReportHealth(const base::Status& transport, const HttpResponse& response,
                    const std::string& method);
  // ServerReachability's probe: one GET of the probe path, never retried.
  void SendProbe(std::function<void(bool answered)> done);
  // A GET retry waiting for its backoff is sent at once when the server answers again.
  void OnReconnect(CallId id);

  HttpClient* http_;
  RetryPolicy policy_;
  RateLimiter limiter_;
  // Before calls_: a call cancels its reconnect wait when it goes, so this must outlive calls_.
  std::unique_ptr<ServerReachability> reachability_;
  std::unordered_map<CallId, std::unique_ptr<Call>> calls_;
  CallId next_id_ = 1;
  RequestCounts request_counts_;
  ApiHealth* health_ = nullptr;
};

// Percent-encodes a query value (RFC 3986 unreserved characters stay).
std::string QueryEscape(const std::string& value);

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_API_CLIENT_H_
