// `volumemanager preflight`: the checks a user runs when the DaemonSet will not start
// (preflight.h), with the daemon's own flags and --config file (config::ParseDaemonFlags) and
// credentials (kubeclient::LoadCredentials: --kubeconfig or --in-cluster, never $KUBECONFIG): API
// server reachable with TLS verified, credentials accepted, the identity and its mode, the node
// exists, pods of this node listable and watchable, ConfigMaps and Secrets readable and Events
// writable in the namespaces of its pods, Leases writable with the Lease lock, rights beyond need;
// a 403 names the missing right. The first line names the credentials and the identity checked,
// then one line per check on stdout; the exit code is 0 when all pass, 1 when one fails, 2 for bad
// flags, 3 when none failed but one could not be made.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_COMMAND_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_COMMAND_H_

#include <map>
#include <string>
#include <vector>

namespace volumemanager {

// `args` are the words after "preflight"; `environment` and `hostname` as for the daemon's flags
// (config::ParseDaemonFlags).
int RunPreflightCommand(const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& environment,
                        const std::string& hostname);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_COMMAND_H_
