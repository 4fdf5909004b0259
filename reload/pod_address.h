// Where an HTTP reload action may go: the pod's own IP and nothing else.
//
// In cluster mode that is status.podIP, and it is refused when the pod has none yet, when the pod
// runs in the node's network (hostNetwork), when it is a loopback address (127.0.0.0/8, ::1: the
// node's loopback-only services, the daemon's own admin ports), when it equals status.hostIP, when
// it is an address of the daemon's own network (the node's, when the daemon runs in it: the
// kubelet, the daemon's admin ports), and when it is no unicast address a pod can have
// (unspecified, multicast, broadcast, link-local: the cloud metadata address 169.254.169.254
// among them). Every comparison is of canonical text (CanonicalIp): an IPv4 address in an IPv6
// form counts as that IPv4 address. In standalone
// mode the pod manifests are the node administrator's and are trusted: status.podIP when set,
// else 127.0.0.1 (still never unspecified, multicast, broadcast or link-local).
//
// Pure functions but NodeAddresses(), which asks the kernel (getifaddrs).
#ifndef VOLUMEMANAGER_RELOAD_POD_ADDRESS_H_
#define VOLUMEMANAGER_RELOAD_POD_ADDRESS_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "kube/pod.h"

namespace reload {

// The canonical text of a numeric IPv4 or IPv6 address ("10.0.0.7", "fd00::7"), or an error for
// anything else (a name, a port, a scope id). An IPv4 address in IPv6 form (v4-mapped
// "::ffff:10.0.0.7" or "0:0:0:0:0:ffff:a00:7", v4-compatible "::10.0.0.7") is given as IPv4.
base::Result<std::string> CanonicalIp(const std::string& text);

// Why a hostNetwork pod has no address of its own in cluster mode (PodActionAddress's refusal;
// the reload controller refuses such a pod's HTTP actions once, when it reads its annotations).
inline constexpr char kHostNetworkRefusal[] =
    "the pod uses the node's network (hostNetwork): its own IP is the node's";

// The address an HTTP action of `pod` goes to, or why there is none. `node_addresses`: canonical
// addresses of the daemon's network namespace (NodeAddresses()); used in cluster mode.
base::Result<std::string> PodActionAddress(const kube::Pod& pod, bool cluster_mode,
                                           const std::vector<std::string>& node_addresses);

// The canonical addresses of every interface of the daemon's network namespace.
std::vector<std::string> NodeAddresses();

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_POD_ADDRESS_H_
