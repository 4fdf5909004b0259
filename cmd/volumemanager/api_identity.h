// ApiIdentity: who the daemon is to the API server, and whether that is a node's identity (the
// kubelet's own credentials: user `system:node:<name>` in group `system:nodes`, which the API
// server's Node authorizer confines to what pods bound to that node reference).
//
// LookUpIdentity asks the server (SelfSubjectReview, authentication.k8s.io/v1, served since
// Kubernetes 1.28 to any authenticated user); when it cannot answer (not served: 404, or 403
// where it is turned off; or the server not reachable) the client certificate's subject (CN the
// user, O the groups, as the API server reads them) stands in when the credentials have one.
// Nothing here logs or returns a credential. Plain functions; LookUpIdentity blocks on its
// BlockingApiClient.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_API_IDENTITY_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_API_IDENTITY_H_

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cmd/volumemanager/blocking_api_client.h"
#include "kubeclient/auth/credentials.h"

namespace volumemanager {

struct ApiIdentity {
  std::string username;
  std::vector<std::string> groups;
  // How it was learned: "SelfSubjectReview" or "client certificate".
  std::string source;

  // The node's name for a node identity (`system:node:<name>` and group `system:nodes`, the
  // Node authorizer's test), else nullopt.
  std::optional<std::string> NodeName() const;
  // "node \"<name>\"" or "service account or other user" (the mode the daemon runs in).
  std::string ModeName() const;
  // "<username> (groups a, b; from <source>)".
  std::string Describe() const;
};

// The subject of the first certificate of a PEM text: CN as username, O values as groups.
// An error names what is wrong with the certificate (never its bytes).
base::Result<ApiIdentity> IdentityOfClientCertificate(const std::string& pem);

// Asks SelfSubjectReview; when that fails, falls back to the client certificate's subject (its
// `source` then says why). An error says why neither answered (e.g. the server is unreachable
// and there is no certificate).
// `review_failure`, when given, receives the review's failure (nullopt when it answered): whether
// the server was reached and took the credentials is ClassifyApiError's (api_error.h) reading of
// it, and a fallback to the certificate's subject is confirmed only if so.
base::Result<ApiIdentity> LookUpIdentity(
    BlockingApiClient& client, const kubeclient::Credentials& credentials,
    std::optional<kubeclient::ApiError>* review_failure = nullptr);

// True for LookUpIdentity's error when the server answered but does not serve
// SelfSubjectReview (before Kubernetes 1.28: 404, or 403 where, as in 1.20, authorization runs
// before routing) and the credentials hold no client certificate (a bearer token): the identity
// cannot be known, which is no fault of the set-up. Read from the error's code (kUnimplemented,
// which LookUpIdentity sets for that case only), not from its text.
bool IsReviewNotServed(const base::Status& lookup_error);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_API_IDENTITY_H_
