// Daemon: the standalone daemon's parts wired onto one libuv loop: the local object store, the pod
// sources and their merge, and the volume manager.
//
// Lifecycle (loop thread only; the loop runs between the calls):
//  * Start(): read-only preparation first: flags, the object source (so that credentials that
//    cannot be loaded end the start before anything else); then the node's lock is requested
//    (its first attempt runs on the next loop iteration), the pod sources start (their pods are
//    merged and kept, so a standby knows the desired state) and the loop stall monitor. The lock:
//    the flock on <state dir>/leader.lock always (the only writes before it is held: creating
//    the state dir and the lock file), and, with
//    --leader-elect-resource-lock leases, the Lease once the flock is held. Nothing else is
//    written to the state dir or the root dir before the lock is held. When it is first held:
//    the root dir and its pods dir are created (as the kubelet does at start), the ownership
//    journal is opened (and rewritten) in the state dir, the volume manager is created with the
//    pods merged so far and started (its start-up scan runs on the thread pool). A failure then
//    goes to the fatal handler (SetFatalHandler) with its flag and exit code; a failure in
//    Start() itself is returned. What was started is stopped again by Stop() or the destructor.
//  * Writes: only while the lock is held. The write gate (volumemanager/disk/write_gate.h) is open
//    until the lock's loss deadline, moved at each renewal and closed at once when it is lost, so
//    the pool threads stop starting operations even while the loop is late; the volume manager
//    stops passes when the loop hears of it.
//  * ready(): every pod source has delivered its first state and either the start-up scan is
//    done or the lock is not held yet (a standby is ready: during a surge update the old pod
//    holds the lock until it stops, and waiting for it would stall the rollout).
//  * Losing the lock after writing began ends the process (kExitLostLock, through the fatal
//    handler; a standby that never wrote campaigns again): a successor may have rewritten the
//    journal and the volumes meanwhile, and this process's view of both is stale.
//  * Stop(done): no new work from then on: the sources and the object store stop at once,
//    in-flight volume writes finish, the lock is released, then `done` runs on the loop thread.
//    A second call does nothing.
//
// --observe: no lock at all (no flock, no Lease) and nothing created or written: the volume
// manager starts at once with an ObservingDisk (volumemanager/disk/observing_disk.h) and the
// ownership journal read only (OwnershipJournal::ReadOnly); nothing is written under the root dir
// or the state dir, cluster mode posts no Event, and no reload action or subPath copy runs. What a
// normal run would change is logged, in /debug/state and in
// volumemanager_observe_volumes_differing.
//
// --leader-elect=false: the flock is taken all the same (two daemons on one state dir never
// both write) with the file lock's timing; no Lease, whatever --leader-elect-resource-lock says.
//
// Cluster mode (cluster_daemon.h) extends it by overriding the source hooks (objects and pods from
// the API server instead of, or beside, the manifest directories); the volume manager and the
// lifecycle stay.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_DAEMON_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_DAEMON_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/local_object_store.h"
#include "cmd/volumemanager/heap_trimmer.h"
#include "cmd/volumemanager/loop_stall_monitor.h"
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
#include "volumemanager/disk/observing_disk.h"
#include "volumemanager/disk/write_gate.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {

// Node allocatable for the downward API: --node-allocatable's values, else the machine's capacity
// (the kubelet's allocatable with no reservations configured).
base::Result<kube::ResourceList> NodeAllocatable(const config::DaemonConfig& config);

class Daemon {
 public:
  // The exit code after losing the node's lock once writing (LostAfterWriting).
  static constexpr int kExitLostLock = 6;
  struct StartError {
    int exit_code;        // 2: a flag's value cannot be used; 1: the machine (or state) refused;
                          // kExitLostLock
    std::string message;  // names the flag, e.g. "--pod-manifest-path /x: ..."
  };

  Daemon(uv_loop_t* loop, config::DaemonConfig config);
  virtual ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  std::optional<StartError> Start();
  bool ready() const;
  // Where a failure after Start() goes (opening the journal or creating the root dir once the
  // lock is held): e.g. a graceful stop with its exit code. Without one it is logged only.
  void SetFatalHandler(std::function<void(const StartError&)> handler) {
    fatal_ = std::move(handler);
  }
  // Runs once, on the loop, when the node's lock is first held, before anything else is written
  // (root dir, journal): e.g. counting this start against a dynamic config's trial. Returning
  // false starts nothing (the hook has begun a stop, e.g. to restart onto another config).
  void SetBeforeWriting(std::function<bool()> hook) { before_writing_ = std::move(hook); }
  // Whether this daemon holds the node's lock (all the locks it takes) as the loop last heard.
  bool holding_lock() const { return holding_; }
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
  // The manifest files rejected (there, but unreadable or invalid past the settle time), by
  // source: "pods" (--pod-manifest-path) and "objects" (--object-manifest-path), each listed
  // (empty when the source is not used).
  std::map<std::string, std::vector<manifestdir::RejectedManifest>> RejectedManifests() const;
  // Applies the fields of `config` that can change in a running daemon (config::LiveField):
  // the sync frequency here; cluster mode adds the Cache TTL and the event rate limits. Logging
  // is the binary's (main.cc).
  virtual void ApplyLiveConfig(const config::DaemonConfig& config);
  // Null before Start.
  const VolumeManager* volume_manager() const { return manager_.get(); }
  // Observe mode (--observe): what each volume looked at would need; null otherwise.
  const ObservingDisk* observer() const { return observer_.get(); }
  // One writer per node: the elector of the configured lock (the Lease's with
  // --leader-elect-resource-lock leases, else the flock's); null before Start.
  const leaderelection::LeaderElector* elector() const {
    return lease_elector_ ? lease_elector_.get() : elector_.get();
  }
  // Liveness beyond the loop (for /healthz): the election loops are alive.
  bool ElectionAlive(std::chrono::steady_clock::time_point now) const {
    return stopping_ || ((elector_ == nullptr || elector_->Alive(now)) &&
                         (lease_elector_ == nullptr || !file_held_ || lease_elector_->Alive(now)));
  }
  const LoopStallMonitor& stall_monitor() const { return stall_monitor_; }
  // The heap's free pages go back to the kernel after bulk work (heap_trimmer.h): after the
  // start-up reads, pod updates and object changes, once no write is in flight for `quiet`
  // (default 1 s; tests shorten it before Start).
  const HeapTrimmer& heap_trimmer() const { return trimmer_; }
  void set_heap_trim_quiet(std::chrono::milliseconds quiet) { heap_trim_quiet_ = quiet; }
  // The ownership journal's state for volumemanager_ownership_journal_state: "not_opened" (a
  // standby: the journal is opened once the node's lock is held), "trusted" (read, or new),
  // "rejected" (unreadable or corrupt: owns nothing), "other_root_dir" (kept for another
  // --root-dir: owns nothing) or "waiting_for_filesystem" (the root dir is not on the recorded
  // filesystem yet: nothing reconciled).
  std::string OwnershipJournalState() const;
  // The objects as the volume manager reads them (resourceVersions for /debug/state).
  cache::ObjectManager* objects_for_debug() { return object_manager(); }

 protected:
  // A failure after Start() that ends the process: to the fatal handler (SetFatalHandler).
  void ReportFatal(const StartError& error) {
    if (fatal_) fatal_(error);
  }
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
  void OnTokenChanged(const kube::TokenRef& token);
  // For a derived destructor: the elector goes before the clients its lock uses.
  void DestroyElector() {
    lease_elector_.reset();
    elector_.reset();
  }
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
  // The flock's elector (always) and the Lease's (--leader-elect-resource-lock leases, campaigning
  // only while the flock is held).
  std::unique_ptr<leaderelection::LeaderElector> elector_;
  std::unique_ptr<leaderelection::LeaderElector> lease_elector_;
  std::unique_ptr<WriteGate> gate_;
  std::string identity_;
  bool file_held_ = false;
  bool lease_held_ = false;
  bool holding_ = false;
  std::chrono::steady_clock::time_point file_deadline_{};
  std::chrono::steady_clock::time_point lease_deadline_{};
  std::function<void(const StartError&)> fatal_;
  std::function<bool()> before_writing_;
  podconfig::FileSource file_source_;
  podconfig::HttpSource http_source_;
  LoopStallMonitor stall_monitor_;
  HeapTrimmer trimmer_;
  std::chrono::milliseconds heap_trim_quiet_{1000};
  // Starts the node lock's election; writes wait for it.
  std::optional<StartError> StartElection();
  // The lock's state changed: the gate, the volume manager's writes, the first start of writing.
  void OnLockChanged();
  // The lock was lost after the volume manager started: no re-campaign; the fatal handler ends
  // the process (kExitLostLock) so that a fresh one reads the journal and the volumes again.
  void LostAfterWriting(const std::string& what);
  // On first holding the lock: root dir, journal, volume manager.
  std::optional<StartError> StartWriting();
  // --observe, in Start: the journal read only, the volume manager on an ObservingDisk.
  void StartObserving();
  // The volume manager, created and started with the pods merged so far.
  void StartVolumeManager();
  std::shared_ptr<ObservingDisk> observer_;
  bool started_ = false;
  bool stopping_ = false;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_DAEMON_H_
