// Preflight: the checks `volumemanager preflight` runs when a DaemonSet will not start, each
// answered in one line, for the set-up chosen:
//  * the server reachable with TLS verified, the credentials accepted;
//  * the identity the daemon runs as (SelfSubjectReview, else the client certificate's subject)
//    and its mode: a node identity (`system:node:<name>`, the kubelet's credentials) must name
//    --node-name; anything else runs in service-account mode;
//  * the node of --node-name exists (a GET of the Node; cluster_checks.h): a missing node fails
//    (a typo would have the daemon serve nothing), an identity without the right to get nodes
//    makes it "not checked" (exit status 3: nothing failed, but a wrong name would go unnoticed);
//  * the node's pods listable and watchable (fieldSelector spec.nodeName);
//  * in each namespace of the node's pods: ConfigMaps and Secrets readable (get, and list and
//    watch pinned by metadata.name) as the daemon reads them, tried on one object of each kind
//    that the pods' volumes reference there (a kind they do not use is not checked); Events
//    creatable and patchable (dry run: nothing is stored). With no pods on the node, the
//    namespace of --namespace stands in, in service-account mode, with a name that does not
//    exist (a 404 proves the right); a node may read nothing until a pod references it.
//  * only with the Lease lock: Leases readable and writable (get, create, update, as the lock
//    uses them) in the lock's namespace, in dry runs on `volumemanager-preflight-<node>`: nothing
//    is stored. A node identity fails this check: a node may write no Lease but its own
//    heartbeat.
//  * last, rights no mode of the daemon needs (cluster_checks.h's SelfSubjectAccessReviews): a
//    warning naming them, not a failure (the daemon works, with more than it should hold).
// A 403 names the missing RBAC rule (service-account mode) or quotes the Node authorizer's
// reason (node mode). Runs its own libuv loop; blocking; no secret is ever printed.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "cache/read_policy.h"
#include "kubeclient/auth/credentials.h"

namespace volumemanager {

struct PreflightOptions {
  std::string node_name;
  // The Lease lock's namespace, and the one read with no pods on the node; empty: the
  // credentials' default namespace.
  std::string namespace_name;
  // --leader-elect-resource-lock leases: check the Lease rights too.
  bool lease_lock = false;
  // --no-secrets, --object-namespaces: what the daemon, as configured, never reads needs no
  // right (one line says so, naming the flag), and a right to list Secrets in every namespace is
  // then beyond need.
  cache::ReadPolicy read_policy;
  std::chrono::milliseconds request_timeout{10000};
};

struct PreflightCheck {
  PreflightCheck() = default;
  PreflightCheck(std::string name_, bool ok_, std::string detail_)
      : name(std::move(name_)), ok(ok_), detail(std::move(detail_)) {}

  std::string name;
  bool ok = false;
  std::string detail;
  // Not a failure, not a pass: the check could not be made (ok is false).
  bool not_checked = false;
  // Passed, with something to look at (ok is true).
  bool warning = false;
};

struct PreflightReport {
  std::string credentials;  // Credentials::source: the kubeconfig file and context, or in-cluster
  std::string identity;     // ApiIdentity::Describe(), or why it is not known
  std::vector<PreflightCheck> checks;
};

PreflightReport RunPreflight(const kubeclient::Credentials& credentials,
                             const PreflightOptions& options);

// "ok    <name>: <detail>", "WARN  ...", "SKIP  ..." (not checked) or "FAIL  ...".
std::string FormatPreflightCheck(const PreflightCheck& check);
// The first line: "credentials <source>, identity <identity>".
std::string FormatPreflightHeader(const PreflightReport& report);
// 1 when a check failed, else 3 when one could not be made, else 0.
int PreflightExitCode(const std::vector<PreflightCheck>& checks);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_H_
