#include "kubeclient/transport/server_url.h"

namespace kubeclient {

bool SplitServerUrl(const std::string& url, ServerUrl* out) {
  const bool tls = url.starts_with("https://");
  if (!tls && !url.starts_with("http://")) return false;
  out->https = tls;
  std::string hostport = url.substr(tls ? 8 : 7);
  size_t slash = hostport.find('/');
  if (slash != std::string::npos) {
    out->rest = hostport.substr(slash);
    hostport = hostport.substr(0, slash);
  }
  if (size_t at = hostport.rfind('@'); at != std::string::npos) {
    out->userinfo = true;
    hostport.erase(0, at + 1);
  }
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close = hostport.find(']');
    if (close == std::string::npos) return false;
    out->host = hostport.substr(1, close - 1);
    out->ipv6 = true;
    if (close + 1 < hostport.size() && hostport[close + 1] == ':') {
      out->port = hostport.substr(close + 2);
    }
  } else {
    size_t colon = hostport.rfind(':');
    out->host = hostport.substr(0, colon);
    if (colon != std::string::npos) out->port = hostport.substr(colon + 1);
  }
  if (out->port.empty()) out->port = tls ? "443" : "80";
  return !out->host.empty();
}

}  // namespace kubeclient
