// ServerReachability: whether the API server answers, as one ApiClient sees it, and the one probe
// that tells when it answers again after an outage (docs/kubernetes-api.md §4.7).
//
// * The ApiClient reports every attempt: an HTTP response of any status (OnAnswer), or none
//   (OnNoAnswer: connection refused or reset before a response, TLS failure, timeout).
// * Three states. Answering. In doubt: a request got no answer, and a probe is to tell whether
//   the server or only that request failed. Not answering: a probe got no answer either.
// * Whoever waits to retry after a request got no answer (the reflector's re-watch and its relist
//   after a list without answer, the ApiClient's GET retries) registers with WaitForAnswer. While
//   someone waits and the server is not known to answer, one probe (`GET /version`: every
//   authenticated identity may read it, RBAC's system:public-info-viewer role) is sent about
//   every `probe_interval` (each gap drawn from [1 - jitter/2, 1 + jitter/2) times it), never two
//   at once: a daemon with thousands of waiting reflectors asks a dead server once a second, not
//   thousands of times. No waiter, no probe.
// * The first answer after the server was found not answering (to the probe or to any other
//   request) is a reconnect: every waiter is woken at once (from a zero timer on the loop, never
//   inside the answer's own callback), and InReconnectGrace() holds for `reconnect_grace` after
//   it (a restarted API server refuses reads until its authorizers have filled their caches: the
//   Node authorizer's graph, RBAC's roles).
// * An answer while in doubt (the probe answered: only that request failed) wakes nobody: the
//   waiters keep their own backoff, so a request that fails by itself is not retried every second.
// Loop thread only, not thread-safe. A waiter's callback runs on the loop thread, once, unless
// cancelled first or the object destroyed; it may call back into this object. The clock and the
// random source are injectable (tests).
#ifndef VOLUMEMANAGER_KUBECLIENT_SERVER_REACHABILITY_H_
#define VOLUMEMANAGER_KUBECLIENT_SERVER_REACHABILITY_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kubeclient {

struct ReachabilityOptions {
  std::chrono::milliseconds probe_interval{1000};
  // Each gap between probes is probe_interval times a factor drawn from [1 - j/2, 1 + j/2), so
  // the daemons of a fleet do not probe a restarted server in step.
  double probe_jitter = 0.5;
  std::string probe_path = "/version";
  // A probe without an answer by then counts as none (a server that accepts and never answers).
  std::chrono::milliseconds probe_timeout{5000};
  // After a reconnect, how long a 403 is taken for the authorizers still filling their caches
  // from their informers (the Node authorizer's graph, RBAC's roles: a few seconds on a real
  // 1.20 server; 30 s leaves room for a large cluster's initial lists, and a real refusal is
  // still reported within it).
  std::chrono::milliseconds reconnect_grace{30000};
  // Within the grace, a 403 is read again at most this long after it (the reflector's relist, the
  // object manager's direct reads), without failing anything.
  std::chrono::milliseconds grace_retry_delay{1000};
  // Time source and random numbers in [0, 1); steady_clock::now and a thread-local engine when
  // empty.
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::function<double()> random01;
};

class ServerReachability {
 public:
  enum class State { kAnswering, kInDoubt, kNotAnswering };
  using Ticket = std::uint64_t;
  // Sends one probe (`GET probe_path`) and calls `done(answered)` once with whether any HTTP
  // response came. The owner reports its outcome through OnAnswer/OnNoAnswer as for any request
  // (either order); `done` must not run after this object is destroyed.
  using Probe = std::function<void(std::function<void(bool answered)> done)>;

  struct Stats {
    uint64_t probes = 0;             // probes sent
    uint64_t probes_answered = 0;    // probes that got an HTTP response (any status)
    uint64_t probes_unanswered = 0;  // probes that got none
    uint64_t reconnects = 0;         // answers after the server was found not answering
    uint64_t woken = 0;              // waiters woken by a reconnect
  };

  ServerReachability(uv_loop_t* loop, ReachabilityOptions options, Probe probe);
  ~ServerReachability();
  ServerReachability(const ServerReachability&) = delete;
  ServerReachability& operator=(const ServerReachability&) = delete;

  // An HTTP response (any status) to any request.
  void OnAnswer();
  // A request that got no HTTP response.
  void OnNoAnswer();
  // The level of the "not answering" line (warning by default; info where an ApiHealth says the
  // outage once it lasts, api_health.h).
  void SetOutageLogLevel(int spdlog_level) { outage_log_level_ = spdlog_level; }

  // `wake` runs at the next reconnect. Returns a ticket for CancelWait.
  Ticket WaitForAnswer(std::function<void()> wake);
  // That waiter's `wake` will not run. Unknown or finished tickets are ignored.
  void CancelWait(Ticket ticket);

  // Within `reconnect_grace` after the last reconnect.
  bool InReconnectGrace() const;
  State state() const { return state_; }
  size_t waiting() const { return waiters_.size(); }
  const Stats& stats() const { return stats_; }
  const ReachabilityOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point Now() const;
  // Arms the probe timer when a probe is due: someone waits, the server is not known to answer,
  // and no probe is in flight or armed.
  void MaybeScheduleProbe();
  void SendProbe();
  void OnProbeDone(bool answered);
  void WakeAll();

  ReachabilityOptions options_;
  Probe probe_;
  State state_ = State::kAnswering;
  Stats stats_;
  std::map<Ticket, std::function<void()>> waiters_;
  Ticket next_ticket_ = 1;
  // The wake timer wakes the waiters with tickets below this (those waiting at the reconnect).
  Ticket wake_below_ = 0;
  bool probe_in_flight_ = false;
  bool probe_armed_ = false;
  std::optional<Clock::time_point> last_probe_;
  std::optional<Clock::time_point> reconnected_at_;
  std::optional<Clock::time_point> down_since_;
  uv_timer_t* probe_timer_;
  uv_timer_t* wake_timer_;
  // Cleared on destruction: a probe's `done` that comes later does nothing.
  std::shared_ptr<bool> alive_;
  int outage_log_level_ = 3;  // spdlog::level::warn
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_SERVER_REACHABILITY_H_
