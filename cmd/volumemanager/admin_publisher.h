// AdminPublisher: the loop-thread side of the admin server (server/admin_server.h) for one
// Daemon. It owns the server and two loop handles:
//  * an async handle the server pokes when /healthz finds no recent heartbeat: its callback tells
//    the server the loop is alive (and the election loop, when used). No timer: idle, the loop
//    wakes for a probe only;
//  * an async handle the server's threads poke when a request needs current data; its callback
//    builds a snapshot (readiness, metrics, and the debug state when asked for) from the daemon's
//    state and publishes it. Nothing is built while nobody asks.
// Neither handle keeps the loop running.
//
// Metrics (names in docs/operations.md, "Metrics"): the reconciler's operations (the kubelet's
// storage_operation_duration_seconds), propagation, failures by reason, volumes by state, the
// reconciler's outcome counters, loop busy time, build info, and whatever the daemon's sources
// add (Daemon::AddSourceMetrics). The debug state lists, per volume, the pod, the objects read
// with their resourceVersions, the version on disk, last sync, last error and backoff; never
// object data.
//
// Loop thread only, except that the server's threads call into the async handle.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_ADMIN_PUBLISHER_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_ADMIN_PUBLISHER_H_

#include <uv.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "cmd/volumemanager/daemon.h"
#include "server/admin_server.h"

namespace volumemanager {

class AdminPublisher {
 public:
  // `configz`: what /configz serves. The daemon must outlive the publisher.
  AdminPublisher(uv_loop_t* loop, Daemon* daemon, nlohmann::json configz);
  ~AdminPublisher();
  AdminPublisher(const AdminPublisher&) = delete;
  AdminPublisher& operator=(const AdminPublisher&) = delete;

  // Binds the listeners (an empty address is not served) and answers heartbeat requests. An error
  // names the flag and address of a listener that could not bind; the other one is served
  // (server() is null only when neither is).
  base::Status Start(const std::string& healthz_address, const std::string& debug_address);
  // Stops the server (waiting for its handlers), then closes the handles; the loop must run for
  // them to close. Called again, does nothing.
  void Stop();

  // What /configz serves from now on (loop thread).
  void SetConfigz(nlohmann::json configz) {
    configz_ = std::make_shared<const nlohmann::json>(std::move(configz));
  }
  // Metrics added to the daemon's on every scrape (e.g. the dynamic config's), built on the loop.
  void SetExtraMetrics(std::function<void(std::vector<server::MetricFamily>*)> add) {
    extra_metrics_ = std::move(add);
  }

  // Null before Start or after Stop.
  const server::AdminServer* server() const { return server_.get(); }

  // The snapshot parts, as the async callback builds them.
  std::vector<server::MetricFamily> BuildMetrics() const;
  nlohmann::json BuildDebugState() const;
  // The readiness checks and the node's lock (`leaderElection`), for a standby too.
  void AddLockState(nlohmann::json* state) const;
  // "rejectedManifests": [{source, file, reason}] (Daemon::RejectedManifests).
  void AddRejectedManifests(nlohmann::json* state) const;

 private:
  struct Handles;
  void Publish();
  // server_->Beat() when the daemon's election loop (if any) is alive too.
  void BeatIfAlive();

  uv_loop_t* loop_;
  Daemon* daemon_;
  std::shared_ptr<const nlohmann::json> configz_;
  std::function<void(std::vector<server::MetricFamily>*)> extra_metrics_;
  std::unique_ptr<server::AdminServer> server_;
  Handles* handles_ = nullptr;  // freed by the close callbacks
  std::shared_ptr<const nlohmann::json> debug_state_;
  uint64_t debug_seq_ = 0;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_ADMIN_PUBLISHER_H_
