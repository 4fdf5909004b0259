// ReloadController: tells a pod's application that new content of its volumes is in place, as
// the pod's annotations ask (reload/reload_spec.h): an HTTP request to the pod's own IP, or
// (cluster mode) a signal to its containers' main processes.
//
// When: after a content swap of a triggering volume (a write of the daemon's that published a new
// version over earlier content, or, beside the kubelet, a swap of the kubelet's that the daemon
// saw; the daemon's check of that swap, and the correction it may bring, complete first), once no
// triggering volume of the pod has newer content on its way to disk (ReloadHost::Progress: no
// write, object read or check of it running or due), and `reload-delay` after the last such swap:
// a burst of changes inside the window gives one run of the actions, for the final content. A
// triggering volume that fails (its last attempt failed: its object refused, missing or deleted,
// a write error) and waits out its backoff is not waited for: it keeps its last good content, it
// may fail for as long as its object is missing, and the run's reports name it; once it recovers,
// its new content is a swap of its own. Whatever ends a volume's way to disk calls
// OnVolumeActivity, so a run that waits for the volume starts then: an operation's end, or the
// volume coming to rest without one (a remount, e.g. a resync's, that finds the inputs it last
// wrote ends on the loop). Never at first set-up (the application reads its files when it
// starts), never for a write that changed nothing, never for a terminating pod, a pod not running
// (cluster mode), or a pod whose containers all started after the swap. Right before each
// attempt the pod is looked at again: still there, running, not terminating, and (HTTP) with the
// same IP as at the run's first attempt (IPs are reused).
//
// How much: one run per pod at a time, and the next starts no sooner than `min_interval` after the
// last one started (changes meanwhile are batched into it); each action is attempted up to
// `max_attempts` times, `retry_initial` doubling between attempts, on a transport error, a 5xx, a
// 408 or a 429 (another 4xx, a 3xx, or a refusal is final). HTTP requests share one node-wide
// concurrency limit (reload/http_caller.h), shared fairly by pod: a pod whose listener hangs holds
// one slot for at most the request timeout per attempt, and once it has timed out its retries
// wait behind the calls of pods that answer.
//
// Reports: a log line at info per action run (pod, action, result, the object versions covered,
// the triggering volumes failing), `on_result` per run (cluster mode: a Reloaded or ReloadFailed
// Event; it names the failing volumes too), counters by action kind and result, a histogram from
// the first change a run covers to its last action answered, and per pod the last run, what is
// pending and which volumes it waits for (/debug/state). A bad annotation is reported once per
// value (log, `on_annotation_error`, a gauge of pods with one) and touches nothing else. In
// cluster mode an HTTP action of a hostNetwork pod is refused by the daemon's own rule (its own IP
// is the node's, which the daemon never calls): configured policy, not the pod's mistake, so it is
// said once, when the pod appears, at info and through `on_policy_refusal` (a Normal Event),
// counted apart (policy_refusals()); its actions never run (its address is checked at each
// attempt all the same).
//
// Loop-thread only. Close() before destruction.
#ifndef VOLUMEMANAGER_RELOAD_RELOAD_CONTROLLER_H_
#define VOLUMEMANAGER_RELOAD_RELOAD_CONTROLLER_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/pod.h"
#include "reload/http_caller.h"
#include "reload/reload_spec.h"
#include "reload/signal_action.h"
#include "reload/signal_batcher.h"
#include "server/metrics.h"

namespace reload {

// Where a triggering volume stands on its way to disk, as the host answers it
// (ReloadHost::Progress; the volume manager asks its reconciler).
enum class VolumeProgress {
  // Nothing newer on its way to disk: current, waiting for something outside the daemon (the
  // kubelet's set-up, an object's first read), its pod terminating, or no longer refreshed.
  kSettled,
  // Newer content may be on its way: a write, object read or check of it runs, or is owed and due.
  // Whatever ends this is reported (OnVolumeActivity).
  kWriting,
  // Its last attempt failed and it waits out its backoff: it shows its last good content (or
  // none), and its retries may fail for as long as the cause lasts (an object refused, missing or
  // deleted). Not waited for.
  kFailing,
};

// A triggering volume's content changed on disk after its first set-up (the host's report).
struct VolumeSwap {
  std::string pod_uid;
  std::string volume;
  bool foreign = false;  // another writer's swap (the kubelet's), seen by a check of ..data
  std::string version;   // the ..data target after the swap
  // The earliest change the daemon's write served, or when the foreign swap was seen: the run's
  // latency is measured from it.
  std::chrono::steady_clock::time_point changed_at{};
};

// What the controller needs of its host (the volume manager).
class ReloadHost {
 public:
  virtual ~ReloadHost() = default;
  // The pod's volumes the daemon refreshes (its desired volumes).
  virtual std::vector<std::string> RefreshedVolumes(const std::string& pod_uid) const = 0;
  // Whether newer content of the volume may still be on its way to disk (see VolumeProgress).
  virtual VolumeProgress Progress(const std::string& pod_uid, const std::string& volume) const = 0;
  // The objects the volumes read, as "configmap/ns/name@resourceVersion" (metadata only).
  virtual std::vector<std::string> ObjectVersions(
      const std::string& pod_uid, const std::vector<std::string>& volumes) const = 0;
};

struct ReloadControllerOptions {
  bool cluster_mode = false;
  HttpCallerOptions http;
  int max_attempts = 4;
  std::chrono::milliseconds retry_initial{1000};
  std::chrono::milliseconds min_interval{1000};
  // Signals (blocking; SignalContainers): one result per request, the process signalled or
  // why not. Run on a thread of their own, every pod's requests of a batch in one call (one scan
  // of /proc): SignalBatcher. Null: signal actions are refused as not enabled.
  std::function<std::vector<base::Result<std::string>>(const std::vector<ContainerSignal>&)>
      send_signals;
  // A run of the pod's actions ended: `ok` when each action succeeded; `message` names the actions
  // and results and the objects' versions (never data). E.g. a Reloaded or ReloadFailed Event.
  std::function<void(const kube::Pod& pod, bool ok, const std::string& message)> on_result;
  // A bad reload annotation (once per value): e.g. a Warning Event.
  std::function<void(const kube::Pod& pod, const std::string& error)> on_annotation_error;
  // Actions the daemon's rules never run for this pod (cluster mode: a hostNetwork pod's HTTP
  // actions), once per annotation value: e.g. a Normal Event.
  std::function<void(const kube::Pod& pod, const std::string& reason)> on_policy_refusal;
  // The addresses of the daemon's network (cluster mode: never a target). Tests inject them.
  std::function<std::vector<std::string>()> node_addresses;
  std::function<std::chrono::steady_clock::time_point()> clock = &std::chrono::steady_clock::now;
  // Observe mode (--observe): a run that would start is logged ("Observe: would run the reload
  // actions") and counted with the result "observed"; no action runs (no request, no signal,
  // no on_result).
  bool observe = false;
};

class ReloadController {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  ReloadController(uv_loop_t* loop, ReloadControllerOptions options, const ReloadHost* host);
  ~ReloadController();
  ReloadController(const ReloadController&) = delete;
  ReloadController& operator=(const ReloadController&) = delete;

  // A pod added or updated (its annotations are checked again when they or its hostNetwork
  // changed), or removed.
  void OnPod(std::shared_ptr<const kube::Pod> pod);
  void OnPodRemoved(const std::string& pod_uid);
  // A volume's content changed (ignored unless it triggers the pod's actions).
  void OnContentSwapped(const VolumeSwap& swap);
  // Something about the pod's volumes ended (an operation, or a volume came to rest without one):
  // a volume's VolumeProgress may have left kWriting, and a pending run may start.
  void OnVolumeActivity(const std::string& pod_uid);
  // No new work; `done` once every request and signal in flight has ended and handles closed.
  void Close(std::function<void()> done);

  // Metrics.
  // (action kind, result) -> count; result: success, failure, refused, skipped, observed.
  const std::map<std::pair<std::string, std::string>, long>& action_counts() const {
    return counts_;
  }
  const server::Histogram& latency() const { return latency_; }
  size_t annotation_errors() const;
  // Pods whose actions are never run by policy (hostNetwork, cluster mode).
  size_t policy_refusals() const;
  static const std::vector<double>& LatencyBuckets();

  // /debug/state: per pod with a reload annotation.
  struct RunReport {
    WallTime at{};
    bool ok = false;
    std::vector<std::string> results;  // "POST http://:9090/-/reload: HTTP 200"
    std::vector<std::string> volumes;  // the changed volumes it covered
    std::vector<std::string> objects;  // their objects' versions
    // The triggering volumes failing as it started (VolumeProgress::kFailing): not waited for.
    std::vector<std::string> failing_volumes;
  };
  struct PodView {
    std::string pod;  // namespace/name
    std::vector<std::string> actions;
    std::string annotation_error;
    std::string policy_refusal;  // why the actions never run, by policy ("" when they may)
    std::vector<std::string> pending_volumes;  // changed, not reloaded yet
    // While a run is pending: the triggering volumes whose newer content is on its way
    // (VolumeProgress::kWriting), which it waits for.
    std::vector<std::string> waiting_for;
    bool running = false;
    std::optional<RunReport> last;
  };
  std::map<std::string, PodView> View() const;  // by pod UID
  size_t pod_count() const { return pods_.size(); }

 private:
  struct PodState;
  struct Run;

  void Evaluate(const std::string& uid);
  // `failing`: the triggering volumes failing (not waited for), for the run's reports.
  void StartRun(PodState& p, std::vector<std::string> failing);
  void NextAction(const std::string& uid);
  void Attempt(const std::string& uid);
  // `outcome`: kOk; kRefused (refused by the daemon's rules or configuration) or kNotSent (the
  // target was not there to receive it), both counted as "refused"; anything else is a failure.
  // `result` is its text for logs and the run's report (never read for its kind).
  void AttemptDone(const std::string& uid, uint64_t run_id, base::StatusCode outcome,
                   bool retryable, const std::string& result);
  void FinishRun(PodState& p);
  // Why the pod may not be told now ("" when it may): gone, terminating, not running.
  std::string PodUnreachable(const PodState& p) const;
  std::vector<std::string> TriggeringVolumes(const PodState& p) const;
  void Wake(const std::string& uid, SteadyTime at);
  void ArmTimer();
  void OnTimer();
  void Count(const std::string& kind, const std::string& result) { ++counts_[{kind, result}]; }
  SteadyTime Now() const { return options_.clock(); }

  uv_loop_t* loop_;
  ReloadControllerOptions options_;
  const ReloadHost* host_;
  HttpCaller http_;
  std::map<std::string, std::unique_ptr<PodState>> pods_;
  std::map<std::string, SteadyTime> wake_;  // pod UID -> when to look at it again
  uv_timer_t* timer_ = nullptr;
  uint64_t next_run_id_ = 0;
  std::unique_ptr<SignalBatcher> signals_;  // null: signals not enabled
  bool closing_ = false;
  bool http_closed_ = false;
  bool signals_closed_ = false;
  std::function<void()> close_done_;
  std::map<std::pair<std::string, std::string>, long> counts_;
  server::Histogram latency_{LatencyBuckets()};
  std::vector<std::string> node_addresses_;
  SteadyTime node_addresses_at_{};
  void MaybeClosed();
};

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_RELOAD_CONTROLLER_H_
