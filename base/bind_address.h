// BindAddress: a listening address given as "IP:PORT" (IPv4) or "[IP]:PORT" (IPv6), as the
// kubelet's and kube-proxy's *-bind-address flags take it, resolved to a socket address without
// any name lookup. Port 0 asks the kernel for a free port. Plain value.
#ifndef VOLUMEMANAGER_BASE_BIND_ADDRESS_H_
#define VOLUMEMANAGER_BASE_BIND_ADDRESS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>
#include <string>
#include <string_view>

#include "base/status.h"

namespace base {

struct BindAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool ipv6 = false;
  std::string host;  // the IP as written, without brackets
  int port = 0;
};

// The errors name the text and what is wrong with it; the caller adds the flag.
inline Result<BindAddress> ParseBindAddress(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return Status::Error(quoted + " is not IP:PORT (e.g. 127.0.0.1:10359 or [::1]:10359)");
  }
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  BindAddress out;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    out.ipv6 = true;
  }
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return Status::Error(quoted + ": port \"" + std::string(port_text) + "\" is not 0-65535");
  }
  out.host = std::string(host);
  out.port = port;
  if (out.ipv6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&out.addr);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET6, out.host.c_str(), &sa->sin6_addr) != 1) {
      return Status::Error(quoted + ": \"" + out.host + "\" is not an IPv6 address");
    }
    out.len = sizeof(sockaddr_in6);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&out.addr);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, out.host.c_str(), &sa->sin_addr) != 1) {
      return Status::Error(quoted + ": \"" + out.host +
                           "\" is not an IPv4 address (IPv6 goes in brackets: [::1]:PORT)");
    }
    out.len = sizeof(sockaddr_in);
  }
  return out;
}

// "IP:PORT" or "[IP]:PORT".
inline std::string FormatBindAddress(const std::string& host, bool ipv6, int port) {
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_BIND_ADDRESS_H_
