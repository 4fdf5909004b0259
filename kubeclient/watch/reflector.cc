#include "kubeclient/watch/reflector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <set>

#include "base/catch_all.h"
#include "base/strings.h"
#include "base/uv_timer.h"
#include "logging/structured_log.h"

namespace kubeclient {
namespace {

// "?a=1&b=2"; "" without parameters.
std::string QueryString(const std::vector<std::string>& params) {
  return params.empty() ? "" : "?" + base::Join(params, "&");
}

}  // namespace

Reflector::Reflector(ApiClient* api, ReflectorOptions options, ReflectorHandlers handlers)
    : api_(api),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      relist_backoff_(options_.relist_backoff) {
  if (options_.description.empty()) options_.description = options_.path;
  uv_loop_t* loop = api_->http()->loop();
  watchdog_timer_ = base::NewTimer(loop, this);
  resync_timer_ = base::NewTimer(loop, this);
}

Reflector::~Reflector() {
  Stop();
  if (retry_timer_ != nullptr) base::CloseTimer(retry_timer_);
  base::CloseTimer(watchdog_timer_);
  base::CloseTimer(resync_timer_);
}

void Reflector::Start() {
  if (phase_ != Phase::kIdle) return;
  if (options_.resync_period.count() > 0) {
    auto period = static_cast<uint64_t>(options_.resync_period.count());
    uv_timer_start(
        resync_timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<Reflector*>(t->data);
          // Only an established watch is replaced; a list or a backoff wait is already a resync.
          if (self->phase_ != Phase::kWatching) return;
          self->Guarded("periodic relist", [self] {
            logging::Info("Periodic relist",
                          {{"reflector", self->options_.description},
                           {"object", logging::Value::IfSet(self->options_.object)}});
            self->CancelWatch();
            self->ListNow();
          });
        },
        period, period);
  }
  ListNow();
}

void Reflector::Stop() {
  phase_ = Phase::kStopped;
  if (list_in_flight_) api_->Cancel(list_call_);
  list_in_flight_ = false;
  CancelWatch();
  if (retry_timer_ != nullptr) uv_timer_stop(retry_timer_);
  CancelAnswerWait();
  uv_timer_stop(resync_timer_);
}

template <typename F>
void Reflector::CallHandler(const char* what, F&& f) {
  base::Status s = base::CatchAll(what, std::forward<F>(f));
  if (!s.ok())
    logging::Error("Reflector handler failed", {{"reflector", options_.description},
                                                {"object", logging::Value::IfSet(options_.object)},
                                                {"handler", what},
                                                {"err", s}});
}

template <typename F>
void Reflector::Guarded(const char* where, F&& body) {
  base::Status s = base::CatchAll(where, std::forward<F>(body));
  if (s.ok() || phase_ == Phase::kStopped) return;
  // Whatever state the failure left behind, start over from a list after backoff.
  base::Status recovery = base::CatchAll("reflector recovery", [&] {
    CancelWatch();
    if (list_in_flight_) api_->Cancel(list_call_);
    list_in_flight_ = false;
    ScheduleRelist(s.message());
  });
  if (!recovery.ok())
    logging::Error("Reflector recovery failed", {{"reflector", options_.description},
                                                 {"object", logging::Value::IfSet(options_.object)},
                                                 {"err", recovery}});
}

void Reflector::ListNow() {
  if (phase_ == Phase::kStopped) return;
  phase_ = Phase::kListing;
  list_rv_ = rv_unavailable_ ? "" : (last_sync_rv_.empty() ? "0" : last_sync_rv_);
  list_paged_ = list_rv_.empty() || list_rv_ == "0";
  pages_.clear();
  RequestPage("");
}

void Reflector::RequestPage(const std::string& continue_token) {
  std::vector<std::string> params;
  if (!options_.field_selector.empty()) {
    params.push_back("fieldSelector=" + QueryEscape(options_.field_selector));
  }
  if (!options_.label_selector.empty()) {
    params.push_back("labelSelector=" + QueryEscape(options_.label_selector));
  }
  if (!continue_token.empty()) {
    params.push_back("limit=" + std::to_string(options_.page_size));
    params.push_back("continue=" + QueryEscape(continue_token));
  } else {
    if (!list_rv_.empty()) params.push_back("resourceVersion=" + QueryEscape(list_rv_));
    if (list_paged_) params.push_back("limit=" + std::to_string(options_.page_size));
  }
  list_in_flight_ = true;
  list_call_ =
      api_->Get(options_.path + QueryString(params), [this, continue_token](ApiResult result) {
        Guarded("list response", [&] { OnPage(std::move(result), continue_token); });
      });
}

void Reflector::OnPage(ApiResult result, const std::string& continue_token) {
  list_in_flight_ = false;
  if (phase_ != Phase::kListing) return;
  if (!result.ok()) {
    const ApiError& err = *result.error;
    ++stats_.list_failures;
    if (err.IsExpired()) ++stats_.expired;
    if (!continue_token.empty() && err.IsExpired()) {
      // client-go's pager: ignore the offered inconsistent token, list once more unpaged at the
      // RV originally asked for.
      logging::Info("Continue token expired; listing unpaged",
                    {{"reflector", options_.description},
                     {"object", logging::Value::IfSet(options_.object)},
                     {"resourceVersion", list_rv_}});
      pages_.clear();
      list_paged_ = false;
      RequestPage("");
      return;
    }
    if ((err.IsExpired() || err.IsTooLargeResourceVersion()) && !list_rv_.empty()) {
      logging::Info("List at a resourceVersion failed; relisting from the latest",
                    {{"reflector", options_.description},
                     {"object", logging::Value::IfSet(options_.object)},
                     {"resourceVersion", list_rv_},
                     {"err", err.ToString()}});
      rv_unavailable_ = true;
      ListNow();
      return;
    }
    if (err.IsUnauthorized()) api_->http()->InvalidateToken();
    if (!err.IsTransport()) {
      CallHandler("error", [&] {
        if (handlers_.on_error) handlers_.on_error(err);
      });
      if (phase_ != Phase::kListing) return;  // stopped by the handler's owner
    }
    // No answer at all: the server is away, and the list goes again on the reconnect schedule
    // (woken when the server answers), so an outage never grows the relist backoff.
    ScheduleRelist("list failed: " + err.ToString(),
                   err.IsTransport() ? Wait::kNoAnswer : Wait::kRelist, err.code);
    return;
  }
  const nlohmann::json& body = result.object;
  if (auto items = body.find("items"); items != body.end() && items->is_array()) {
    for (const auto& item : *items) pages_.push_back(item);
  }
  std::string next;
  std::string list_rv;
  if (auto meta = body.find("metadata"); meta != body.end() && meta->is_object()) {
    if (auto c = meta->find("continue"); c != meta->end() && c->is_string()) next = *c;
    if (auto rv = meta->find("resourceVersion"); rv != meta->end() && rv->is_string()) {
      list_rv = *rv;
    }
  }
  if (!next.empty() && list_paged_) {
    RequestPage(next);
    return;
  }
  Replace(list_rv);
  if (phase_ == Phase::kListing) StartWatch();
}

nlohmann::json Reflector::Stored(const nlohmann::json& object) const {
  if (options_.keep_objects) return object;
  // The identity: the key holds the name and namespace. As a JSON object it cost about 0.5 KiB
  // (two maps, four nodes); as one string, a tenth of that.
  return nlohmann::json(ObjectStore::ResourceVersionOf(object));
}

void Reflector::Replace(const std::string& list_rv) {
  std::map<std::string, nlohmann::json> fresh;
  for (auto& item : pages_) {
    if (!item.is_object()) continue;
    std::string key = ObjectStore::KeyOf(item);
    if (key.empty()) continue;
    if (!options_.kind.empty() && !item.contains("kind")) item["kind"] = options_.kind;
    if (!options_.api_version.empty() && !item.contains("apiVersion")) {
      item["apiVersion"] = options_.api_version;
    }
    fresh[key] = std::move(item);
  }
  pages_.clear();
  std::vector<std::string> gone;
  for (const auto& [key, old] : store_.items()) {
    if (!fresh.count(key)) gone.push_back(key);
  }
  for (const std::string& key : gone) {
    nlohmann::json last = ObjectStore::Expand(key, *store_.Get(key));
    store_.Erase(key);
    CallHandler("delete", [&] {
      if (handlers_.on_delete) handlers_.on_delete(last);
    });
  }
  for (auto& entry : fresh) {
    // Named references, not a structured binding: clang 14 (the fuzz build) cannot capture one.
    const auto& key = entry.first;
    auto& object = entry.second;
    const nlohmann::json* existing = store_.Get(key);
    if (existing == nullptr) {
      store_.Put(key, Stored(object));
      CallHandler("add", [&] {
        if (handlers_.on_add) handlers_.on_add(object);
      });
    } else if (ObjectStore::StoredResourceVersion(*existing) !=
               ObjectStore::ResourceVersionOf(object)) {
      nlohmann::json old = ObjectStore::Expand(key, *existing);
      store_.Put(key, Stored(object));
      CallHandler("update", [&] {
        if (handlers_.on_update) handlers_.on_update(old, object);
      });
    }
  }
  last_sync_rv_ = list_rv;
  rv_unavailable_ = false;
  last_warned_.reset();
  ++stats_.lists;
  logging::Info("Listed", {{"reflector", options_.description},
                           {"object", logging::Value::IfSet(options_.object)},
                           {"objects", store_.size()},
                           {"resourceVersion", list_rv}});
  CallHandler("synced", [&] {
    if (handlers_.on_synced) handlers_.on_synced();
  });
}

void Reflector::StartWatch() {
  if (phase_ == Phase::kStopped) return;
  phase_ = Phase::kWatching;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  long long min_s = options_.min_watch_timeout.count();
  long long max_s = std::max(min_s, static_cast<long long>(options_.max_watch_timeout.count()));
  long long timeout_s =
      max_s > min_s ? std::uniform_int_distribution<long long>(min_s, max_s - 1)(rng) : min_s;
  std::vector<std::string> params;
  if (!options_.field_selector.empty()) {
    params.push_back("fieldSelector=" + QueryEscape(options_.field_selector));
  }
  if (!options_.label_selector.empty()) {
    params.push_back("labelSelector=" + QueryEscape(options_.label_selector));
  }
  params.push_back("watch=true");
  params.push_back("resourceVersion=" + QueryEscape(last_sync_rv_));
  params.push_back("allowWatchBookmarks=true");
  params.push_back("timeoutSeconds=" + std::to_string(timeout_s));

  decoder_ = std::make_unique<WatchDecoder>(options_.max_event_bytes);
  watch_started_ = std::chrono::steady_clock::now();
  watch_events_ = 0;
  watch_status_ = 0;
  watch_error_.reset();
  decode_error_.reset();
  ++stats_.watches;

  HttpRequest request;
  request.path = options_.path + QueryString(params);
  request.stream = true;
  watch_in_flight_ = true;
  // The watch goes through the API client's rate limiter; its clocks (the "very short watch"
  // measure and the watchdog) start once it is actually sent.
  watch_request_ = api_->Stream(
      std::move(request),
      [this](base::Status transport, HttpResponse response) {
        watch_in_flight_ = false;
        Guarded("watch end", [&] { OnWatchEnded(std::move(transport), response); });
      },
      {[this](const HttpResponse& head) { watch_status_ = head.status; },
       [this](std::string_view data) { return OnWatchData(data); }},
      [this, timeout_s] { Guarded("watch start", [&] { ArmWatchdog(timeout_s); }); });
}

void Reflector::ArmWatchdog(long long timeout_s) {
  watch_started_ = std::chrono::steady_clock::now();
  auto watchdog = std::chrono::seconds(timeout_s) + options_.watchdog_grace;
  uv_timer_start(
      watchdog_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<Reflector*>(t->data);
        if (self->phase_ != Phase::kWatching || !self->watch_in_flight_) return;
        ++self->stats_.watchdog_fired;
        self->Guarded("watchdog", [self] {
          logging::Warn("Watch silent past its timeout; re-watching",
                        {{"reflector", self->options_.description},
                         {"object", logging::Value::IfSet(self->options_.object)},
                         {"resourceVersion", self->last_sync_rv_}});
          self->CancelWatch();
          self->StartWatch();
        });
      },
      static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(watchdog).count()),
      0);
}

void Reflector::CancelWatch() {
  uv_timer_stop(watchdog_timer_);
  if (watch_in_flight_) api_->Cancel(watch_request_);
  watch_in_flight_ = false;
}

bool Reflector::OnWatchData(std::string_view data) {
  if (phase_ != Phase::kWatching) return false;
  std::vector<WatchEvent> events;
  base::Status decoded = decoder_->Feed(data, events);
  for (WatchEvent& event : events) {
    if (!ApplyEvent(event)) return false;
    if (phase_ != Phase::kWatching) return false;
  }
  if (!decoded.ok()) {
    decode_error_ = decoded.message();
    return false;
  }
  return true;
}

void Reflector::SetSyncedRv(const std::string& rv) {
  if (rv.empty()) return;
  if (ResourceVersionOlder(rv, last_sync_rv_)) {
    logging::Warn("Event resourceVersion is older than the last synced; not moving back",
                  {{"reflector", options_.description},
                   {"object", logging::Value::IfSet(options_.object)},
                   {"resourceVersion", rv},
                   {"lastSyncResourceVersion", last_sync_rv_}});
    return;
  }
  last_sync_rv_ = rv;
}

bool Reflector::ApplyEvent(WatchEvent& event) {
  ++watch_events_;
  nlohmann::json& object = event.object;
  if (event.type == WatchEventType::kError) {
    watch_error_ = std::make_unique<ApiError>(ApiErrorFromStatusObject(500, object.dump()));
    return false;
  }
  if (event.type == WatchEventType::kBookmark) {
    ++stats_.bookmarks;
    SetSyncedRv(event.resource_version);
    return true;
  }
  const std::string rv = ObjectStore::ResourceVersionOf(object);
  if (!options_.kind.empty()) {
    auto kind = object.find("kind");
    if (kind != object.end() && kind->is_string() &&
        kind->get_ref<const std::string&>() != options_.kind) {
      ++stats_.skipped_wrong_kind;
      logging::Warn("Skipping a watch event of another kind",
                    {{"reflector", options_.description},
                     {"object", logging::Value::IfSet(options_.object)},
                     {"type", WatchEventTypeName(event.type)},
                     {"kind", kind->get<std::string>().substr(0, 64)},
                     {"expected", options_.kind}});
      return true;
    }
  }
  std::string key = ObjectStore::KeyOf(object);
  if (key.empty()) {
    logging::Warn("Skipping a watch event without metadata.name",
                  {{"reflector", options_.description},
                   {"object", logging::Value::IfSet(options_.object)},
                   {"type", WatchEventTypeName(event.type)}});
    return true;
  }
  const nlohmann::json* existing = store_.Get(key);
  if (event.type == WatchEventType::kDeleted) {
    if (existing != nullptr) {
      store_.Erase(key);
      ++stats_.events;
      CallHandler("delete", [&] {
        if (handlers_.on_delete) handlers_.on_delete(object);
      });
    }
  } else if (existing == nullptr) {
    store_.Put(key, Stored(object));
    ++stats_.events;
    CallHandler("add", [&] {
      if (handlers_.on_add) handlers_.on_add(object);
    });
  } else if (ObjectStore::StoredResourceVersion(*existing) != rv) {
    nlohmann::json old = ObjectStore::Expand(key, *existing);
    store_.Put(key, Stored(object));
    ++stats_.events;
    CallHandler("update", [&] {
      if (handlers_.on_update) handlers_.on_update(old, object);
    });
  }
  SetSyncedRv(rv);
  return true;
}

void Reflector::OnWatchEnded(base::Status transport, const HttpResponse& response) {
  uv_timer_stop(watchdog_timer_);
  if (phase_ != Phase::kWatching) return;
  auto elapsed = std::chrono::steady_clock::now() - watch_started_;
  if (decode_error_) {
    ++stats_.decode_errors;
    ScheduleRelist("undecodable watch data (" + *decode_error_ + ")");
    return;
  }
  if (watch_error_) {
    ++stats_.error_events;
    if (watch_error_->IsExpired()) ++stats_.expired;
    if (watch_error_->IsTooManyRequests()) {
      ScheduleRewatch("watch ERROR event: " + watch_error_->ToString(), Wait::kThrottled,
                      watch_error_->code);
    } else {
      ScheduleRelist("watch ERROR event: " + watch_error_->ToString(), Wait::kRelist,
                     watch_error_->code);
    }
    return;
  }
  if (watch_status_ == 0) {
    ScheduleRewatch("watch failed: " + transport.message(), Wait::kNoAnswer);
    return;
  }
  if (watch_status_ < 200 || watch_status_ >= 300) {
    ApiError err = ParseApiError(watch_status_, response.headers, response.body);
    if (err.IsExpired()) ++stats_.expired;
    if (err.IsUnauthorized()) api_->http()->InvalidateToken();
    if (!err.IsExpired()) {
      CallHandler("error", [&] {
        if (handlers_.on_error) handlers_.on_error(err);
      });
      if (phase_ != Phase::kWatching) return;  // stopped by the handler's owner
    }
    if (err.IsTooManyRequests()) {
      ScheduleRewatch("watch refused: " + err.ToString(), Wait::kThrottled, err.code);
    } else if (err.IsUnauthorized()) {
      ScheduleRewatch("watch refused: " + err.ToString(), Wait::kRelist, err.code);
    } else {
      ScheduleRelist("watch refused: " + err.ToString(), Wait::kRelist, err.code);
    }
    return;
  }
  if (watch_events_ == 0 && elapsed < options_.short_watch) {
    ++stats_.short_watches;
    ScheduleRelist("very short watch: ended with no events");
    return;
  }
  if (!transport.ok()) {
    logging::Info("Watch broke; re-watching", {{"reflector", options_.description},
                                               {"object", logging::Value::IfSet(options_.object)},
                                               {"resourceVersion", last_sync_rv_},
                                               {"err", transport}});
  }
  StartWatch();
}

void Reflector::ScheduleRelist(const std::string& why, Wait wait, long code) {
  ScheduleRetry(&Reflector::ListNow, "Relisting after a delay", why, wait, code);
}

void Reflector::ScheduleRewatch(const std::string& why, Wait wait, long code) {
  ScheduleRetry(&Reflector::StartWatch, "Re-watching after a delay", why, wait, code);
}

void Reflector::ScheduleRetry(void (Reflector::*next)(), const char* message,
                              const std::string& why, Wait wait, long code) {
  phase_ = Phase::kWaiting;
  std::chrono::milliseconds delay;
  if (wait == Wait::kRelist) {
    delay = relist_backoff_.Next();
    ++stats_.relist_waits;
  } else {
    if (reconnect_backoff_ == nullptr) {
      reconnect_backoff_ = std::make_unique<Backoff>(options_.reconnect_backoff);
    }
    delay = reconnect_backoff_->Next();
    ++stats_.reconnect_waits;
  }
  // A 403 right after the server came back may be its Node authorizer still filling its graph:
  // read again soon (the backoff still grows, for after the grace).
  const ServerReachability& reachability = api_->reachability();
  const bool grace = code == 403 && reachability.InReconnectGrace();
  if (grace) {
    ++stats_.grace_refusals;
    delay = std::min(delay, reachability.options().grace_retry_delay);
  }
  ++stats_.backoff_waits;
  stats_.last_delay = delay;
  LogRetry(message, why, delay, code, grace);
  After(delay, next, wait == Wait::kNoAnswer);
}

void Reflector::LogRetry(const char* message, const std::string& why,
                         std::chrono::milliseconds delay, long code, bool grace) {
  const bool repeated = last_warned_ != nullptr && *last_warned_ == why;
  spdlog::level::level_enum level = repeated ? spdlog::level::debug : spdlog::level::warn;
  if (code == 410 && repeated) level = spdlog::level::info;  // a 410 relist is always seen
  if (grace) level = spdlog::level::debug;
  // A failure the daemon's health tracker holds is its to say: a permanent one at error level, a
  // transient one at warning level once it lasts (api_health.h); each retry only at info.
  if (const ApiHealth* health = api_->health(); health != nullptr && health->problem()) {
    level = health->permanent() ? spdlog::level::debug : std::min(level, spdlog::level::info);
  }
  logging::Log(level, message,
               {{"reflector", options_.description},
                {"object", logging::Value::IfSet(options_.object)},
                {"err", why},
                {"delayMs", delay.count()}});
  // A refusal within the grace leaves the warning to the first one after it.
  if (!repeated && !grace) last_warned_ = std::make_unique<std::string>(why);
}

void Reflector::After(std::chrono::milliseconds delay, void (Reflector::*next)(),
                      bool until_answer) {
  pending_ = next;
  CancelAnswerWait();
  if (until_answer) {
    answer_wait_ = api_->reachability().WaitForAnswer([this] { OnAnswerAgain(); });
  }
  if (retry_timer_ == nullptr) retry_timer_ = base::NewTimer(api_->http()->loop(), this);
  uv_timer_start(
      retry_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<Reflector*>(t->data);
        self->CancelAnswerWait();
        if (self->phase_ == Phase::kStopped || self->pending_ == nullptr) return;
        auto next_step = self->pending_;
        self->pending_ = nullptr;
        self->Guarded("retry timer", [&] { (self->*next_step)(); });
      },
      static_cast<uint64_t>(std::max<long long>(0, delay.count())), 0);
}

void Reflector::OnAnswerAgain() {
  answer_wait_ = 0;
  if (phase_ != Phase::kWaiting || pending_ == nullptr) return;
  if (retry_timer_ != nullptr) uv_timer_stop(retry_timer_);
  ++stats_.woken_by_answer;
  logging::Debug(
      "The API server answers again; retrying now",
      {{"reflector", options_.description}, {"object", logging::Value::IfSet(options_.object)}});
  auto next_step = pending_;
  pending_ = nullptr;
  Guarded("reconnect", [&] { (this->*next_step)(); });
}

void Reflector::CancelAnswerWait() {
  if (answer_wait_ == 0) return;
  api_->reachability().CancelWait(answer_wait_);
  answer_wait_ = 0;
}

}  // namespace kubeclient
