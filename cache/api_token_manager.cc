#include "cache/api_token_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "base/catch_all.h"
#include "base/rfc3339.h"
#include "base/uv_timer.h"
#include "logging/structured_log.h"

namespace cache {

struct ApiTokenManager::Join {
  size_t pending = 0;
  std::function<void()> done;
};

namespace {

using SystemTime = std::chrono::system_clock::time_point;

// RFC 3339 as the API server writes metav1.Time ("2026-11-30T12:00:00Z"), to the second
// (fractional seconds dropped); nullopt otherwise.
std::optional<SystemTime> ParseTime(const std::string& text) {
  const std::optional<SystemTime> t = base::ParseRfc3339(text);
  if (!t) return std::nullopt;
  return std::chrono::floor<std::chrono::seconds>(*t);
}

std::string FormatTime(SystemTime t) { return base::FormatRfc3339(t); }

// A service account or pod name that can stand in a URL path: the API server validates both as
// DNS names; anything else (a manifest's) is refused rather than sent.
bool PlainName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                              c == '.';
                     }) &&
         name != "." && name != "..";
}

// The body of the request for `ref` (docs/kubernetes-api.md §2.7); no audience: the server's own.
nlohmann::json TokenRequestBody(const kube::TokenRef& ref) {
  nlohmann::json spec = {
      {"expirationSeconds", ref.expiration_seconds},
      {"boundObjectRef",
       {{"kind", "Pod"}, {"apiVersion", "v1"}, {"name", ref.pod_name}, {"uid", ref.pod_uid}}}};
  if (!ref.audience.empty()) spec["audiences"] = nlohmann::json::array({ref.audience});
  return {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", spec}};
}

}  // namespace

ApiTokenManager::ApiTokenManager(uv_loop_t* loop, kubeclient::ApiClient* api,
                                 ApiTokenManagerOptions options)
    : loop_(loop), api_(api), options_(std::move(options)) {
  if (!options_.steady_clock) options_.steady_clock = &std::chrono::steady_clock::now;
  if (!options_.system_clock) options_.system_clock = &std::chrono::system_clock::now;
  timer_ = base::NewTimer(loop_, this);
}

ApiTokenManager::~ApiTokenManager() { Stop(); }

void ApiTokenManager::Stop() {
  if (stopped_) return;
  stopped_ = true;
  base::CloseTimer(timer_);
  timer_ = nullptr;
  due_.clear();
  for (auto& [ref, entry] : entries_) {
    entry.due.reset();
    if (entry.call) api_->Cancel(*entry.call);
    entry.call.reset();
  }
  // Every pending Fetch completes once; gets answer from what is held.
  for (auto& [ref, entry] : entries_) Complete(entry);
}

void ApiTokenManager::RegisterPod(const std::string& pod_uid,
                                  const std::vector<kube::TokenRef>& refs) {
  std::vector<kube::TokenRef> wanted;
  for (const kube::TokenRef& ref : refs) {
    if (std::find(wanted.begin(), wanted.end(), ref) == wanted.end()) wanted.push_back(ref);
  }
  auto it = by_pod_.find(pod_uid);
  if (it != by_pod_.end()) {
    for (const kube::TokenRef& old : it->second) {
      if (std::find(wanted.begin(), wanted.end(), old) == wanted.end()) Forget(old);
    }
  }
  for (const kube::TokenRef& ref : wanted) entries_.try_emplace(ref);
  if (wanted.empty()) {
    if (it != by_pod_.end()) by_pod_.erase(it);
  } else {
    by_pod_[pod_uid] = std::move(wanted);
  }
}

void ApiTokenManager::UnregisterPod(const std::string& pod_uid) { RegisterPod(pod_uid, {}); }

void ApiTokenManager::Forget(const kube::TokenRef& ref) {
  auto it = entries_.find(ref);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  if (entry.call) api_->Cancel(*entry.call);
  entry.call.reset();
  Unschedule(entry);
  Complete(entry);  // a Fetch waiting for it goes on; its get now fails (not registered)
  entries_.erase(it);
}

base::Result<TokenRevision> ApiTokenManager::Get(const kube::TokenRef& ref) const {
  if (!options_.refusal.empty()) {
    return base::Status::Error("no token requested for " + ref.Account() + ": " + options_.refusal);
  }
  auto it = entries_.find(ref);
  if (it == entries_.end()) {
    return base::Status::Error("token for " + ref.Account() + " not registered for pod " +
                               ref.namespace_ + "/" + ref.pod_name);
  }
  const Entry& entry = it->second;
  if (entry.token != nullptr) {
    if (options_.steady_clock() < entry.expires) {
      return TokenRevision{entry.token, entry.serial, entry.expires_wall};
    }
    return base::Status::Error("token for " + ref.Account() + " expired at " +
                               FormatTime(entry.expires_wall) +
                               " and its refresh failed: " + entry.last_error.message())
        .WithApiStatus(entry.last_error.api_code(), entry.last_error.api_reason());
  }
  if (!entry.last_error.ok()) return entry.last_error;
  return base::Status::Error("token for " + ref.Account() + " not received yet");
}

std::optional<TokenStatus> ApiTokenManager::Status(const kube::TokenRef& ref) const {
  auto it = entries_.find(ref);
  if (it == entries_.end()) return std::nullopt;
  const Entry& entry = it->second;
  TokenStatus status;
  status.has_token = entry.token != nullptr;
  if (status.has_token) {
    status.expires_at = entry.expires_wall;
    status.refresh_at = entry.refresh_at_wall;
  }
  status.requesting = entry.call.has_value();
  status.last_error = !options_.refusal.empty() ? options_.refusal : entry.last_error.message();
  return status;
}

void ApiTokenManager::Fetch(const std::vector<kube::TokenRef>& refs, std::function<void()> done) {
  auto join = std::make_shared<Join>();
  join->done = std::move(done);
  join->pending = 1;  // released below, so that `done` runs once, after every ref was looked at
  if (!stopped_) {
    const SteadyTime now = options_.steady_clock();
    for (const kube::TokenRef& ref : refs) {
      if (!options_.refusal.empty()) {
        ++stats_.refused;
        continue;
      }
      auto it = entries_.find(ref);
      if (it == entries_.end()) continue;  // not registered: the get says so
      Entry& entry = it->second;
      const bool valid = entry.token != nullptr && now < entry.expires;
      // A valid token is requested again once its refresh is due and no failed refresh waits
      // for its retry; a token never received (or expired) at every Fetch.
      const bool needed = !valid || (now >= entry.refresh_at && now >= entry.retry_at);
      if (!needed && !entry.call) continue;
      if (!entry.call) Request(ref, entry);
      if (entry.call) {
        ++join->pending;
        entry.waiters.push_back(join);
      }
    }
  }
  if (--join->pending == 0) join->done();
}

void ApiTokenManager::Request(const kube::TokenRef& ref, Entry& entry) {
  Unschedule(entry);
  if (!PlainName(ref.service_account) || !PlainName(ref.pod_name) || ref.pod_uid.empty()) {
    entry.last_error = base::Status::Error(
        "failed to fetch token for " + ref.Account() + ": " +
        (ref.service_account.empty() ? std::string("the pod has no spec.serviceAccountName")
         : ref.pod_uid.empty()       ? std::string("the pod has no UID to bind the token to")
                                     : std::string("not a valid service account or pod name")));
    return;
  }
  const SteadyTime sent = options_.steady_clock();
  const std::chrono::system_clock::time_point sent_wall = options_.system_clock();
  const std::string path =
      "/api/v1/namespaces/" + ref.namespace_ + "/serviceaccounts/" + ref.service_account + "/token";
  entry.call = api_->Create(path, TokenRequestBody(ref),
                            [this, ref, sent, sent_wall,
                             alive = std::weak_ptr<char>(alive_)](kubeclient::ApiResult result) {
                              if (alive.expired()) return;
                              OnAnswer(ref, std::move(result), sent, sent_wall);
                            });
}

void ApiTokenManager::OnAnswer(const kube::TokenRef& ref, kubeclient::ApiResult result,
                               SteadyTime sent, std::chrono::system_clock::time_point sent_wall) {
  auto it = entries_.find(ref);
  if (it == entries_.end() || stopped_) return;
  Entry& entry = it->second;
  entry.call.reset();
  const SteadyTime now = options_.steady_clock();
  std::string token;
  std::optional<SystemTime> expires_wall;
  std::optional<int64_t> seconds;
  base::Status error;
  if (result.ok()) {
    const nlohmann::json& object = result.object;
    const nlohmann::json* status = object.contains("status") ? &object["status"] : nullptr;
    if (status != nullptr && status->is_object()) {
      if (auto t = status->find("token"); t != status->end() && t->is_string()) {
        token = t->get<std::string>();
      }
      if (auto e = status->find("expirationTimestamp"); e != status->end() && e->is_string()) {
        expires_wall = ParseTime(e->get<std::string>());
      }
    }
    if (object.contains("spec") && object["spec"].is_object()) {
      const nlohmann::json& spec = object["spec"];
      if (auto e = spec.find("expirationSeconds"); e != spec.end() && e->is_number_integer()) {
        seconds = e->get<int64_t>();
      }
    }
    if (token.empty()) {
      error = base::Status::Error("the server's TokenRequest answer has no status.token");
    } else if (!expires_wall) {
      error = base::Status::Error(
          "the server's TokenRequest answer has no valid status.expirationTimestamp");
    }
  } else {
    error = base::Status::Error(result.error->ToString())
                .WithApiStatus(static_cast<int>(result.error->code), result.error->reason);
  }

  if (!error.ok()) {
    ++stats_.requested_failed;
    entry.last_error =
        base::Status::Error("failed to fetch token for " + ref.Account() + ": " + error.message())
            .WithApiStatus(error.api_code(), error.api_reason());
    if (entry.token != nullptr && now < entry.expires) {
      // The old token serves on; the refresh is retried, before the old one expires.
      entry.retry_delay = entry.retry_delay.count() == 0
                              ? options_.retry_initial
                              : std::min(entry.retry_delay * 2, options_.retry_max);
      entry.retry_at = std::min(now + entry.retry_delay, entry.expires);
      logging::Log(entry.failure_logged ? spdlog::level::debug : spdlog::level::warn,
                   "Service account token refresh failed; the current token serves until it "
                   "expires",
                   {{"serviceAccount", logging::KObj(ref.namespace_, ref.service_account)},
                    {"pod", logging::KObj(ref.namespace_, ref.pod_name)},
                    {"podUID", ref.pod_uid},
                    {"expiresAt", FormatTime(entry.expires_wall)},
                    {"retryInMs", static_cast<long>(entry.retry_delay.count())},
                    {"err", entry.last_error}});
      entry.failure_logged = true;
    }
    Schedule(ref, entry);
    Complete(entry);
    return;
  }

  ++stats_.requested_ok;
  const bool refreshed = entry.token != nullptr;
  if (refreshed) ++stats_.refreshed;
  if (entry.failure_logged) {
    logging::Info("Service account token refreshed after failures",
                  {{"serviceAccount", logging::KObj(ref.namespace_, ref.service_account)},
                   {"pod", logging::KObj(ref.namespace_, ref.pod_name)},
                   {"podUID", ref.pod_uid}});
  }
  // Its life: from the request (the server issued it later) to the earlier of the answer's
  // expirationSeconds after that and its expirationTimestamp on this node's clock.
  std::chrono::milliseconds life = std::chrono::seconds(seconds.value_or(ref.expiration_seconds));
  const auto by_timestamp =
      std::chrono::duration_cast<std::chrono::milliseconds>(*expires_wall - sent_wall);
  if (by_timestamp.count() > 0) {
    life = std::min(life, by_timestamp);
  } else {
    // Expired before it was asked for, by this node's clock: the clocks disagree by more than
    // the token's life. The answer's expirationSeconds is the better guide.
    logging::Warn(
        "Service account token expires before it was requested, by this node's clock: "
        "its life is counted from expirationSeconds instead",
        {{"serviceAccount", logging::KObj(ref.namespace_, ref.service_account)},
         {"pod", logging::KObj(ref.namespace_, ref.pod_name)},
         {"expirationTimestamp", FormatTime(*expires_wall)}});
  }
  std::chrono::milliseconds refresh_after = std::min(life * 8 / 10, options_.max_age);
  refresh_after -= Jitter(life);
  refresh_after = std::max(refresh_after, std::chrono::milliseconds(0));

  entry.token = std::make_shared<const std::string>(std::move(token));
  entry.serial = ++next_serial_;
  entry.expires = sent + life;
  entry.expires_wall = sent_wall + life;
  entry.refresh_at = sent + refresh_after;
  entry.refresh_at_wall = sent_wall + refresh_after;
  entry.last_error = base::Status::OK();
  entry.retry_at = SteadyTime{};
  entry.retry_delay = std::chrono::milliseconds(0);
  entry.failure_logged = false;
  entry.expiry_announced = false;
  logging::Debug("Service account token received",
                 {{"serviceAccount", logging::KObj(ref.namespace_, ref.service_account)},
                  {"pod", logging::KObj(ref.namespace_, ref.pod_name)},
                  {"podUID", ref.pod_uid},
                  {"audience", logging::Value::IfSet(ref.audience)},
                  {"expiresAt", FormatTime(entry.expires_wall)},
                  {"refreshAt", FormatTime(entry.refresh_at_wall)}});
  Schedule(ref, entry);
  Complete(entry);
  // The volumes using it take the new token (a first one too: a volume backing off after a failed
  // attempt tries again at once).
  if (on_change_) on_change_(ref);
}

void ApiTokenManager::Complete(Entry& entry) {
  std::vector<std::shared_ptr<Join>> waiters = std::move(entry.waiters);
  entry.waiters.clear();
  for (const std::shared_ptr<Join>& join : waiters) {
    if (--join->pending == 0 && join->done) {
      base::Status s = base::CatchAll("token fetch callback", [&] { join->done(); });
      if (!s.ok()) spdlog::error("{}", s.message());
    }
  }
}

std::chrono::milliseconds ApiTokenManager::Jitter(std::chrono::milliseconds life) {
  const std::chrono::milliseconds bound = std::min(options_.max_jitter, life / 10);
  double draw =
      options_.jitter ? options_.jitter() : std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  draw = std::clamp(draw, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<long>(static_cast<double>(bound.count()) * draw));
}

void ApiTokenManager::Schedule(const kube::TokenRef& ref, Entry& entry) {
  Unschedule(entry);
  if (stopped_ || entry.call || entry.token == nullptr) return;
  // The next thing due: the refresh (or, after a failed one, its retry), else the expiry.
  SteadyTime when;
  const SteadyTime now = options_.steady_clock();
  if (now < entry.expires) {
    when = std::max(entry.refresh_at, entry.retry_at);
    if (when >= entry.expires) when = entry.expires;
  } else if (!entry.expiry_announced) {
    when = now;
  } else {
    return;  // expired and announced: the volumes' Fetches request again
  }
  entry.due = due_.emplace(when, ref);
  ArmTimer();
}

void ApiTokenManager::Unschedule(Entry& entry) {
  if (!entry.due) return;
  due_.erase(*entry.due);
  entry.due.reset();
  ArmTimer();
}

void ApiTokenManager::ArmTimer() {
  if (timer_ == nullptr) return;
  if (due_.empty()) {
    uv_timer_stop(timer_);
    return;
  }
  const auto delay =
      std::chrono::ceil<std::chrono::milliseconds>(due_.begin()->first - options_.steady_clock());
  uv_timer_start(
      timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<ApiTokenManager*>(t->data);
        base::Status s = base::CatchAll("token refresh timer", [self] { self->OnTimer(); });
        if (!s.ok()) spdlog::error("{}", s.message());
      },
      static_cast<uint64_t>(std::max<long>(delay.count(), 0)), 0);
}

void ApiTokenManager::OnTimer() {
  const SteadyTime now = options_.steady_clock();
  std::vector<kube::TokenRef> due;
  for (auto it = due_.begin(); it != due_.end() && it->first <= now; ++it) {
    due.push_back(it->second);
  }
  for (const kube::TokenRef& ref : due) {
    auto it = entries_.find(ref);
    if (it == entries_.end()) continue;
    Entry& entry = it->second;
    Unschedule(entry);
    if (entry.token != nullptr && now >= entry.expires) {
      if (!entry.expiry_announced) {
        // Its refresh kept failing: the volumes using it fail visibly from now on.
        entry.expiry_announced = true;
        ++stats_.expired;
        logging::Warn("Service account token expired; its refresh keeps failing",
                      {{"serviceAccount", logging::KObj(ref.namespace_, ref.service_account)},
                       {"pod", logging::KObj(ref.namespace_, ref.pod_name)},
                       {"podUID", ref.pod_uid},
                       {"err", entry.last_error}});
        if (on_change_) on_change_(ref);
      }
      continue;
    }
    // (A token is held, so its request was sent before: this one is sent too.)
    if (!entry.call) Request(ref, entry);
  }
  ArmTimer();
}

}  // namespace cache
