// Snapshot: what the admin server serves, other than liveness, as one immutable value the loop
// thread builds and publishes (AdminServer::Publish) and server threads only read. It holds no
// pointer into loop-owned state.
#ifndef VOLUMEMANAGER_SERVER_SNAPSHOT_H_
#define VOLUMEMANAGER_SERVER_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/metrics.h"

namespace server {

// One readiness condition: its name (e.g. "pod-source-file"), whether it holds, and what is
// missing when it does not (named in /readyz?verbose).
struct ReadinessCheck {
  std::string name;
  bool ok = false;
  std::string detail;
};

// Whether /readyz answers 200: every check holds. The volumemanager_ready gauge of /metrics says
// the same of the same snapshot.
inline bool AllReady(const std::vector<ReadinessCheck>& checks) {
  for (const ReadinessCheck& c : checks) {
    if (!c.ok) return false;
  }
  return true;
}

struct Snapshot {
  // The refresh requests this snapshot answers (AdminServer::Requests): everything requested up
  // to `seq`, and the debug state requested up to `debug_seq`.
  uint64_t seq = 0;
  uint64_t debug_seq = 0;
  std::vector<ReadinessCheck> readiness;
  std::vector<MetricFamily> metrics;
  // /debug/state: built only when asked for (it lists every volume); null before the first ask.
  std::shared_ptr<const nlohmann::json> debug_state;
  // /configz: the effective configuration and where each value came from.
  std::shared_ptr<const nlohmann::json> configz;
};

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_SNAPSHOT_H_
