// PodConfig: merges the pod sources (file, HTTP, API server) into one ordered stream of
// PodUpdates, with the kubelet podStorage's SET semantics: each source delivers its complete
// current state, and PodConfig works out what changed.
//
// For one delivery of a source, pods are keyed by UID within that source and the updates come in
// this order, each only when non-empty:
//   REMOVE    UIDs the source had and no longer has;
//   ADD       UIDs new to the source;
//   UPDATE    spec, labels, annotations (other than config.source) or deletion grace changed;
//   DELETE    such a change with metadata.deletionTimestamp set (graceful deletion);
//   ADD       empty, on the source's first delivery when it brought no ADD, UPDATE or DELETE,
//             so the consumer learns the source is ready;
//   RECONCILE nothing but status changed.
// Within a delivery, a second pod with the same full name (namespace/name) or the same UID is
// dropped and logged; pods without a UID are dropped and logged. Sources are independent: the
// same pod in two sources is two entries (the kubelet's pod manager sorts that out).
//
// The config.source annotation is set on a copy of a pod that lacks it; a source that sets it
// itself (as the file source does) has its pod objects passed on, and kept, without a copy.
//
// Thread model: every method, and every sink RegisterSource returns, must be called on one thread
// (the loop thread); `on_update` runs synchronously on it, inside the sink call.
#ifndef VOLUMEMANAGER_PODCONFIG_POD_CONFIG_H_
#define VOLUMEMANAGER_PODCONFIG_POD_CONFIG_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kube/pod.h"
#include "podconfig/pod_update.h"

namespace podconfig {

class PodConfig {
 public:
  using Sink = std::function<void(std::vector<PodPtr>)>;

  explicit PodConfig(std::function<void(const PodUpdate&)> on_update);
  PodConfig(const PodConfig&) = delete;
  PodConfig& operator=(const PodConfig&) = delete;

  // Registers a source; the returned sink takes that source's complete current state. The sink
  // refers to this PodConfig, which must outlive it. Registering a name twice returns a second
  // sink for the same source.
  Sink RegisterSource(const std::string& source);

  // True when every registered source delivered at least once (vacuously true with none).
  bool AllSourcesSeen() const;
  // True when `source` delivered at least once.
  bool SourceSeen(const std::string& source) const;
  // The registered sources' names.
  const std::set<std::string>& sources() const { return sources_; }

  // The current pods of one source, by UID (for tests and debug output).
  const std::map<std::string, PodPtr>& PodsOf(const std::string& source) const;

 private:
  void Set(const std::string& source, std::vector<PodPtr> pods);
  // "Pod added" / "updated" / "removed" / "marked for deletion" at info, one line per pod (a
  // deletion "(graceful)" only with a grace period, "with no grace period" at 0, naming
  // `gracePeriodSeconds`); an update of more than kMaxPodLinesPerUpdate pods is one line with the
  // count, the pods at debug.
  static void LogUpdate(const PodUpdate& update, const std::string& source);
  static constexpr size_t kMaxPodLinesPerUpdate = 10;

  std::function<void(const PodUpdate&)> on_update_;
  std::map<std::string, std::map<std::string, PodPtr>> pods_by_source_;  // source -> UID -> pod
  std::set<std::string> sources_;
  std::set<std::string> seen_;
};

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_POD_CONFIG_H_
