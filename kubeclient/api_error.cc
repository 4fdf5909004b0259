#include "kubeclient/api_error.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

namespace kubeclient {
namespace {

std::string ReasonForCode(long code, std::string_view method) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return method == "POST" ? "AlreadyExists" : "Conflict";
    case 410:
      return "Expired";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return code >= 500 ? "InternalError" : "Unknown";
  }
}

std::string StringField(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// Fills `err` from a Status object; false when `status` is not one.
bool FillFromStatus(const nlohmann::json& status, ApiError& err) {
  if (!status.is_object() || StringField(status, "kind") != "Status") return false;
  err.reason = StringField(status, "reason");
  err.message = StringField(status, "message");
  if (auto code = status.find("code"); code != status.end() && code->is_number_integer()) {
    if (err.code == 0) err.code = code->get<long>();
  }
  if (auto meta = status.find("metadata"); meta != status.end() && meta->is_object()) {
    err.continue_token = StringField(*meta, "continue");
  }
  if (auto details = status.find("details"); details != status.end() && details->is_object()) {
    err.details_name = StringField(*details, "name");
    err.details_kind = StringField(*details, "kind");
    err.details_group = StringField(*details, "group");
    if (auto retry = details->find("retryAfterSeconds");
        retry != details->end() && retry->is_number_integer()) {
      err.retry_after_seconds = retry->get<int>();
    }
    if (auto causes = details->find("causes"); causes != details->end() && causes->is_array()) {
      for (const auto& cause : *causes) {
        if (!cause.is_object()) continue;
        err.causes.push_back({StringField(cause, "reason"), StringField(cause, "message"),
                              StringField(cause, "field")});
      }
    }
  }
  return true;
}

void Normalize(ApiError& err, std::string_view method) {
  if (err.reason.empty() || (err.code == 410 && err.reason == "Gone")) {
    err.reason = ReasonForCode(err.code, method);
  }
  if (err.message.empty())
    err.message = "the server responded with HTTP " + std::to_string(err.code);
}

}  // namespace

bool ApiError::IsTooLargeResourceVersion() const {
  return (code == 504 || code == 500) && HasCause("ResourceVersionTooLarge");
}

bool ApiError::HasCause(std::string_view cause_reason) const {
  for (const StatusCause& c : causes) {
    if (c.reason == cause_reason) return true;
  }
  return false;
}

std::string ApiError::ToString() const {
  if (IsTransport()) return "transport: " + message;
  return std::to_string(code) + " " + reason + ": " + message;
}

ApiError TransportError(std::string message, TransportFault fault) {
  ApiError err;
  err.message = std::move(message);
  err.fault = fault == TransportFault::kNone ? TransportFault::kOther : fault;
  return err;
}

FailureKind ClassifyApiError(const ApiError& error) {
  if (error.IsTransport()) {
    switch (error.fault) {
      case TransportFault::kUntrustedServer:
        return {FailureClass::kPermanent, "untrusted_server"};
      case TransportFault::kClientCertificate:
        return {FailureClass::kPermanent, "client_certificate"};
      case TransportFault::kNone:
      case TransportFault::kOther:
        break;
    }
    return {FailureClass::kTransient, "unreachable"};
  }
  if (error.IsUnauthorized()) return {FailureClass::kPermanent, "unauthorized"};
  if (error.IsTooManyRequests()) return {FailureClass::kTransient, "throttled"};
  if (error.code >= 500) return {FailureClass::kTransient, "server_error"};
  return {FailureClass::kAnswered, ""};
}

std::string_view FailureClassName(FailureClass failure_class) {
  switch (failure_class) {
    case FailureClass::kPermanent:
      return "permanent";
    case FailureClass::kTransient:
      return "transient";
    case FailureClass::kAnswered:
      break;
  }
  return "answered";
}

ApiError ParseApiError(long code, const std::map<std::string, std::string>& headers,
                       std::string_view body, std::string_view method) {
  ApiError err;
  err.code = code;
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!FillFromStatus(parsed, err)) {
    // Not a Status: keep a short, printable excerpt for humans (proxies send whole HTML pages).
    std::string excerpt(body.substr(0, 200));
    for (char& c : excerpt) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    err.message = excerpt;
  }
  err.code = code;  // the HTTP code wins over the body's
  if (auto it = headers.find("retry-after"); it != headers.end()) {
    char* end = nullptr;
    long seconds = std::strtol(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && *end == '\0' && seconds >= 0) {
      err.retry_after_seconds = static_cast<int>(seconds);
    }
  }
  Normalize(err, method);
  return err;
}

ApiError ApiErrorFromStatusObject(long fallback_code, const std::string& status_json) {
  ApiError err;
  nlohmann::json parsed = nlohmann::json::parse(status_json, nullptr, false);
  if (!FillFromStatus(parsed, err)) err.message = "watch ERROR event without a Status";
  if (err.code == 0) err.code = fallback_code;
  Normalize(err, "GET");
  return err;
}

}  // namespace kubeclient
