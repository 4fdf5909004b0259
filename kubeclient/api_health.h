// ApiHealth: whether the daemon's API requests fail, and how (ClassifyApiError, api_error.h), as
// one tracker shared by every ApiClient of the daemon (pods, objects, tokens, events, the Lease).
//
// * Each ApiClient given the tracker (ApiClient::SetHealth) reports every attempt's outcome: an
//   answer (anything ClassifyApiError calls kAnswered: 2xx, 403, 404, ...) or a failure.
// * The first answer means the server was reached and accepted the credentials: `reached()`,
//   and `on_first_answer` runs once (the daemon logs the identity the server confirmed then).
// * A permanent failure (the server not trusted, 401, an unusable client certificate) is the
//   problem until an answer clears it; a transient one (no answer, 5xx, 429) only until then too,
//   and never replaces a permanent one. While the server was never reached, the first permanent
//   failure goes to `on_permanent_before_reach` (the daemon exits, as the kubelet does with bad
//   bootstrap credentials).
// * Logs: a permanent failure at error level when it starts (or its reason changes), then at most
//   once per `error_log_interval` with how long and how many attempts; a transient outage at
//   warning level once it has lasted `outage_warning_after` (a shorter one is a restarting API
//   server or a load balancer's blip the retries absorb, already said at info by each retry),
//   then at most once per `error_log_interval`; the end of either at info.
// * Counts failed attempts by class and reason (the metric volumemanager_api_failures_total).
// Messages carry the server (redacted URL) and the failure's own message, never a credential.
// Loop thread only, not thread-safe; the clock is injectable (tests).
#ifndef VOLUMEMANAGER_KUBECLIENT_API_HEALTH_H_
#define VOLUMEMANAGER_KUBECLIENT_API_HEALTH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "kubeclient/api_error.h"

namespace kubeclient {

struct ApiHealthOptions {
  // The server as logs may name it (base::RedactedUrl).
  std::string server;
  // 30 s: as long as the reflectors' reconnect backoff may wait (backoff.h's cap); an API server
  // restart or a load balancer's failover usually ends within it.
  std::chrono::milliseconds outage_warning_after{30000};
  std::chrono::milliseconds error_log_interval{300000};
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class ApiHealth {
 public:
  struct Problem {
    FailureClass failure_class = FailureClass::kTransient;
    std::string reason;   // ClassifyApiError's reason
    std::string message;  // the last failure's ApiError::ToString()
    std::chrono::steady_clock::time_point since;
    uint64_t attempts = 0;
  };
  // By {class name, reason}.
  using FailureCounts = std::map<std::pair<std::string, std::string>, uint64_t>;

  explicit ApiHealth(ApiHealthOptions options);

  // One attempt's outcome: nullopt for a success.
  void OnOutcome(const std::optional<ApiError>& error);

  void SetOnFirstAnswer(std::function<void()> handler) { on_first_answer_ = std::move(handler); }
  void SetOnPermanentBeforeReach(std::function<void(const Problem&)> handler) {
    on_permanent_before_reach_ = std::move(handler);
  }

  bool reached() const { return reached_; }
  const std::optional<Problem>& problem() const { return problem_; }
  bool permanent() const { return problem_ && problem_->failure_class == FailureClass::kPermanent; }
  const FailureCounts& failures() const { return failures_; }
  // "<reason> since <n> s, <attempts> attempts: <message>" for /readyz; "" without a problem.
  std::string Describe() const;
  const ApiHealthOptions& options() const { return options_; }

 private:
  std::chrono::steady_clock::time_point Now() const;

  ApiHealthOptions options_;
  bool reached_ = false;
  bool told_before_reach_ = false;
  std::optional<Problem> problem_;
  // When the current problem was last logged; nullopt while a transient one is not yet said.
  std::optional<std::chrono::steady_clock::time_point> logged_;
  FailureCounts failures_;
  std::function<void()> on_first_answer_;
  std::function<void(const Problem&)> on_permanent_before_reach_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_API_HEALTH_H_
