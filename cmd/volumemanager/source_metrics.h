// Metrics of cluster mode's sources, for Daemon::AddSourceMetrics (names in docs/operations.md,
// "Metrics"): API requests by method and outcome, the API server's reconnects and the probes
// that found them, the pod reflector's lists, relists and watch requests, the 410s the reflectors
// saw, the object managers' reads, refusals retried and running per-object watches, the
// service account token requests, and the API failures by class. Loop thread only.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_SOURCE_METRICS_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_SOURCE_METRICS_H_

#include <vector>

#include "cache/api_object_manager.h"
#include "cache/api_token_manager.h"
#include "kubeclient/api_client.h"
#include "kubeclient/api_health.h"
#include "podconfig/api_source.h"
#include "server/metrics.h"

namespace volumemanager {

// `clients`: every ApiClient of the daemon (their counts are summed); `objects` may be null.
void AddClusterSourceMetrics(const std::vector<const kubeclient::ApiClient*>& clients,
                             const podconfig::ApiSource& pods,
                             const cache::ApiObjectManager* objects,
                             std::vector<server::MetricFamily>* families);

// The token manager's requests by result (success, error, refused), the tokens registered and the
// tokens that expired while their refresh failed. Never a token.
void AddTokenMetrics(const cache::ApiTokenManager& tokens,
                     std::vector<server::MetricFamily>* families);

// The API failures every client reported to `health` (api_health.h): failed attempts by class
// (permanent, transient) and reason, and a gauge per permanent reason, 1 while it holds. Labels
// are fixed names, never a message.
void AddApiHealthMetrics(const kubeclient::ApiHealth& health,
                         std::vector<server::MetricFamily>* families);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_SOURCE_METRICS_H_
