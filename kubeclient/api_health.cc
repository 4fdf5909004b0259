#include "kubeclient/api_health.h"

#include <spdlog/spdlog.h>

#include "logging/structured_log.h"

namespace kubeclient {

namespace {

// What a person does about a permanent failure, by reason.
std::string_view Remedy(std::string_view reason) {
  if (reason == "untrusted_server") {
    return "the server's certificate does not verify against the configured CA (or not for the "
           "server's name): fix certificate-authority or tls-server-name, or the server's "
           "certificate";
  }
  if (reason == "unauthorized") {
    return "the server refused the credentials (401): the token was revoked or expired, or the "
           "client certificate is not signed by the server's client CA";
  }
  if (reason == "client_certificate") {
    return "the client certificate or key cannot be used: fix the files the credentials name";
  }
  return "";
}

}  // namespace

ApiHealth::ApiHealth(ApiHealthOptions options) : options_(std::move(options)) {}

std::chrono::steady_clock::time_point ApiHealth::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

void ApiHealth::OnOutcome(const std::optional<ApiError>& error) {
  const FailureKind kind = error ? ClassifyApiError(*error) : FailureKind{};
  if (kind.failure_class == FailureClass::kAnswered) {
    if (problem_ && logged_) {
      const auto lasted =
          std::chrono::duration_cast<std::chrono::seconds>(Now() - problem_->since).count();
      logging::Info("The API server answers again",
                    {{"server", options_.server},
                     {"reason", problem_->reason},
                     {"failedForSeconds", static_cast<int64_t>(lasted)},
                     {"attempts", problem_->attempts}});
    }
    problem_.reset();
    logged_.reset();
    if (!reached_) {
      reached_ = true;
      if (on_first_answer_) on_first_answer_();
    }
    return;
  }
  const std::string reason(kind.reason);
  ++failures_[{std::string(FailureClassName(kind.failure_class)), reason}];
  const auto now = Now();
  const bool permanent = kind.failure_class == FailureClass::kPermanent;
  // A transient failure never hides a permanent one: the server may be down and the
  // credentials still wrong.
  if (problem_ && !permanent && problem_->failure_class == FailureClass::kPermanent) {
    ++problem_->attempts;
    return;
  }
  const bool changed =
      !problem_ || problem_->failure_class != kind.failure_class || problem_->reason != reason;
  if (changed) {
    problem_ = Problem{kind.failure_class, reason, error->ToString(), now, 0};
    logged_.reset();
  }
  ++problem_->attempts;
  problem_->message = error->ToString();
  if (permanent && !reached_ && !told_before_reach_ && on_permanent_before_reach_) {
    told_before_reach_ = true;
    on_permanent_before_reach_(*problem_);
    return;
  }
  const bool due = logged_ ? now - *logged_ >= options_.error_log_interval
                           : permanent || now - problem_->since >= options_.outage_warning_after;
  if (!due) return;
  const bool first = !logged_.has_value();
  logged_ = now;
  const auto lasted =
      std::chrono::duration_cast<std::chrono::seconds>(now - problem_->since).count();
  if (permanent) {
    logging::Error(first ? "API requests fail permanently; retrying with backoff"
                         : "API requests still fail permanently; retrying with backoff",
                   {{"server", options_.server},
                    {"reason", problem_->reason},
                    {"failedForSeconds", static_cast<int64_t>(lasted)},
                    {"attempts", problem_->attempts},
                    {"remedy", Remedy(problem_->reason)},
                    {"err", problem_->message}});
  } else {
    logging::Warn(
        "The API server has not answered for a while; retrying, the volumes keep their "
        "last content",
        {{"server", options_.server},
         {"reason", problem_->reason},
         {"failedForSeconds", static_cast<int64_t>(lasted)},
         {"attempts", problem_->attempts},
         {"err", problem_->message}});
  }
}

std::string ApiHealth::Describe() const {
  if (!problem_) return "";
  const auto lasted =
      std::chrono::duration_cast<std::chrono::seconds>(Now() - problem_->since).count();
  std::string text = std::string(FailureClassName(problem_->failure_class)) + " API failure (" +
                     problem_->reason + ") for " + std::to_string(lasted) + " s, " +
                     std::to_string(problem_->attempts) +
                     " attempts, the last: " + problem_->message;
  const std::string_view remedy = Remedy(problem_->reason);
  if (!remedy.empty()) text += "; " + std::string(remedy);
  return text;
}

}  // namespace kubeclient
