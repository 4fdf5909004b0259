// Event and EventCorrelator: the core/v1 Event a component posts about an object, and client-go's
// rules for turning a stream of them into few writes (tools/record's EventCorrelator;
// docs/kubernetes-api.md §7). The correlator decides; EventRecorder (event_recorder.h) writes.
//
// For each event, in client-go's order:
//   1. Aggregation: events about one object that differ only in message are "similar". Within
//      `similar_window` of the previous similar one, the `max_similar`-th distinct message and
//      every later one become one event whose message is "(combined from similar events): "
//      followed by the latest message. A gap longer than the window starts afresh.
//   2. De-duplication: an event identical to one already written (same source, object, type,
//      reason and message; or the same combined event) is an update of that event: same name,
//      first timestamp kept, count + 1 (written as a PATCH of count, lastTimestamp, message).
//   3. Spam filter: a token bucket per source + object, `spam_burst` tokens, one more every
//      `spam_refill_interval`; an event that finds it empty is skipped (step 2 still counted it).
// Every cache is an LRU of at most `cache_size` entries (client-go: 4096), so memory is bounded
// whatever the number of objects.
//
// The correlator never adds text of its own to a message beyond the fixed combined prefix, and
// caps every message below 1 KiB. Not thread-safe; time comes from the caller (tests use a fake).
#ifndef VOLUMEMANAGER_KUBECLIENT_EVENTS_EVENT_CORRELATOR_H_
#define VOLUMEMANAGER_KUBECLIENT_EVENTS_EVENT_CORRELATOR_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace kubeclient {

using EventTime = std::chrono::system_clock::time_point;

// The object an event is about (core/v1 ObjectReference, the fields the daemon sets).
struct InvolvedObject {
  std::string kind;         // "Pod"
  std::string api_version;  // "v1"
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;

  // "Pod shop/web-0": how logs name it.
  std::string ToString() const { return kind + " " + namespace_ + "/" + name; }
};

struct Event {
  std::string name;              // metadata.name
  std::string namespace_;        // metadata.namespace: the involved object's, else "default"
  std::string resource_version;  // metadata.resourceVersion, as the server last returned it
  InvolvedObject involved_object;
  std::string type;  // "Normal" or "Warning"
  std::string reason;
  std::string message;
  std::string component;  // source.component and reportingComponent
  std::string host;       // source.host and reportingInstance
  EventTime first_timestamp;
  EventTime last_timestamp;
  int32_t count = 1;

  // The body of the POST that creates it.
  nlohmann::json ToJson() const;
  // The body of the PATCH that records a repeat: count, lastTimestamp and message.
  nlohmann::json RepeatPatch() const;
};

// Messages are cut to at most this many bytes (at a UTF-8 boundary, "..." appended).
inline constexpr size_t kMaxEventMessageBytes = 1023;

// `message` cut to kMaxEventMessageBytes.
std::string CapEventMessage(std::string message);
// "<object name>.<unix nanoseconds, lower-case hex>", or a random UUID when that is not a valid
// DNS subdomain (client-go's and the kubelet's event names).
std::string EventName(const std::string& object_name, EventTime now);
// RFC 3339 in UTC, seconds precision: "2025-03-01T10:00:00Z".
std::string FormatEventTime(EventTime t);

inline constexpr char kCombinedEventPrefix[] = "(combined from similar events): ";

struct EventCorrelatorOptions {
  size_t cache_size = 4096;
  int spam_burst = 25;
  std::chrono::seconds spam_refill_interval{300};
  size_t max_similar = 10;
  std::chrono::seconds similar_window{600};
};

// A map from string keys with least-recently-used eviction beyond `capacity` entries.
template <typename V>
class LruMap {
 public:
  explicit LruMap(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  // The value (now the most recently used), or nullptr.
  V* Get(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->second;
  }
  void Put(const std::string& key, V value) {
    if (V* existing = Get(key)) {
      *existing = std::move(value);
      return;
    }
    entries_.emplace_front(key, std::move(value));
    index_[key] = entries_.begin();
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
  }
  size_t size() const { return entries_.size(); }

 private:
  size_t capacity_;
  std::list<std::pair<std::string, V>> entries_;  // most recently used first
  std::unordered_map<std::string, typename std::list<std::pair<std::string, V>>::iterator> index_;
};

class EventCorrelator {
 public:
  struct Result {
    Event event;             // what to write (renamed, counted or combined as decided)
    bool skip = false;       // rate-limited: write nothing
    bool is_repeat = false;  // write as a PATCH of the existing event (count > 1)
    std::string key;         // for UpdateState after the write
  };
  struct Sizes {
    size_t aggregate = 0;
    size_t observed = 0;
    size_t spam = 0;
  };

  explicit EventCorrelator(EventCorrelatorOptions options = {});

  Result Correlate(Event event, EventTime now);
  // After a successful write: the event as written, with the server's resourceVersion.
  void UpdateState(const std::string& key, const Event& written);

  Sizes sizes() const { return {aggregate_.size(), observed_.size(), spam_.size()}; }

 private:
  struct AggregateRecord {
    std::set<std::string> messages;
    EventTime last;
  };
  struct Observation {
    int32_t count = 0;
    EventTime first_timestamp;
    std::string name;
    std::string resource_version;
  };
  struct TokenBucket {
    double tokens = 0;
    EventTime last;
  };

  EventCorrelatorOptions options_;
  LruMap<AggregateRecord> aggregate_;
  LruMap<Observation> observed_;
  LruMap<TokenBucket> spam_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_EVENTS_EVENT_CORRELATOR_H_
