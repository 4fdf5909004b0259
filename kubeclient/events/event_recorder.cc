#include "kubeclient/events/event_recorder.h"

#include <spdlog/spdlog.h>

#include <random>
#include <utility>

#include "base/catch_all.h"
#include "base/uv_timer.h"
#include "logging/structured_log.h"

namespace kubeclient {
namespace {

constexpr char kStrategicMergePatch[] = "application/strategic-merge-patch+json";
// metav1.NamespaceDefault: where events about cluster-scoped objects go.
constexpr char kDefaultNamespace[] = "default";

std::string EventsPath(const std::string& ns) { return "/api/v1/namespaces/" + ns + "/events"; }

// "FailedMount on Pod shop/web-0": how logs name an event (never by its message).
// The event's object as log lines name it ("pod/shop/web-0").
logging::Value ObjectOf(const Event& e) {
  const InvolvedObject& o = e.involved_object;
  return logging::KRef(o.kind, o.namespace_, o.name);
}

// The code, reason and the fields a Status names; never its message, which a server may build
// from the request's values.
std::string Summarize(const ApiError& error) {
  if (error.IsTransport()) return error.ToString();
  std::string out = std::to_string(error.code) + " " + error.reason;
  for (size_t i = 0; i < error.causes.size(); ++i) {
    out += (i == 0 ? " (fields: " : ", ") + error.causes[i].field;
    if (i + 1 == error.causes.size()) out += ")";
  }
  return out;
}

}  // namespace

EventRecorder::EventRecorder(ApiClient* api, EventRecorderOptions options)
    : api_(api), options_(std::move(options)), correlator_(options_.correlator) {
  retry_timer_ = base::NewTimer(api_->http()->loop(), this);
}

EventRecorder::~EventRecorder() {
  if (call_ != 0) api_->Cancel(call_);
  if (pending() > 0) spdlog::info("event recorder stopping: {} events not written", pending());
  base::CloseTimer(retry_timer_);
}

EventTime EventRecorder::Now() const {
  return options_.clock ? options_.clock() : std::chrono::system_clock::now();
}

void EventRecorder::Record(const InvolvedObject& object, EventType type, std::string reason,
                           std::string message) {
  ++stats_.recorded;
  Event event;
  const EventTime now = Now();
  event.name = EventName(object.name, now);
  event.namespace_ = object.namespace_.empty() ? kDefaultNamespace : object.namespace_;
  event.involved_object = object;
  event.type = type == EventType::kWarning ? "Warning" : "Normal";
  event.reason = std::move(reason);
  event.message = CapEventMessage(std::move(message));
  event.component = options_.component;
  event.host = options_.host;
  event.first_timestamp = now;
  event.last_timestamp = now;
  if (queue_.size() >= options_.max_queued) {
    ++stats_.queue_full;
    if (stats_.queue_full == 1 || stats_.queue_full % 100 == 0) {
      logging::Warn("Event queue full; event dropped", {{"object", ObjectOf(event)},
                                                        {"reason", event.reason},
                                                        {"queued", queue_.size()},
                                                        {"droppedSoFar", stats_.queue_full}});
    }
    return;
  }
  queue_.push_back(std::move(event));
  Pump();
}

void EventRecorder::Pump() {
  while (!current_ && !queue_.empty()) {
    Event event = std::move(queue_.front());
    queue_.pop_front();
    EventCorrelator::Result correlated = correlator_.Correlate(std::move(event), Now());
    if (correlated.skip) {
      ++stats_.rate_limited;
      logging::Debug("Event rate-limited", {{"object", ObjectOf(correlated.event)},
                                            {"reason", correlated.event.reason},
                                            {"count", correlated.event.count}});
      continue;
    }
    current_ = Write{std::move(correlated), 0};
    Attempt();
  }
}

void EventRecorder::Attempt() {
  if (!current_) return;
  ++current_->attempts;
  const Event& event = current_->correlated.event;
  // The callback may run before Create/Patch return (a request that cannot start), and may start
  // the next write: call_ names this call only while it is still in flight.
  const uint64_t seq = ++attempt_seq_;
  auto done = [this, seq](ApiResult result) {
    completed_seq_ = seq;
    call_ = 0;
    OnWritten(std::move(result));
  };
  ApiClient::CallId id = current_->correlated.is_repeat
                             ? api_->Patch(EventsPath(event.namespace_) + "/" + event.name,
                                           event.RepeatPatch(), kStrategicMergePatch, done)
                             : api_->Create(EventsPath(event.namespace_), event.ToJson(), done);
  if (completed_seq_ < seq) call_ = id;
}

void EventRecorder::OnWritten(ApiResult result) {
  if (!current_) return;
  Write& write = *current_;
  Event& event = write.correlated.event;
  if (result.ok()) {
    event.resource_version.clear();
    if (result.object.is_object()) {
      auto metadata = result.object.find("metadata");
      if (metadata != result.object.end() && metadata->is_object()) {
        auto rv = metadata->find("resourceVersion");
        if (rv != metadata->end() && rv->is_string())
          event.resource_version = rv->get<std::string>();
      }
    }
    correlator_.UpdateState(write.correlated.key, event);
    ++(write.correlated.is_repeat ? stats_.patched : stats_.created);
    logging::Debug("Event written",
                   {{"object", ObjectOf(event)}, {"reason", event.reason}, {"count", event.count}});
    Finish();
    return;
  }
  const ApiError& error = *result.error;
  if (write.correlated.is_repeat && error.IsNotFound()) {
    // The event expired on the server: create it again under the same name.
    write.correlated.is_repeat = false;
    event.resource_version.clear();
    --write.attempts;  // the same attempt, as a POST
    Attempt();
    return;
  }
  if (error.code >= 400 && error.code < 500) {
    ++stats_.rejected;
    // A permanent failure (401) the client's health tracker holds is said there, at error level
    // and rate-limited, not once per event.
    const ApiHealth* health = api_->health();
    if (error.IsAlreadyExists() || error.HasCause("NamespaceTerminating") ||
        (health != nullptr && health->permanent() &&
         ClassifyApiError(error).failure_class == FailureClass::kPermanent)) {
      logging::Debug(
          "Event rejected; dropped",
          {{"object", ObjectOf(event)}, {"reason", event.reason}, {"err", Summarize(error)}});
    } else {
      logging::Error(
          "Event rejected by the API server; dropped",
          {{"object", ObjectOf(event)}, {"reason", event.reason}, {"err", Summarize(error)}});
    }
    Finish();
    return;
  }
  if (write.attempts >= options_.max_tries) {
    ++stats_.gave_up;
    logging::Error("Event not written; dropped", {{"object", ObjectOf(event)},
                                                  {"reason", event.reason},
                                                  {"attempts", write.attempts},
                                                  {"err", Summarize(error)}});
    Finish();
    return;
  }
  auto delay = options_.retry_interval;
  if (write.attempts == 1) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    delay = std::chrono::milliseconds(static_cast<long long>(
        std::uniform_real_distribution<double>(0, 1)(rng) * options_.retry_interval.count()));
  }
  ++stats_.retries;
  logging::Warn("Event not written; trying again", {{"object", ObjectOf(event)},
                                                    {"reason", event.reason},
                                                    {"err", Summarize(error)},
                                                    {"attempt", write.attempts + 1},
                                                    {"delayMs", delay.count()}});
  uv_timer_start(
      retry_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<EventRecorder*>(t->data);
        base::Status s = base::CatchAll("event write retry", [self] { self->Attempt(); });
        if (!s.ok()) {
          spdlog::error("event recorder: {}", s.message());
          self->Finish();
        }
      },
      static_cast<uint64_t>(delay.count()), 0);
}

void EventRecorder::Finish() {
  current_.reset();
  Pump();
}

}  // namespace kubeclient
