// ApiTokenManager: the TokenManager of cluster mode (token_manager.h). A token is requested with
// the TokenRequest API (docs/kubernetes-api.md §2.7) through the daemon's kubeclient::ApiClient
// (its rate limit and reachability), as the kubelet's token manager does:
//
//   POST /api/v1/namespaces/<ns>/serviceaccounts/<sa>/token
//   {"spec": {"audiences": [<audience>] (none: the API server's own), "expirationSeconds": <n>,
//             "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": <pod>, "uid": <uid>}}}
//
// Under a node's credentials the API server grants this for the service accounts of pods bound
// to that node, bound to such a pod with its UID (the Node authorizer and NodeRestriction); the
// daemon asks for nothing else.
//
// Refresh: a token is requested again once 80 % of its life has passed or 24 h after it was
// issued, whichever comes first, less a jitter of up to 10 s (at most a tenth of its life), as the
// kubelet's requiresRefresh; its life counts from the moment the request was sent (the server
// issues it later, so this errs early) to the earlier of that moment plus the answer's
// spec.expirationSeconds (the server may shorten what was asked, --service-account-max-token-
// expiration) and its status.expirationTimestamp on this node's clock (ignored, with a warning,
// when it is earlier than the request: the clocks disagree). A refresh is made on the
// manager's own timer; its token replaces the old one and the change handler runs. A refresh that
// fails keeps the old token served while it is valid, logged once per run of failures (a warning
// naming the service account, the pod and the error), and is retried after 1 s doubling to 2 min
// (never later than the old token's expiry); once the old token has expired, gets fail with the
// error ("token expired and its refresh failed: ...") and the change handler runs, so each volume
// using it fails visibly (a FailedMount) and keeps its last content. A token never received is
// requested at each Fetch (the volume's own failure backoff paces those).
//
// `refusal` set (the daemon's credentials may not mint tokens: anything but a node's): nothing is
// ever requested and every get fails with that reason, naming the service account.
//
// Tokens live in memory only, never in a log line, an error, /debug/state or a metric.
//
// Thread model: loop thread only. Stop() cancels requests and the timer and completes every
// pending Fetch; the destructor stops first. The loop must run on after Stop for the timer to
// close.
#ifndef VOLUMEMANAGER_CACHE_API_TOKEN_MANAGER_H_
#define VOLUMEMANAGER_CACHE_API_TOKEN_MANAGER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cache/token_manager.h"
#include "kubeclient/api_client.h"

namespace cache {

struct ApiTokenManagerOptions {
  // Non-empty: no token is requested; gets fail with this reason.
  std::string refusal;
  // The kubelet's limits: a token is renewed at the latest this long after it was issued, and
  // up to `max_jitter` earlier than due (at most a tenth of its life).
  std::chrono::milliseconds max_age = std::chrono::hours(24);
  std::chrono::milliseconds max_jitter{10'000};
  // Retries of a failed refresh while the old token is valid.
  std::chrono::milliseconds retry_initial{1000};
  std::chrono::milliseconds retry_max{120'000};
  // Clocks (tests inject theirs): steady for the timers, system for expirationTimestamp and
  // /debug/state.
  std::function<std::chrono::steady_clock::time_point()> steady_clock =
      &std::chrono::steady_clock::now;
  std::function<std::chrono::system_clock::time_point()> system_clock =
      &std::chrono::system_clock::now;
  // The jitter's draw in [0, 1) (tests pin it); empty: random.
  std::function<double()> jitter;
};

class ApiTokenManager : public TokenManager {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // `loop` and `api` must outlive the manager.
  ApiTokenManager(uv_loop_t* loop, kubeclient::ApiClient* api, ApiTokenManagerOptions options);
  ~ApiTokenManager() override;
  ApiTokenManager(const ApiTokenManager&) = delete;
  ApiTokenManager& operator=(const ApiTokenManager&) = delete;

  void RegisterPod(const std::string& pod_uid, const std::vector<kube::TokenRef>& refs) override;
  void UnregisterPod(const std::string& pod_uid) override;
  base::Result<TokenRevision> Get(const kube::TokenRef& ref) const override;
  void Fetch(const std::vector<kube::TokenRef>& refs, std::function<void()> done) override;
  void SetChangeHandler(std::function<void(const kube::TokenRef&)> handler) override {
    on_change_ = std::move(handler);
  }
  std::optional<TokenStatus> Status(const kube::TokenRef& ref) const override;

  void Stop();

  // Requests by outcome, for /metrics; `refused`: fetches answered with the refusal, no request.
  struct Stats {
    uint64_t requested_ok = 0;
    uint64_t requested_failed = 0;
    uint64_t refreshed = 0;  // a token replaced by a newer one
    uint64_t expired = 0;    // a token that expired while its refresh failed
    uint64_t refused = 0;
  };
  const Stats& stats() const { return stats_; }
  size_t token_count() const { return entries_.size(); }
  const std::string& refusal() const { return options_.refusal; }

 private:
  struct Join;
  struct Entry {
    std::shared_ptr<const std::string> token;
    uint64_t serial = 0;
    SteadyTime expires{};
    std::chrono::system_clock::time_point expires_wall{};
    SteadyTime refresh_at{};
    std::chrono::system_clock::time_point refresh_at_wall{};
    std::optional<kubeclient::ApiClient::CallId> call;
    std::vector<std::shared_ptr<Join>> waiters;
    base::Status last_error;
    // A failed refresh while the token is valid: retried at retry_at; the delay doubles.
    SteadyTime retry_at{};
    std::chrono::milliseconds retry_delay{0};
    bool failure_logged = false;
    bool expiry_announced = false;
    // The entry's place in the timer queue (refresh, retry or expiry).
    std::optional<std::multimap<SteadyTime, kube::TokenRef>::iterator> due;
  };

  void Request(const kube::TokenRef& ref, Entry& entry);
  void OnAnswer(const kube::TokenRef& ref, kubeclient::ApiResult result, SteadyTime sent,
                std::chrono::system_clock::time_point sent_wall);
  void Complete(Entry& entry);
  void Schedule(const kube::TokenRef& ref, Entry& entry);
  void Unschedule(Entry& entry);
  void ArmTimer();
  void OnTimer();
  void Forget(const kube::TokenRef& ref);
  std::chrono::milliseconds Jitter(std::chrono::milliseconds life);

  uv_loop_t* loop_;
  kubeclient::ApiClient* api_;
  ApiTokenManagerOptions options_;
  std::function<void(const kube::TokenRef&)> on_change_;
  std::map<kube::TokenRef, Entry> entries_;
  std::map<std::string, std::vector<kube::TokenRef>> by_pod_;
  std::multimap<SteadyTime, kube::TokenRef> due_;
  uv_timer_t* timer_ = nullptr;
  uint64_t next_serial_ = 0;
  bool stopped_ = false;
  std::mt19937_64 rng_{std::random_device{}()};
  Stats stats_;
  // Answers check it: the ApiClient may outlive the manager.
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_API_TOKEN_MANAGER_H_
