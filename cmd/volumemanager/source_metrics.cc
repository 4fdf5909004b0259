#include "cmd/volumemanager/source_metrics.h"

#include <map>
#include <string>
#include <utility>

namespace volumemanager {
namespace {

server::MetricFamily Family(std::string name, std::string help, server::MetricType type) {
  server::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

}  // namespace

void AddClusterSourceMetrics(const std::vector<const kubeclient::ApiClient*>& clients,
                             const podconfig::ApiSource& pods,
                             const cache::ApiObjectManager* objects,
                             std::vector<server::MetricFamily>* families) {
  using server::MetricType;
  auto requests = Family("volumemanager_api_requests_total",
                         "Requests to the API server by HTTP method and outcome (status code, or "
                         "<error> when no response came), retries included; a watch counts when "
                         "it ends",
                         MetricType::kCounter);
  auto reconnects = Family("volumemanager_api_reconnects_total",
                           "Times the API server answered again after a reachability probe had "
                           "found it not answering (the waiting watches and retries then went "
                           "at once)",
                           MetricType::kCounter);
  auto probes = Family("volumemanager_api_reachability_probes_total",
                       "Reachability probes (GET /version, about one a second while requests "
                       "wait for a server that does not answer) by outcome: answered (any HTTP "
                       "response) or unanswered",
                       MetricType::kCounter);
  std::map<std::pair<std::string, std::string>, uint64_t> summed;
  uint64_t reconnect_count = 0;
  uint64_t probes_answered = 0;
  uint64_t probes_unanswered = 0;
  for (const kubeclient::ApiClient* client : clients) {
    if (client == nullptr) continue;
    for (const auto& [key, n] : client->request_counts()) summed[key] += n;
    const kubeclient::ServerReachability::Stats& r = client->reachability().stats();
    reconnect_count += r.reconnects;
    probes_answered += r.probes_answered;
    probes_unanswered += r.probes_unanswered;
  }
  reconnects.values.push_back({{}, static_cast<double>(reconnect_count)});
  probes.values.push_back({{{"outcome", "answered"}}, static_cast<double>(probes_answered)});
  probes.values.push_back({{{"outcome", "unanswered"}}, static_cast<double>(probes_unanswered)});
  for (const auto& [key, n] : summed) {
    requests.values.push_back(
        {{{"code", key.second}, {"method", key.first}}, static_cast<double>(n)});
  }

  auto lists = Family("volumemanager_reflector_lists_total",
                      "Successful lists of the pod reflector (the first one, then relists)",
                      MetricType::kCounter);
  auto relists = Family("volumemanager_reflector_relists_total",
                        "Lists of the pod reflector after its first one (after an expired "
                        "resourceVersion or a failed watch)",
                        MetricType::kCounter);
  auto watch_requests = Family("volumemanager_reflector_watches_total",
                               "Watch requests started by the pod reflector", MetricType::kCounter);
  auto expired = Family("volumemanager_reflector_expired_total",
                        "410 Expired answers (a resourceVersion older than the server's history: "
                        "on a list, at watch set-up or as a watch ERROR event) seen by the pod "
                        "reflector and by the per-object reflectors of the Watch strategy",
                        MetricType::kCounter);
  auto watches = Family("volumemanager_watches",
                        "Watches running: the pod reflector's, and one per referenced object "
                        "under the Watch strategy",
                        MetricType::kGauge);
  const kubeclient::Reflector* reflector = pods.reflector();
  const kubeclient::Reflector::Stats stats =
      reflector != nullptr ? reflector->stats() : kubeclient::Reflector::Stats{};
  lists.values.push_back({{{"resource", "pods"}}, static_cast<double>(stats.lists)});
  relists.values.push_back(
      {{{"resource", "pods"}}, static_cast<double>(stats.lists > 0 ? stats.lists - 1 : 0)});
  watch_requests.values.push_back({{{"resource", "pods"}}, static_cast<double>(stats.watches)});
  expired.values.push_back({{{"resource", "pods"}}, static_cast<double>(stats.expired)});
  watches.values.push_back({{{"resource", "pods"}}, reflector != nullptr ? 1.0 : 0.0});

  auto reads = Family("volumemanager_object_reads_total",
                      "ConfigMap and Secret reads from the API server outside watches: get (the "
                      "Get and Cache strategies), fresh_get (a quorum read after another "
                      "writer's swap, or an immutable object's re-check)",
                      MetricType::kCounter);
  auto read_errors =
      Family("volumemanager_object_read_errors_total",
             "ConfigMap and Secret reads (gets, and the watches' lists) that the API server "
             "answered with an error, by HTTP code and Status reason (403 Forbidden: the "
             "daemon's identity may not read the object); a 404 of a get is an answer, not an "
             "error",
             MetricType::kCounter);
  auto refusals = Family("volumemanager_object_refusals_retried_total",
                         "ConfigMap and Secret reads refused (403) and read again instead of "
                         "failing, by the grace that applied: pod_referenced (within 5 s of a pod "
                         "newly referencing the object) or reconnect (within 30 s of the API "
                         "server answering again after an outage)",
                         MetricType::kCounter);
  if (objects != nullptr) {
    const cache::ApiObjectManager::Stats& s = objects->stats();
    expired.values.push_back({{{"resource", "configmaps_and_secrets"}},
                              static_cast<double>(objects->ReflectorsExpired())});
    refusals.values.push_back(
        {{{"after", "pod_referenced"}}, static_cast<double>(s.refusals_retried)});
    refusals.values.push_back(
        {{{"after", "reconnect"}}, static_cast<double>(s.refusals_retried_after_reconnect)});
    for (const auto& [status, count] : s.read_errors) {
      read_errors.values.push_back(
          {{{"code", std::to_string(status.first)}, {"reason", status.second}},
           static_cast<double>(count)});
    }
    reads.values.push_back({{{"kind", "get"}}, static_cast<double>(s.gets)});
    reads.values.push_back({{{"kind", "fresh_get"}}, static_cast<double>(s.fresh_gets)});
    watches.values.push_back({{{"resource", "configmaps_and_secrets"}},
                              static_cast<double>(objects->RunningReflectors())});
  }
  for (auto* f : {&requests, &reconnects, &probes, &lists, &relists, &watch_requests, &expired,
                  &watches, &reads, &read_errors, &refusals}) {
    families->push_back(std::move(*f));
  }
}

void AddTokenMetrics(const cache::ApiTokenManager& tokens,
                     std::vector<server::MetricFamily>* families) {
  using server::MetricType;
  const cache::ApiTokenManager::Stats& s = tokens.stats();
  auto requests = Family("volumemanager_service_account_token_requests_total",
                         "Service account token requests (TokenRequest) by result: success, "
                         "error (the API server refused or failed it), refused (none sent: the "
                         "daemon's credentials are not a node's)",
                         MetricType::kCounter);
  requests.values.push_back({{{"result", "success"}}, static_cast<double>(s.requested_ok)});
  requests.values.push_back({{{"result", "error"}}, static_cast<double>(s.requested_failed)});
  requests.values.push_back({{{"result", "refused"}}, static_cast<double>(s.refused)});
  auto held =
      Family("volumemanager_service_account_tokens",
             "Service account tokens the volumes of this node's pods include", MetricType::kGauge);
  held.values.push_back({{}, static_cast<double>(tokens.token_count())});
  auto expired = Family("volumemanager_service_account_tokens_expired_total",
                        "Service account tokens that expired while their refresh kept failing "
                        "(the volumes using them then fail)",
                        MetricType::kCounter);
  expired.values.push_back({{}, static_cast<double>(s.expired)});
  for (auto* f : {&requests, &held, &expired}) families->push_back(std::move(*f));
}

void AddApiHealthMetrics(const kubeclient::ApiHealth& health,
                         std::vector<server::MetricFamily>* families) {
  using server::MetricType;
  auto failures = Family("volumemanager_api_failures_total",
                         "API request attempts that failed, by class (permanent: the server not "
                         "trusted, 401, an unusable client certificate; transient: no answer, "
                         "5xx, 429) and reason, every client and retry included",
                         MetricType::kCounter);
  for (const auto& [key, n] : health.failures()) {
    failures.values.push_back(
        {{{"class", key.first}, {"reason", key.second}}, static_cast<double>(n)});
  }
  auto permanent = Family("volumemanager_api_permanent_error",
                          "1 while API requests fail permanently for this reason (a person must "
                          "act: CA, server name, token or client certificate), else 0; an "
                          "answer from the server clears it",
                          MetricType::kGauge);
  for (const char* reason : {"untrusted_server", "unauthorized", "client_certificate"}) {
    const bool holds = health.permanent() && health.problem()->reason == reason;
    permanent.values.push_back({{{"reason", reason}}, holds ? 1.0 : 0.0});
  }
  families->push_back(std::move(failures));
  families->push_back(std::move(permanent));
}

}  // namespace volumemanager
