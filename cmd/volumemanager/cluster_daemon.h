// ClusterDaemon: the daemon in cluster mode (--kubeconfig or --in-cluster), beside a kubelet.
// The Daemon's lifecycle and volume manager, with:
//  * credentials loaded once at start (a kubeconfig named by the flag, never $KUBECONFIG; or the
//    pod's service account): a failure is exit 1 with a message naming the flag;
//  * one HttpClient (HTTP/2 when the server offers it) and one ApiClient with the kubelet's
//    client-side rate limit (--kube-api-qps, --kube-api-burst);
//  * the pods bound to --node-name from the API server (podconfig::ApiSource), merged as source
//    "api" with --pod-manifest-path / --manifest-url when those are given;
//  * ConfigMaps and Secrets from the API server (cache::ApiObjectManager, with the configured
//    change-detection strategy);
//  * service account tokens for projected serviceAccountToken sources from the TokenRequest API
//    (cache::ApiTokenManager), requested only under a node identity: under any other (a service
//    account, another user, an identity the server would not tell) none is requested and each
//    volume that needs one fails with a FailedMount saying why (see TokenRefusal);
//  * FailedMount Events on the pod for every failed mount or refresh (kubeclient::EventRecorder,
//  with
//    client-go's aggregation and rate limits), on the same connection but a rate limit of their
//    own;
//  * the --node-name node looked up (NodePresence, cluster_checks.h): while it does not
//    exist a warning (at start, then at most once a minute) and readiness check "node-exists"
//    failing with "node \"X\" does not exist", until it appears;
//  * the rights no mode needs (`*` on `*`, ...; ExcessRightsWarning) asked once at start
//    without blocking the loop, one warning when the credentials hold any.
//  * the read policy (--no-secrets, --object-namespaces: the rights the chart grants), in front
//    of the object manager (cache::PolicyObjectManager): objects outside it are never requested.
//    Beside the kubelet their volumes are left to it and each pod gets one Normal Event
//    (VolumesLeftToKubelet); in self ownership they fail (FailedMount). A hostNetwork pod's HTTP
//    reload actions, which the daemon never makes, are policy too: one Normal Event
//    (ReloadActionsNotRun). A Warning Event always means the pod's owner has something to do.
// An API server that cannot be reached at start is retried by the reflectors (client-go's backoff
// with jitter); what is on disk stays as it is meanwhile.
//
// Node mode: at start, before the loop runs, the daemon asks who it is (api_identity.h:
// SelfSubjectReview, else the client certificate's subject; one request, bounded by
// kIdentityTimeout). A node identity (`system:node:<name>`, the kubelet's credentials) can read
// only what pods bound to that node reference, so: <name> must be --node-name (else exit 2),
// the Lease lock is refused (a node may write no Lease but its heartbeat,
// kube-node-lease/<name>; exit 2) and so is --dynamic-config (its ConfigMap is referenced by no
// pod, so the node cannot read it; exit 2). The identity and mode are logged once at info. An
// identity that cannot be learned (unreachable server, no certificate) is logged as a warning and
// the daemon runs as it would under any other user.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_CLUSTER_DAEMON_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_CLUSTER_DAEMON_H_

#include <memory>
#include <optional>

#include "cache/api_object_manager.h"
#include "cache/api_token_manager.h"
#include "cache/read_policy.h"
#include "cmd/volumemanager/api_identity.h"
#include "cmd/volumemanager/cluster_checks.h"
#include "cmd/volumemanager/daemon.h"
#include "kubeclient/api_client.h"
#include "kubeclient/api_health.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/events/event_recorder.h"
#include "kubeclient/transport/http_client.h"
#include "podconfig/api_source.h"

namespace volumemanager {

class ClusterDaemon : public Daemon {
 public:
  // `environment` stands in for the process environment (in-cluster variables), for tests.
  ClusterDaemon(uv_loop_t* loop, config::DaemonConfig config,
                kubeclient::EnvironmentLookup environment = kubeclient::ProcessEnvironment());
  ~ClusterDaemon() override;

  const cache::ApiObjectManager* objects() const { return objects_.get(); }
  const cache::ApiTokenManager* tokens() const { return tokens_.get(); }
  const kubeclient::EventRecorder* events() const { return events_.get(); }
  const podconfig::ApiSource& pod_source() const { return api_source_; }
  // Who the daemon is to the API server, once Start() learned it.
  const std::optional<ApiIdentity>& identity() const { return identity_; }

  static constexpr std::chrono::milliseconds kIdentityTimeout{10000};
  // A permanent API failure (the server not trusted, 401, an unusable client certificate) before
  // the server was ever reached: as an unreadable --kubeconfig.
  static constexpr int kExitApiCredentials = 1;

  // Why no service account token is requested under `identity` ("" for a node's: the Node
  // authorizer grants a node tokens for the service accounts of its pods, bound to them). Any
  // other identity would need `create` on serviceaccounts/token, which mints a token for every
  // service account of a namespace; the chart never grants it, and the daemon does not use it.
  static std::string TokenRefusal(const std::optional<ApiIdentity>& identity);

  // The Cache TTL and the event rate limits besides the base's.
  void ApplyLiveConfig(const config::DaemonConfig& config) override;
  // For the dynamic config (dynamicconfig/): the API client (null before Start) and Warning
  // Events about any object.
  kubeclient::ApiClient* api() { return api_.get(); }
  void RecordWarning(const kubeclient::InvolvedObject& object, const std::string& reason,
                     const std::string& message);

  // API requests, the pod reflector, the object managers (source_metrics.h).
  void AddSourceMetrics(std::vector<server::MetricFamily>* families) const override;
  // The base's, `api-server`: failing on a permanent API failure (api_health.h), and on a
  // transient one while the pod source has not delivered its first list; and "node-exists": the
  // --node-name node is not missing (cluster_checks.h).
  std::vector<server::ReadinessCheck> ReadinessChecks() const override;
  // Every API client's failures, shared (null before Start).
  const kubeclient::ApiHealth* health() const { return health_.get(); }

 protected:
  std::optional<StartError> StartObjectSource() override;
  cache::ObjectManager* object_manager() override;
  std::optional<StartError> StartPodSources() override;
  void StopSources() override;
  void ConfigureVolumeManager(VolumeManagerOptions& options) override;
  base::Result<std::unique_ptr<leaderelection::ResourceLock>> MakeLeaseLock() override;

 private:
  // Learns the identity and refuses what a node identity cannot do (see the file comment). A
  // permanent failure of the look-up (the server not trusted, 401) is a StartError naming the
  // server and the file; without an answer the identity is logged once the server answers.
  std::optional<StartError> CheckIdentity(const kubeclient::Credentials& credentials);
  // Puts the read policy in front of objects_ when it refuses anything, and says so once.
  void ApplyReadPolicy();
  // Fills server_, credentials_source_, trust_files_ and client_files_.
  void RememberCredentialFiles(const kubeclient::Credentials& credentials);
  // The "API identity ..." line, once the server confirmed it.
  void LogIdentity(const ApiIdentity& identity) const;
  // "<server> (<credentials source>): <failure>; <the files concerned>".
  std::string PermanentFailure(const std::string& reason, const std::string& message) const;

  kubeclient::EnvironmentLookup environment_;
  std::optional<ApiIdentity> identity_;
  std::unique_ptr<kubeclient::HttpClient> http_;
  // Before the clients that report to it.
  std::unique_ptr<kubeclient::ApiHealth> health_;
  // For PermanentFailure's messages: the server (redacted), the credentials' source, and what
  // names the CA and the client's credential (files, never their contents).
  std::string server_;
  std::string credentials_source_;
  std::string trust_files_;
  std::string client_files_;
  // The identity learned at start without an answer from the server: logged at its first one.
  bool identity_unconfirmed_ = false;
  // A permanent failure before the server was ever reached, reported on the next loop turn.
  std::optional<StartError> pending_fatal_;
  uv_timer_t* fatal_timer_ = nullptr;
  std::unique_ptr<kubeclient::ApiClient> api_;
  // Events draw on a budget of their own (--event-qps, --event-burst: the kubelet's 50 and 100),
  // so a burst of failures never delays pod or object requests.
  std::unique_ptr<kubeclient::ApiClient> events_api_;
  // The Lease lock's renewals on a client of their own (as the controller-manager's), so they
  // never queue behind pod and object requests.
  std::unique_ptr<kubeclient::ApiClient> election_api_;
  std::string default_namespace_;
  std::unique_ptr<cache::ApiObjectManager> objects_;
  // objects_ behind the read policy (null when it reads everything); declared after objects_.
  std::unique_ptr<cache::PolicyObjectManager> policy_objects_;
  // Service account tokens for projected volumes the daemon sets up (self ownership); requested
  // only under a node identity (TokenRefusal).
  std::unique_ptr<cache::ApiTokenManager> tokens_;
  std::unique_ptr<kubeclient::EventRecorder> events_;
  podconfig::ApiSource api_source_;
  // Whether the --node-name node exists (cluster_checks.h); after api_, which it uses.
  std::unique_ptr<NodePresence> node_presence_;
  // The rights no mode needs, asked once at start (cluster_checks.h).
  std::unique_ptr<ExcessRightsWarning> excess_rights_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_CLUSTER_DAEMON_H_
