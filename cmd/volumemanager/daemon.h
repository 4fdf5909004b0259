// Daemon: the standalone daemon's parts wired onto one libuv loop: the local object store, the pod
// sources and their merge, and the volume manager.
//
// Lifecycle (loop thread only; the loop runs between the calls):
//  * Start(): starts the object source (so that credentials that cannot be loaded end the start
//    before anything is created), creates the root dir and its pods dir (as the kubelet does at
//    start), opens the ownership journal in the state dir (what the daemon owns under the root
//    dir: only what it lists), then starts the volume manager (its start-up scan runs on the
//    thread pool), the node lock's election, the pod sources and the loop stall monitor, in that
//    order, so the objects a pod names can be served before any pod arrives.
//    A failure says which flag it concerns and the exit code the process should end with; what
//    was started is stopped again by Stop() or the destructor.
//  * ready(): the start-up scan is done and every pod source has delivered its first state, so
//    the desired state is complete and orphan cleanup may run.
//  * Stop(done): no new work from then on: the sources and the object store stop at once,
//    in-flight volume writes finish, then `done` runs on the loop thread. A second call does
//    nothing.
//
// Cluster mode (cluster_daemon.h) extends it by overriding the source hooks (objects and pods from
// the API server instead of, or beside, the manifest directories); the volume manager and the
// lifecycle stay.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_DAEMON_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_DAEMON_H_

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "cache/local_object_store.h"
#include "config/daemon_config.h"
#include "kube/pod.h"
#include "leaderelection/leader_elector.h"
#include "leaderelection/resource_lock.h"
#include "plugins/plugin_registry.h"
#include "podconfig/file_source.h"
#include "podconfig/http_source.h"
#include "podconfig/pod_config.h"
#include "server/metrics.h"
#include "server/snapshot.h"
#include "cmd/volumemanager/loop_stall_monitor.h"
#include "volumemanager/ownership_journal.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {

// Node allocatable for the downward API: --node-allocatable's values, else the machine's capacity
// (the kubelet's allocatable with no reservations configured).
base::Result<kube::ResourceList> NodeAllocatable(const config::DaemonConfig& config);

class Daemon {
 public:
  struct StartError {
    int exit_code;        // 2: a flag's value cannot be used; 1: the machine (or state) refused
    std::string message;  // names the flag, e.g. "--pod-manifest-path /x: ..."
  };

  Daemon(uv_loop_t* loop, config::DaemonConfig config);
  virtual ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  std::optional<StartError> Start();
  bool ready() const;
  void Stop(std::function<void()> done);
  bool stopping() const { return stopping_; }

  // For the admin server (admin_publisher.h), loop thread only. What readiness consists of: the
  // start-up scan, each pod source's first state, not stopping; cluster mode adds its caches.
  virtual std::vector<server::ReadinessCheck> ReadinessChecks() const;
  // Metrics of the sources (e.g. reflectors and API requests in cluster mode), added to the
  // volume manager's.
  virtual void AddSourceMetrics(std::vector<server::MetricFamily>* families) const {
    (void)families;
  }
  // Applies the fields of `config` that can change in a running daemon (config::LiveField):
  // the sync frequency here; cluster mode adds the Cache TTL and the event rate limits. Logging
  // is the binary's (main.cc).
  virtual void ApplyLiveConfig(const config::DaemonConfig& config);
  // Null before Start.
  const VolumeManager* volume_manager() const { return manager_.get(); }
  // One writer per node: null with --leader-elect=false.
  const leaderelection::LeaderElector* elector() const { return elector_.get(); }
  // Liveness beyond the loop (for /healthz): the election loop is alive (or not in use).
  bool ElectionAlive(std::chrono::steady_clock::time_point now) const {
    return elector_ == nullptr || stopping_ || elector_->Alive(now);
  }
  const LoopStallMonitor& stall_monitor() const { return stall_monitor_; }
  // The ownership journal's state for volumemanager_ownership_journal_state: "trusted" (read,
  // or new), "rejected" (unreadable or corrupt: owns nothing), "other_root_dir" (kept for another
  // --root-dir: owns nothing) or "waiting_for_filesystem" (the root dir is not on the recorded
  // filesystem yet: nothing reconciled).
  std::string OwnershipJournalState() const;
  // The objects as the volume manager reads them (resourceVersions for /debug/state).
  cache::ObjectManager* objects_for_debug() { return object_manager(); }

 protected:
  // Starts the object source; called before the volume manager exists. Its change events go to
  // OnObjectChanged.
  virtual std::optional<StartError> StartObjectSource();
  // The object manager the volume manager reads from (the local store here); it must outlive the
  // volume manager.
  virtual cache::ObjectManager* object_manager();
  // Registers and starts the pod sources; called after the volume manager started.
  virtual std::optional<StartError> StartPodSources();
  // Stops whatever the two hooks above started; no delivery happens after it returns.
  virtual void StopSources();
  // Last changes to the volume manager's options before it is created (e.g. where failures are
  // reported besides the log).
  virtual void ConfigureVolumeManager(VolumeManagerOptions& options) { (void)options; }
  // The node lock for --leader-elect-resource-lock leases (cluster mode only); called after
  // StartObjectSource.
  virtual base::Result<std::unique_ptr<leaderelection::ResourceLock>> MakeLeaseLock() {
    return base::Status::Error(
        "--leader-elect-resource-lock leases: needs cluster mode (--kubeconfig or --in-cluster); "
        "use the file lock");
  }

  void OnObjectChanged(const kube::ObjectRef& object);
  // For a derived destructor: the elector goes before the clients its lock uses.
  void DestroyElector() { elector_.reset(); }
  uv_loop_t* loop() const { return loop_; }
  const config::DaemonConfig& config() const { return config_; }
  podconfig::PodConfig& pods() { return *pods_; }

 private:
  // Opens the ownership journal kept for --root-dir (journal_) and logs how it was found.
  std::optional<StartError> OpenOwnershipJournal();

  uv_loop_t* loop_;
  config::DaemonConfig config_;
  std::unique_ptr<OwnershipJournal> journal_;
  OwnershipJournal::Loaded journal_loaded_ = OwnershipJournal::Loaded::kNew;
  std::unique_ptr<plugins::PluginRegistry> registry_;
  std::unique_ptr<cache::LocalObjectStore> objects_;
  std::unique_ptr<podconfig::PodConfig> pods_;
  std::unique_ptr<VolumeManager> manager_;
  std::unique_ptr<leaderelection::LeaderElector> elector_;
  podconfig::FileSource file_source_;
  podconfig::HttpSource http_source_;
  LoopStallMonitor stall_monitor_;
  // Starts the node lock's election (--leader-elect); writes wait for it.
  std::optional<StartError> StartElection(const std::string& identity);
  bool started_ = false;
  bool stopping_ = false;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_DAEMON_H_
