#include "cmd/volumemanager/cluster_daemon.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/redacted_url.h"
#include "base/uv_timer.h"
#include "cmd/volumemanager/cluster_checks.h"
#include "cmd/volumemanager/source_metrics.h"
#include "kubeclient/rate_limiter.h"
#include "leaderelection/lease_lock.h"
#include "reload/signal_action.h"

namespace volumemanager {

ClusterDaemon::ClusterDaemon(uv_loop_t* loop, config::DaemonConfig config,
                             kubeclient::EnvironmentLookup environment)
    : Daemon(loop, std::move(config)), environment_(std::move(environment)) {}

ClusterDaemon::~ClusterDaemon() {
  // The base destructor would call only its own StopSources; the API parts go first, while the
  // volume manager their callbacks reach still exists.
  StopSources();
  DestroyElector();
  if (fatal_timer_ != nullptr) base::CloseTimer(fatal_timer_);
}

std::optional<Daemon::StartError> ClusterDaemon::StartObjectSource() {
  const config::DaemonConfig& cfg = config();
  base::Result<kubeclient::Credentials> credentials =
      kubeclient::LoadCredentials(cfg.kubeconfig, cfg.in_cluster, environment_);
  if (!credentials.ok()) return StartError{1, credentials.status().message()};
  kubeclient::HttpClientOptions http_options;
  // HTTP/2 on the client's own transport (libcurl only for an API server without HTTP/2): a
  // watch costs a small record instead of a libcurl transfer (BENCHMARKS.md).
  http_options.native_http2 = true;
  auto http = kubeclient::HttpClient::Create(loop(), *credentials, http_options);
  if (!http.ok()) {
    return StartError{1, "API client for " + base::RedactedUrl(credentials->server) + ": " +
                             http.status().message()};
  }
  http_ = std::move(http).value();
  default_namespace_ = credentials->default_namespace;
  RememberCredentialFiles(*credentials);
  kubeclient::ApiHealthOptions health_options;
  health_options.server = server_;
  health_ = std::make_unique<kubeclient::ApiHealth>(health_options);
  // Never reached, and now a permanent failure (the server came up untrusted, or refused the
  // credentials): as at start, the daemon stops.
  health_->SetOnPermanentBeforeReach([this](const kubeclient::ApiHealth::Problem& problem) {
    pending_fatal_ = StartError{
        kExitApiCredentials, PermanentFailure(problem.reason, problem.message) +
                                 "; the server was never reached with these credentials: stopping"};
    spdlog::error("{}", pending_fatal_->message);
    // Reported from the loop, not inside the API client's callback that found it: the stop it
    // begins cancels that client's calls.
    fatal_timer_ = base::NewTimer(loop(), this);
    uv_timer_start(
        fatal_timer_,
        [](uv_timer_t* timer) {
          auto* self = static_cast<ClusterDaemon*>(timer->data);
          base::CloseTimer(self->fatal_timer_);
          self->fatal_timer_ = nullptr;
          self->ReportFatal(*self->pending_fatal_);
        },
        0, 0);
  });
  health_->SetOnFirstAnswer([this] {
    if (identity_unconfirmed_ && identity_) LogIdentity(*identity_);
    identity_unconfirmed_ = false;
  });
  if (auto error = CheckIdentity(*credentials)) return error;
  api_ = std::make_unique<kubeclient::ApiClient>(
      http_.get(), kubeclient::RetryPolicy{},
      kubeclient::ClientGoRateLimits(cfg.kube_api_qps, cfg.kube_api_burst));
  api_->SetHealth(health_.get());
  excess_rights_ = std::make_unique<ExcessRightsWarning>(api_.get());
  excess_rights_->Start(identity_ && identity_->NodeName(),
                        cfg.read_secrets && cfg.object_namespaces.empty(),
                        identity_ ? identity_->username : "the daemon's credentials");

  cache::ApiObjectManagerOptions options;
  options.strategy = cfg.strategy;
  options.cache_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.object_cache_ttl);
  objects_ = std::make_unique<cache::ApiObjectManager>(api_.get(), options);
  objects_->SetChangeHandler([this](const kube::ObjectRef& ref) { OnObjectChanged(ref); });
  ApplyReadPolicy();

  cache::ApiTokenManagerOptions token_options;
  token_options.refusal = TokenRefusal(identity_);
  tokens_ = std::make_unique<cache::ApiTokenManager>(loop(), api_.get(), token_options);
  tokens_->SetChangeHandler([this](const kube::TokenRef& ref) { OnTokenChanged(ref); });
  if (cfg.volume_ownership == config::VolumeOwnership::kSelf) {
    if (token_options.refusal.empty()) {
      spdlog::info(
          "service account tokens of projected volumes: requested from the API server "
          "(TokenRequest) under the node's credentials, bound to each pod");
    } else {
      spdlog::warn(
          "service account tokens of projected volumes: not requested; every volume with a "
          "serviceAccountToken source (each pod's kube-api-access-*) fails: {}",
          token_options.refusal);
    }
  }

  kubeclient::EventRecorderOptions events;
  events.host = cfg.node_name;
  events_api_ = std::make_unique<kubeclient::ApiClient>(
      http_.get(), kubeclient::RetryPolicy{},
      kubeclient::ClientGoRateLimits(cfg.event_qps, cfg.event_burst));
  events_api_->SetHealth(health_.get());
  // Observe mode posts no Event: no recorder (every report below checks for one).
  if (!cfg.observe)
    events_ = std::make_unique<kubeclient::EventRecorder>(events_api_.get(), events);

  spdlog::info("cluster mode: API server {} ({}), node \"{}\", volume ownership {}",
               base::RedactedUrl(credentials->server), credentials->source, cfg.node_name,
               config::VolumeOwnershipName(cfg.volume_ownership));
  return std::nullopt;
}

std::optional<Daemon::StartError> ClusterDaemon::CheckIdentity(
    const kubeclient::Credentials& credentials) {
  const config::DaemonConfig& cfg = config();
  std::optional<kubeclient::ApiError> review_failure;
  base::Result<ApiIdentity> identity = [&] {
    BlockingApiClient client(credentials, kIdentityTimeout);
    return LookUpIdentity(client, credentials, &review_failure);
  }();
  const kubeclient::FailureKind failure =
      review_failure ? kubeclient::ClassifyApiError(*review_failure) : kubeclient::FailureKind{};
  if (failure.failure_class == kubeclient::FailureClass::kPermanent) {
    // The kubelet exits on bad bootstrap credentials too: retrying changes nothing until a
    // person fixes the CA, the server's name or the credentials.
    return StartError{kExitApiCredentials,
                      PermanentFailure(std::string(failure.reason), review_failure->ToString())};
  }
  // The server answered (a review, or a 403/404 for it): reached, with these credentials.
  if (failure.failure_class == kubeclient::FailureClass::kAnswered)
    health_->OnOutcome(std::nullopt);
  // Without an answer, what the certificate names is not yet confirmed by the server.
  const bool unconfirmed = failure.failure_class == kubeclient::FailureClass::kTransient;
  if (unconfirmed) {
    spdlog::warn(
        "API server {} ({}) not reached at start ({}); retrying with backoff, the identity is "
        "logged once the server answers",
        server_, credentials_source_, review_failure->ToString());
  }
  if (!identity.ok()) {
    // A server older than 1.28 cannot say who a token is: nothing for the user to do (info).
    // Any other failure (unreachable, an error answer) is worth a look (warning).
    spdlog::log(IsReviewNotServed(identity.status()) ? spdlog::level::info : spdlog::level::warn,
                "API identity unknown ({}): running as for a service account; a node "
                "identity's limits (no Lease lock, no --dynamic-config) are not checked",
                identity.status().message());
    return std::nullopt;
  }
  identity_ = *identity;
  identity_unconfirmed_ = unconfirmed;
  if (!unconfirmed) LogIdentity(*identity);
  const std::optional<std::string> node = identity->NodeName();
  if (!node) return std::nullopt;
  if (*node != cfg.node_name) {
    return StartError{2, "--node-name \"" + cfg.node_name + "\": the credentials are node \"" +
                             *node + "\"'s (" + identity->username +
                             "); a node's credentials read only that node's pods and objects, so "
                             "--node-name must be \"" +
                             *node + "\""};
  }
  if (cfg.leader_election.leader_elect &&
      cfg.leader_election.resource_lock == leaderelection::LockType::kLeases) {
    return StartError{2, "--leader-elect-resource-lock leases: refused under the node identity " +
                             identity->username +
                             ": a node may write no Lease but its own heartbeat "
                             "(kube-node-lease/" +
                             *node + "); use the file lock (the default)"};
  }
  if (!cfg.dynamic_config.empty()) {
    return StartError{2, "--dynamic-config " + cfg.dynamic_config +
                             ": refused under the node identity " + identity->username +
                             ": the Node authorizer lets a node read only the ConfigMaps its pods "
                             "reference, and no pod references this one; set the configuration "
                             "by flags or --config, or run with a service account"};
  }
  return std::nullopt;
}

void ClusterDaemon::ApplyReadPolicy() {
  const config::DaemonConfig& cfg = config();
  cache::ReadPolicy policy;
  policy.secrets = cfg.read_secrets;
  policy.namespaces =
      std::set<std::string>(cfg.object_namespaces.begin(), cfg.object_namespaces.end());
  if (policy.ReadsEverything()) return;
  policy_objects_ = std::make_unique<cache::PolicyObjectManager>(objects_.get(), policy);
  // Configured policy, not a fault: said once, at info, where the kubelet writes those volumes.
  // Where nothing else writes them (self ownership) their pods cannot start: a warning.
  if (cfg.volume_ownership == config::VolumeOwnership::kKubelet) {
    spdlog::info(
        "object reads: {}; volumes that read other objects are left to the kubelet (a Normal "
        "Event per pod)",
        policy.Describe());
  } else {
    spdlog::warn(
        "object reads: {}; with --volume-ownership self nothing else writes the volumes that "
        "read other objects: each fails (a FailedMount Event per pod)",
        policy.Describe());
  }
}

cache::ObjectManager* ClusterDaemon::object_manager() {
  if (policy_objects_) return policy_objects_.get();
  return objects_.get();
}

void ClusterDaemon::LogIdentity(const ApiIdentity& identity) const {
  const std::optional<std::string> node = identity.NodeName();
  if (!node) {
    spdlog::info("API identity {}: service-account mode (reads what its RBAC allows)",
                 identity.Describe());
    return;
  }
  spdlog::info(
      "API identity {}: node mode for node \"{}\" (reads only what pods bound to it reference; "
      "file lock only; no dynamic config)",
      identity.Describe(), *node);
}

void ClusterDaemon::RememberCredentialFiles(const kubeclient::Credentials& credentials) {
  server_ = base::RedactedUrl(credentials.server);
  credentials_source_ = credentials.source;
  const kubeclient::TlsConfig& tls = credentials.tls;
  trust_files_ = !tls.ca_file.empty()  ? "CA file " + tls.ca_file
                 : !tls.ca_pem.empty() ? std::string("certificate-authority-data")
                                       : std::string("the system's CA certificates");
  if (!tls.server_name.empty()) trust_files_ += ", tls-server-name " + tls.server_name;
  if (credentials.exec) {
    client_files_ = "exec plugin " + credentials.exec->command;
  } else if (!tls.client_cert_file.empty()) {
    client_files_ = "client certificate " + tls.client_cert_file;
    if (tls.client_key_file != tls.client_cert_file)
      client_files_ += ", key " + tls.client_key_file;
  } else if (!credentials.token_file.empty()) {
    client_files_ = "token file " + credentials.token_file;
  } else if (!credentials.token.empty()) {
    client_files_ = "the token in the kubeconfig";
  } else if (!tls.client_cert_pem.empty()) {
    client_files_ = "client-certificate-data";
  } else {
    client_files_ = "no client credentials";
  }
}

std::string ClusterDaemon::PermanentFailure(const std::string& reason,
                                            const std::string& message) const {
  const std::string files = reason == "untrusted_server" ? trust_files_ : client_files_;
  std::string what = reason == "untrusted_server" ? "the server is not trusted"
                     : reason == "unauthorized"   ? "the server refused the credentials"
                                                  : "the client certificate cannot be used";
  return "API server " + server_ + " (" + credentials_source_ + "): " + what + " (" + files +
         "): " + message;
}

std::string ClusterDaemon::TokenRefusal(const std::optional<ApiIdentity>& identity) {
  if (identity && identity->NodeName()) return "";
  const std::string who =
      identity ? "runs as \"" + identity->username + "\", not as a node"
               : "does not know its API identity (the server would not say), so not as a node";
  return "the daemon " + who +
         ", and requests tokens only with a node's credentials (chart: credentials: node): "
         "anything else would need the right to create serviceaccounts/token, which mints "
         "tokens for every service account of a namespace and which the chart never grants; "
         "run the daemon with the node's credentials, or leave these volumes to the kubelet "
         "(--volume-ownership kubelet)";
}

void ClusterDaemon::ApplyLiveConfig(const config::DaemonConfig& config) {
  Daemon::ApplyLiveConfig(config);
  if (objects_) {
    objects_->SetCacheTtl(
        std::chrono::duration_cast<std::chrono::milliseconds>(config.object_cache_ttl));
  }
  if (events_api_) {
    const kubeclient::RateLimiterOptions limits =
        kubeclient::ClientGoRateLimits(config.event_qps, config.event_burst);
    events_api_->rate_limiter().SetLimits(limits.qps, limits.burst);
  }
}

void ClusterDaemon::RecordWarning(const kubeclient::InvolvedObject& object,
                                  const std::string& reason, const std::string& message) {
  if (events_) events_->Record(object, kubeclient::EventType::kWarning, reason, message);
}

base::Result<std::unique_ptr<leaderelection::ResourceLock>> ClusterDaemon::MakeLeaseLock() {
  const leaderelection::LeaderElectionConfig& le = config().leader_election;
  election_api_ = std::make_unique<kubeclient::ApiClient>(http_.get(), kubeclient::RetryPolicy{},
                                                          kubeclient::ClientGoRateLimits(5, 10));
  election_api_->SetHealth(health_.get());
  const std::string ns = le.resource_namespace.empty() ? default_namespace_ : le.resource_namespace;
  const std::string name = le.resource_name.empty()
                               ? leaderelection::DefaultLeaseName(config().node_name)
                               : le.resource_name;
  return std::unique_ptr<leaderelection::ResourceLock>(
      std::make_unique<leaderelection::LeaseLock>(election_api_.get(), ns, name));
}

namespace {

kubeclient::InvolvedObject InvolvedPod(const kube::Pod& pod) {
  kubeclient::InvolvedObject object;
  object.kind = "Pod";
  object.api_version = "v1";
  object.namespace_ = pod.metadata.namespace_;
  object.name = pod.metadata.name;
  object.uid = pod.metadata.uid;
  object.resource_version = pod.metadata.resource_version;
  return object;
}

}  // namespace

void ClusterDaemon::ConfigureVolumeManager(VolumeManagerOptions& options) {
  options.tokens = tokens_.get();
  options.on_mount_failure = [this](const kube::Pod& pod, const std::string& volume,
                                    const std::string& error) {
    if (!events_) return;
    // The kubelet's FailedMount text; `error` names volume and object, never their data.
    events_->Record(InvolvedPod(pod), kubeclient::EventType::kWarning, "FailedMount",
                    "MountVolume.SetUp failed for volume \"" + volume + "\" : " + error);
  };
  if (policy_objects_) {
    options.read_policy = &policy_objects_->policy();
    options.on_policy_refusal = [this](const kube::Pod& pod, const std::string& volumes) {
      if (!events_) return;
      events_->Record(InvolvedPod(pod), kubeclient::EventType::kNormal, "VolumesLeftToKubelet",
                      volumes + "; the kubelet sets these volumes up and keeps them current");
    };
  }
  options.reload.cluster_mode = true;
  // Signals reach containers only where the chart granted the rights (reload.signals.enabled:
  // hostPID, CAP_KILL) and said so (--reload-signals).
  if (config().reload_signals) {
    options.reload.send_signals = [](const std::vector<reload::ContainerSignal>& requests) {
      std::vector<base::Result<std::string>> out;
      for (base::Result<reload::SignalOutcome>& r : reload::SignalContainers(requests)) {
        if (r.ok()) {
          out.emplace_back(r->target);
        } else {
          out.emplace_back(r.status());
        }
      }
      return out;
    };
  }
  // Reload actions: the actions, their results and the objects' versions; never data or bodies.
  options.reload.on_result = [this](const kube::Pod& pod, bool ok, const std::string& message) {
    if (!events_) return;
    events_->Record(InvolvedPod(pod),
                    ok ? kubeclient::EventType::kNormal : kubeclient::EventType::kWarning,
                    ok ? "Reloaded" : "ReloadFailed", message);
  };
  options.reload.on_annotation_error = [this](const kube::Pod& pod, const std::string& error) {
    if (events_) {
      events_->Record(InvolvedPod(pod), kubeclient::EventType::kWarning, "InvalidReloadAnnotation",
                      error + " (the pod's volumes are still kept current)");
    }
  };
  options.reload.on_policy_refusal = [this](const kube::Pod& pod, const std::string& reason) {
    if (events_) {
      events_->Record(InvolvedPod(pod), kubeclient::EventType::kNormal, "ReloadActionsNotRun",
                      reason +
                          "; the daemon never calls the node's own addresses (the pod's volumes "
                          "are still kept current)");
    }
  };
  // A subPath file of a pod annotated volumemanager.io/update-subpaths that was not brought to
  // its volume's new content (or an invalid annotation): the pod's owner sees why.
  options.on_subpath_failure = [this](const kube::Pod& pod, const std::string& volume,
                                      const std::string& error) {
    if (!events_) return;
    events_->Record(InvolvedPod(pod), kubeclient::EventType::kWarning, "FailedSubPathUpdate",
                    "volume \"" + volume + "\": " + error);
  };
}

std::optional<Daemon::StartError> ClusterDaemon::StartPodSources() {
  // Registered before the other sources, so "all sources seen" waits for its first list too.
  podconfig::PodConfig::Sink sink = pods().RegisterSource(podconfig::kApiSource);
  podconfig::ApiSourceOptions options;
  options.node_name = config().node_name;
  if (base::Status s = api_source_.Start(api_.get(), options, std::move(sink)); !s.ok()) {
    return StartError{2, "--node-name \"" + config().node_name + "\": " + s.message()};
  }
  node_presence_ = std::make_unique<NodePresence>(loop(), api_.get(), config().node_name);
  node_presence_->Start();
  return Daemon::StartPodSources();
}

void ClusterDaemon::StopSources() {
  api_source_.Stop();
  node_presence_.reset();
  excess_rights_.reset();
  if (objects_) objects_->Stop();
  if (tokens_) tokens_->Stop();
  // Events not yet posted are dropped: retrying them against an unreachable API server would
  // keep a stopped daemon's loop running.
  events_.reset();
  Daemon::StopSources();
}

std::vector<server::ReadinessCheck> ClusterDaemon::ReadinessChecks() const {
  std::vector<server::ReadinessCheck> checks = Daemon::ReadinessChecks();
  if (health_ != nullptr) {
    // A transient failure of a daemon that has its pods keeps it Ready (it serves its volumes
    // from its caches); before the first list it is the reason nothing is served.
    const bool failing = health_->permanent() || (health_->problem() && !api_source_.synced());
    checks.push_back({"api-server", !failing, health_->Describe()});
  }
  if (node_presence_) {
    checks.push_back(
        {"node-exists", !node_presence_->missing(), NodeMissing(node_presence_->node())});
  }
  return checks;
}

void ClusterDaemon::AddSourceMetrics(std::vector<server::MetricFamily>* families) const {
  AddClusterSourceMetrics({api_.get(), events_api_.get()}, api_source_, objects_.get(), families);
  if (tokens_) AddTokenMetrics(*tokens_, families);
  if (health_) AddApiHealthMetrics(*health_, families);
}

}  // namespace volumemanager
