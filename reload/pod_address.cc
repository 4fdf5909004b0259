#include "reload/pod_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace reload {
namespace {

// Why an address is no unicast address a pod can have ("" when it can be one). `canonical` is
// CanonicalIp's text: an IPv4 address in an IPv6 form is IPv4 text by then.
std::string NotAPodAddress(const std::string& canonical) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET6, canonical.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_UNSPECIFIED(&v6)) return "the unspecified address";
    if (IN6_IS_ADDR_MULTICAST(&v6)) return "a multicast address";
    if (IN6_IS_ADDR_LINKLOCAL(&v6)) return "a link-local address";
    return "";
  }
  if (inet_pton(AF_INET, canonical.c_str(), &v4) != 1) return "not an IP address";
  const uint32_t a = ntohl(v4.s_addr);
  if (a == 0) return "the unspecified address";
  if (a == 0xffffffffu) return "the broadcast address";
  if ((a >> 28) == 0xe) return "a multicast address";
  if ((a >> 16) == 0xa9fe) return "a link-local address (such as the cloud metadata address)";
  if ((a >> 24) == 0) return "in 0.0.0.0/8 (\"this network\")";
  return "";
}

// Whether a canonical address is a loopback address (127.0.0.0/8, ::1).
bool IsLoopback(const std::string& canonical) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, canonical.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, canonical.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace

base::Result<std::string> CanonicalIp(const std::string& text) {
  char buf[INET6_ADDRSTRLEN] = {};
  in6_addr v6{};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    inet_ntop(AF_INET, &v4, buf, sizeof(buf));
    return std::string(buf);
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    // An IPv4 address written as IPv6 (v4-mapped ::ffff:a.b.c.d, v4-compatible ::a.b.c.d, in any
    // spelling) is that IPv4 address: one text per address, whatever form a pod's status used.
    if (IN6_IS_ADDR_V4MAPPED(&v6) || IN6_IS_ADDR_V4COMPAT(&v6)) {
      std::memcpy(&v4, &v6.s6_addr[12], 4);
      inet_ntop(AF_INET, &v4, buf, sizeof(buf));
      return std::string(buf);
    }
    inet_ntop(AF_INET6, &v6, buf, sizeof(buf));
    return std::string(buf);
  }
  return base::Status::Error("\"" + text + "\" is not a numeric IP address");
}

base::Result<std::string> PodActionAddress(const kube::Pod& pod, bool cluster_mode,
                                           const std::vector<std::string>& node_addresses) {
  std::string ip;
  if (cluster_mode) {
    if (pod.spec.host_network) return base::Status::Error(kHostNetworkRefusal);
    if (pod.status.pod_ip.empty()) return base::Status::Error("the pod has no status.podIP yet");
    auto canonical = CanonicalIp(pod.status.pod_ip);
    if (!canonical.ok()) return canonical.status().WithContext("status.podIP");
    ip = *canonical;
    if (IsLoopback(ip)) {
      return base::Status::Error("status.podIP " + ip +
                                 " is a loopback address (the node's own services)");
    }
    if (!pod.status.host_ip.empty()) {
      auto host = CanonicalIp(pod.status.host_ip);
      if (host.ok() && *host == ip) {
        return base::Status::Error("status.podIP " + ip + " is the node's own IP (status.hostIP)");
      }
    }
    for (const std::string& address : node_addresses) {
      auto node = CanonicalIp(address);
      if (node.ok() && *node == ip) {
        return base::Status::Error("status.podIP " + ip +
                                   " is an address of the node's own network");
      }
    }
  } else if (!pod.status.pod_ip.empty()) {
    auto canonical = CanonicalIp(pod.status.pod_ip);
    if (!canonical.ok()) return canonical.status().WithContext("status.podIP");
    ip = *canonical;
  } else {
    ip = "127.0.0.1";
  }
  if (const std::string why = NotAPodAddress(ip); !why.empty()) {
    return base::Status::Error("status.podIP " + ip + " is " + why);
  }
  return ip;
}

std::vector<std::string> NodeAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, buf,
                sizeof(buf));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf,
                sizeof(buf));
    } else {
      continue;
    }
    out.emplace_back(buf);
  }
  freeifaddrs(list);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace reload
