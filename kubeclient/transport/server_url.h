// The server URL in parts, as both transports need it: http(s)://[userinfo@]host[:port][/prefix].
#ifndef VOLUMEMANAGER_KUBECLIENT_TRANSPORT_SERVER_URL_H_
#define VOLUMEMANAGER_KUBECLIENT_TRANSPORT_SERVER_URL_H_

#include <string>

namespace kubeclient {

struct ServerUrl {
  std::string host;  // without brackets
  std::string port;  // the scheme's when the URL names none
  std::string rest;  // the path prefix ("" or "/...")
  bool https = false;
  bool ipv6 = false;
  bool userinfo = false;  // user[:password]@ before the host (not kept: it may be a secret)
};

// False when `url` is not that shape (another scheme, no host, an unclosed '[').
bool SplitServerUrl(const std::string& url, ServerUrl* out);

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_SERVER_URL_H_
