// TokenRef: names one service account token a pod's projected volume needs, as the TokenRequest
// API asks for it (docs/kubernetes-api.md §2.7): the pod's namespace and service account, the
// source's audience and expiry, bound to the pod by name and UID. Two sources of one pod that ask
// for the same audience and expiry share one token (the kubelet's token manager keys its cache
// the same way). The vocabulary shared by the token manager (cache/), the projected plugin
// (plugins/) and the volume manager. A plain, ordered value; it names no token.
#ifndef VOLUMEMANAGER_KUBE_TOKEN_REF_H_
#define VOLUMEMANAGER_KUBE_TOKEN_REF_H_

#include <compare>
#include <cstdint>
#include <string>

#include "kube/defaults.h"
#include "kube/pod.h"

namespace kube {

struct TokenRef {
  std::string namespace_;
  std::string service_account;  // the pod's spec.serviceAccountName ("" when it has none)
  std::string audience;         // "": the API server's own audiences
  int64_t expiration_seconds = kDefaultTokenExpirationSeconds;
  std::string pod_name;
  std::string pod_uid;

  // `service account "shop/web"`: the account errors and Events name (never a token).
  std::string Account() const {
    return "service account \"" + namespace_ + "/" + service_account + "\"";
  }
  // `service account "shop/web" (pod shop/web-0, audience "vault", 3600 s)`: for log lines.
  std::string ToString() const {
    return Account() + " (pod " + namespace_ + "/" + pod_name + ", audience " +
           (audience.empty() ? std::string("of the API server") : "\"" + audience + "\"") + ", " +
           std::to_string(expiration_seconds) + " s)";
  }

  auto operator<=>(const TokenRef&) const = default;
};

// The token a pod's serviceAccountToken source asks for (an unset expiry is the API's default,
// 3600 s, as the API server stores it).
inline TokenRef TokenRefFor(const Pod& pod, const ServiceAccountTokenProjection& projection) {
  TokenRef ref;
  ref.namespace_ = pod.metadata.namespace_;
  ref.service_account = pod.spec.service_account_name;
  ref.audience = projection.audience;
  ref.expiration_seconds = projection.expiration_seconds.value_or(kDefaultTokenExpirationSeconds);
  ref.pod_name = pod.metadata.name;
  ref.pod_uid = pod.metadata.uid;
  return ref;
}

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_TOKEN_REF_H_
