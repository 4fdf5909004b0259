// Preflight: the checks `volumemanager preflight` runs when a DaemonSet will not start, each
// answered in one line: server reachable with TLS verified, credentials accepted, pods on this
// node listable and watchable, ConfigMaps and Secrets readable in the namespace, Leases writable
// there. A 403 names the RBAC rule that is missing (docs/kubernetes-api.md §5.3).
//
// The Lease check creates (or re-uses) the Lease `volumemanager-preflight-<node>`, updates it and
// deletes it again (a missing delete permission leaves it behind and says so: the daemon itself
// never deletes leases). Nothing else is written. Runs its own libuv loop; blocking; no secret is
// ever printed.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_H_

#include <chrono>
#include <string>
#include <vector>

#include "kubeclient/credentials.h"

namespace kube {

struct PreflightOptions {
  std::string node_name;
  std::string namespace_name;  // empty: the credentials' default namespace
  std::chrono::milliseconds request_timeout{10000};
};

struct PreflightCheck {
  std::string name;
  bool ok = false;
  std::string detail;
};

std::vector<PreflightCheck> RunPreflight(const Credentials& credentials,
                                         const PreflightOptions& options);

// "ok    <name>: <detail>" or "FAIL  <name>: <detail>".
std::string FormatPreflightCheck(const PreflightCheck& check);

}  // namespace kube

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_H_
