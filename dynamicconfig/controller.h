// Controller: the running daemon's side of dynamic config (--dynamic-config ns/name). It watches
// two ConfigMaps in that namespace, `name` (shared by every node) and `name-<node name>` (this
// node's; when it exists it wins, so a change can be rolled out node by node), each holding a
// VolumeManagerConfiguration under the key "volumemanager". Once both have been listed, the
// winner is the assigned config; on each change of it:
//
//  1. download (the watch delivers it) and validate it with the daemon's file and flags
//     (ParseFunction): an invalid one is rejected: logged, a Warning Event DynamicConfigRejected
//     on the ConfigMap, counted, /configz's lastError; nothing else changes;
//  2. checkpoint it (assigned.json, atomically) before using it;
//  3. apply it: when every field that changes is live (config::LiveField) the `apply_live` hook
//     gets the new effective config and its trial starts now; otherwise the `restart` hook ends
//     the process gracefully so that its DaemonSet restarts it onto the checkpoint.
//
// Neither ConfigMap existing (both deleted) is the same with the file and flags alone. A config
// on trial becomes the last known good one when its trial ends with the process still running;
// a rollback (decided at start, startup.h) is reported with a Warning Event
// DynamicConfigRolledBack on its ConfigMap. A revision already rejected or rolled back is not
// tried again; a new revision of the ConfigMap is.
//
// Loop thread only. Hooks run on the loop thread and may not destroy the controller.
#ifndef VOLUMEMANAGER_DYNAMICCONFIG_CONTROLLER_H_
#define VOLUMEMANAGER_DYNAMICCONFIG_CONTROLLER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dynamicconfig/checkpoint_store.h"
#include "dynamicconfig/startup.h"
#include "kubeclient/api_client.h"
#include "kubeclient/watch/reflector.h"
#include "server/metrics.h"

namespace dynamicconfig {

inline constexpr char kConfigKey[] = "volumemanager";

struct ControllerOptions {
  std::string namespace_;
  std::string name;  // the shared ConfigMap; "<name>-<node_name>" is this node's
  std::string node_name;
  std::chrono::nanoseconds trial = std::chrono::minutes(10);
  // Wall-clock seconds; time(nullptr) when empty.
  std::function<int64_t()> now_unix;
  // The ConfigMap reflectors' settings (tests shorten the backoff); path, selector and kind are
  // set per ConfigMap.
  kubeclient::ReflectorOptions reflector;
};

struct ControllerHooks {
  ParseFunction parse;
  // The new effective configuration; only live fields differ from the running one.
  std::function<void(const config::ParsedFlags& parsed)> apply_live;
  // Stop gracefully and exit so that the process is restarted onto the checkpoint.
  std::function<void(const std::string& why)> restart;
  // A Warning Event on the config's ConfigMap.
  std::function<void(const Checkpoint& about, const std::string& reason,
                     const std::string& message)>
      warn;
  // What Status() or the active config reports changed (/configz).
  std::function<void()> status_changed;
};

class Controller {
 public:
  struct Counters {
    uint64_t rejected = 0;
    uint64_t rolled_back = 0;
    uint64_t applied_live = 0;
    uint64_t applied_by_restart = 0;
  };

  // `api` may be null (tests call OnAssigned themselves); it and `store` must outlive the
  // controller.
  Controller(uv_loop_t* loop, kubeclient::ApiClient* api, CheckpointStore* store, Startup startup,
             ControllerOptions options, ControllerHooks hooks);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Reports this start's rollback and checkpoint errors, arms the trial timer and starts the
  // ConfigMap watches.
  void Start();
  // Stops the watches and the timer; nothing is applied afterwards. Idempotent.
  void Stop();

  // The config assigned to this node now (nullopt: none), its `config` empty when the ConfigMap
  // has no key "volumemanager". The watches call it; tests may too.
  void OnAssigned(const std::optional<Checkpoint>& assigned);
  // The process is stopping gracefully: while it runs on a config on trial, this run does not
  // count as a failed one.
  void RecordCleanExit();

  // The effective configuration the daemon runs on now.
  const config::ParsedFlags& active_config() const { return startup_.parsed; }
  bool on_trial() const { return startup_.on_trial(); }
  // For /configz: source ConfigMaps, assigned, active, lastKnownGood (each a reference or null),
  // onTrial, trialEnds, rolledBack (reference and reason), lastError.
  nlohmann::json Status() const;
  const Counters& counters() const { return counters_; }
  void AddMetrics(std::vector<server::MetricFamily>* families) const;

 private:
  int64_t Now() const;
  void Reevaluate();
  void Reject(const Checkpoint& config, const std::string& why);
  void SetError(std::string error);
  void ArmTrialTimer();
  void EndTrial();
  void Changed();

  uv_loop_t* loop_;
  kubeclient::ApiClient* api_;
  CheckpointStore* store_;
  Startup startup_;
  ControllerOptions options_;
  ControllerHooks hooks_;
  Counters counters_;
  std::unique_ptr<kubeclient::Reflector> shared_;
  std::unique_ptr<kubeclient::Reflector> per_node_;
  uv_timer_t* trial_timer_ = nullptr;   // heap: closed asynchronously
  std::optional<Checkpoint> rejected_;  // the last revision rejected
  std::optional<std::string> last_error_;
  bool restarting_ = false;
  bool stopped_ = false;
};

}  // namespace dynamicconfig

#endif  // VOLUMEMANAGER_DYNAMICCONFIG_CONTROLLER_H_
