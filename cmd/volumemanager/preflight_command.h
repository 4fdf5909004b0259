// `volumemanager preflight`: the checks a user runs when the DaemonSet will not start
// (preflight.h): API server reachable with TLS verified, credentials accepted, the identity and its
// mode, pods of this node listable and watchable, ConfigMaps and Secrets readable and Events
// writable in the namespaces of its pods, Leases writable with the Lease lock; a 403 names the
// missing right.
// --node-name defaults as the daemon's. One line per check on stdout; the exit code is 0 when all
// pass, 1 otherwise, 2 for bad flags.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_COMMAND_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_COMMAND_H_

#include <string>
#include <vector>

namespace volumemanager {

// `args` are the words after "preflight".
int RunPreflightCommand(const std::vector<std::string>& args);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_PREFLIGHT_COMMAND_H_
