// ApiError: a failed API request as the client sees it: the HTTP code and the Status body
// (reason, message, details, causes, Retry-After), or a transport failure (code 0).
//
// ParseApiError never fails: a non-Status body (text from the inflight limiter, HTML from a proxy,
// nothing) is classified by its code as client-go does (docs/kubernetes-api.md §1.3),
// 409 on POST is AlreadyExists, a 410 with reason Gone or none is Expired. `message` is for
// humans only; decisions use `code`, `reason` and `causes`. Plain value.
#ifndef VOLUMEMANAGER_KUBECLIENT_API_ERROR_H_
#define VOLUMEMANAGER_KUBECLIENT_API_ERROR_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kubeclient/transport/transport.h"

namespace kubeclient {

struct StatusCause {
  std::string reason;
  std::string message;
  std::string field;
};

struct ApiError {
  // HTTP code; 0 when no response arrived (refused, reset, DNS, TLS, timeout).
  long code = 0;
  // Status reason (NotFound, Conflict, Expired, ...); "" for a transport failure.
  std::string reason;
  std::string message;
  std::string details_name;
  std::string details_kind;  // the resource, e.g. "configmaps"
  std::string details_group;
  std::vector<StatusCause> causes;
  // From Retry-After (or details.retryAfterSeconds); -1 when absent.
  int retry_after_seconds = -1;
  // metadata.continue of an expired-continue 410 (the inconsistent token; ignored by the pager).
  std::string continue_token;
  // For a transport failure (code 0): what kind; kNone otherwise.
  TransportFault fault = TransportFault::kNone;

  bool IsTransport() const { return code == 0; }
  bool IsNotFound() const { return code == 404; }
  bool IsConflict() const { return code == 409 && reason == "Conflict"; }
  bool IsAlreadyExists() const { return code == 409 && reason == "AlreadyExists"; }
  bool IsExpired() const { return code == 410; }
  bool IsUnauthorized() const { return code == 401; }
  bool IsForbidden() const { return code == 403; }
  bool IsTooManyRequests() const { return code == 429; }
  bool IsTooLargeResourceVersion() const;
  bool HasCause(std::string_view reason) const;
  // "<code> <reason>: <message>" (or "transport: <message>"), for logs.
  std::string ToString() const;
};

ApiError TransportError(std::string message, TransportFault fault = TransportFault::kOther);

// How a failed request is to be taken: the one classification every retry loop, the daemon's
// readiness and its exit at start use (docs/kubernetes-api.md §1.3).
enum class FailureClass {
  kAnswered,   // the server authenticated the client and answered (403, 404, 409, ...)
  kTransient,  // no answer, 5xx, 429: the server may answer later; retried
  kPermanent,  // the server is not trusted, or it refused the credentials (401), or the client
               // certificate cannot be used: nothing changes until a person or a rotation acts
};

struct FailureKind {
  FailureClass failure_class = FailureClass::kAnswered;
  // A metric label value: untrusted_server, unauthorized, client_certificate (permanent);
  // unreachable, server_error, throttled (transient); "" for kAnswered.
  std::string_view reason;
};

FailureKind ClassifyApiError(const ApiError& error);
// "permanent", "transient" or "answered".
std::string_view FailureClassName(FailureClass failure_class);

// `headers` have lower-case names. `method` decides 409 without a body (POST: AlreadyExists).
ApiError ParseApiError(long code, const std::map<std::string, std::string>& headers,
                       std::string_view body, std::string_view method = "GET");

// Parses an ERROR watch event's Status object (no headers).
ApiError ApiErrorFromStatusObject(long fallback_code, const std::string& status_json);

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_API_ERROR_H_
