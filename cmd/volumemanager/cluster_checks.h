// What the daemon and `volumemanager preflight` both check of the cluster beyond the identity
// (api_identity.h), with one wording:
//  * that the node named by --node-name exists (a GET of the Node: a node's credentials may read
//    their own Node, the chart's ClusterRole grants `get` on nodes). A wrong name (a typo, the
//    host name where the kubelet registered another) would have the daemon serve no pod at all,
//    and look healthy while doing so. `NodePresence` is the daemon's side: a GET at start, again
//    every kNodeRecheck while the node is missing, with a warning at start and then at most every
//    kNodeWarnEvery, and a readiness check that fails while it is missing; once the node is seen
//    it stops asking.
//  * rights no mode of the daemon needs (SelfSubjectAccessReviews, `ExcessRightProbes`): `*` on
//    `*`; list of Secrets in all namespaces unless the daemon, as configured, lists them (a
//    service account without --no-secrets or --object-namespaces: the chart's rbac.secrets and no
//    rbac.namespaces); create of pods under any identity but a node's (a node creates its mirror
//    pods). Credentials that can do more than the daemon
//    needs (an admin's kubeconfig) are worth a warning: the daemon runs on every node.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_CLUSTER_CHECKS_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_CLUSTER_CHECKS_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kubeclient/api_client.h"

namespace volumemanager {

// What a GET of /api/v1/nodes/<name> said.
enum class NodeLookup { kExists, kMissing, kNoRight, kError };
NodeLookup ClassifyNodeLookup(const kubeclient::ApiResult& result);
std::string NodePath(const std::string& node);
// "node \"<name>\" does not exist": the readiness reason and the start of every message about it.
std::string NodeMissing(const std::string& node);
// What a node that does not exist means, and what to do about it.
std::string NodeMissingAdvice();

// One right no mode needs, as a SelfSubjectAccessReview asks for it.
struct ExcessRightProbe {
  std::string description;  // e.g. "list secrets in all namespaces"
  nlohmann::json review;    // the SelfSubjectAccessReview to create
};
inline constexpr char kAccessReviewPath[] =
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
// `lists_every_secret`: the daemon, as configured, lists Secrets in every namespace (a service
// account's identity, neither --no-secrets nor --object-namespaces).
std::vector<ExcessRightProbe> ExcessRightProbes(bool node_mode, bool lists_every_secret);
// The review's status.allowed; nullopt when the answer has none.
std::optional<bool> ReviewAllowed(const nlohmann::json& answer);
// "<identity> may <a>, <b>: rights no mode of the daemon needs (...)".
std::string ExcessRightsMessage(const std::string& identity,
                                const std::vector<std::string>& allowed);

// The daemon's side (loop thread only).
class NodePresence {
 public:
  static constexpr std::chrono::seconds kNodeRecheck{5};
  static constexpr std::chrono::seconds kNodeWarnEvery{60};

  NodePresence(uv_loop_t* loop, kubeclient::ApiClient* api, std::string node);
  ~NodePresence();
  NodePresence(const NodePresence&) = delete;
  NodePresence& operator=(const NodePresence&) = delete;

  void Start();
  void Stop();
  // The node was not found by the last answer (no answer yet, no right, an error: false).
  bool missing() const { return missing_; }
  const std::string& node() const { return node_; }

 private:
  void Check();
  void OnAnswer(const kubeclient::ApiResult& result);

  uv_loop_t* loop_;
  kubeclient::ApiClient* api_;
  std::string node_;
  uv_timer_t* timer_ = nullptr;  // closed asynchronously, freed in its close callback
  std::optional<kubeclient::ApiClient::CallId> call_;
  bool missing_ = false;
  std::chrono::steady_clock::time_point last_warning_{};
};

// The daemon's side of the rights no mode needs (loop thread only): Start asks each of
// ExcessRightProbes(node_mode, lists_every_secret) on `api` without blocking, and once all answered
// logs one warning naming the rights held (nothing when none; an unanswered review counts as not
// held). `identity` names the caller. Destroying it cancels the reviews still out, so that a
// stopping daemon's loop does not wait for them.
class ExcessRightsWarning {
 public:
  explicit ExcessRightsWarning(kubeclient::ApiClient* api) : api_(api) {}
  ~ExcessRightsWarning();
  ExcessRightsWarning(const ExcessRightsWarning&) = delete;
  ExcessRightsWarning& operator=(const ExcessRightsWarning&) = delete;

  void Start(bool node_mode, bool lists_every_secret, const std::string& identity);

 private:
  void OnAnswer(size_t index, const kubeclient::ApiResult& result);

  kubeclient::ApiClient* api_;
  std::string identity_;
  std::vector<ExcessRightProbe> probes_;
  std::vector<bool> allowed_;
  std::vector<kubeclient::ApiClient::CallId> calls_;
  size_t waiting_ = 0;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_CLUSTER_CHECKS_H_
