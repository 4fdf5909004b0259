#include "kubeclient/events/event_correlator.h"

#include <algorithm>
#include <cstdio>

#include "base/random_uuid.h"
#include "base/rfc3339.h"

namespace kubeclient {
namespace {

// Keys join fields with a byte no field carries, so that ("ab", "c") and ("a", "bc") differ.
std::string JoinKey(std::initializer_list<const std::string*> fields) {
  std::string key;
  for (const std::string* f : fields) {
    key += *f;
    key += '\x1f';
  }
  return key;
}

// Source and object: the spam filter's key.
std::string SpamKey(const Event& e) {
  const InvolvedObject& o = e.involved_object;
  return JoinKey({&e.component, &e.host, &o.kind, &o.namespace_, &o.name, &o.uid, &o.api_version});
}

// Source, object, type and reason: the key of similar events (the message left out).
std::string AggregateKey(const Event& e) {
  const InvolvedObject& o = e.involved_object;
  return JoinKey({&e.component, &e.host, &o.kind, &o.namespace_, &o.name, &o.uid, &o.api_version,
                  &e.type, &e.reason});
}

// Everything that makes an event identical: the de-duplication key.
std::string EventKey(const Event& e) { return AggregateKey(e) + e.message; }

bool IsDnsSubdomain(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  char prev = '.';
  for (char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.') return false;
    // Each dot-separated label starts and ends alphanumeric.
    if (c == '.' && prev == '-') return false;
    if ((c == '-' || c == '.') && prev == '.') return false;
    prev = c;
  }
  return prev != '-' && prev != '.';
}

}  // namespace

std::string CapEventMessage(std::string message) {
  if (message.size() <= kMaxEventMessageBytes) return message;
  size_t cut = kMaxEventMessageBytes - 3;
  // Back off continuation bytes (10xxxxxx) so that no UTF-8 sequence is split.
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xc0) == 0x80) --cut;
  message.resize(cut);
  message += "...";
  return message;
}

std::string EventName(const std::string& object_name, EventTime now) {
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(nanos));
  std::string name = object_name + "." + hex;
  return IsDnsSubdomain(name) ? name : base::RandomUuid();
}

std::string FormatEventTime(EventTime t) { return base::FormatRfc3339(t); }

nlohmann::json Event::ToJson() const {
  const InvolvedObject& o = involved_object;
  nlohmann::json involved = {{"kind", o.kind}, {"namespace", o.namespace_}, {"name", o.name}};
  if (!o.api_version.empty()) involved["apiVersion"] = o.api_version;
  if (!o.uid.empty()) involved["uid"] = o.uid;
  if (!o.resource_version.empty()) involved["resourceVersion"] = o.resource_version;
  nlohmann::json metadata = {{"name", name}, {"namespace", namespace_}};
  if (!resource_version.empty()) metadata["resourceVersion"] = resource_version;
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", metadata},
          {"involvedObject", involved},
          {"reason", reason},
          {"type", type},
          {"message", message},
          {"source", {{"component", component}, {"host", host}}},
          {"reportingComponent", component},
          {"reportingInstance", host},
          {"firstTimestamp", FormatEventTime(first_timestamp)},
          {"lastTimestamp", FormatEventTime(last_timestamp)},
          {"count", count}};
}

nlohmann::json Event::RepeatPatch() const {
  return {
      {"count", count}, {"lastTimestamp", FormatEventTime(last_timestamp)}, {"message", message}};
}

EventCorrelator::EventCorrelator(EventCorrelatorOptions options)
    : options_(options),
      aggregate_(options.cache_size),
      observed_(options.cache_size),
      spam_(options.cache_size) {}

EventCorrelator::Result EventCorrelator::Correlate(Event event, EventTime now) {
  event.message = CapEventMessage(std::move(event.message));
  Result result;

  // 1. Aggregation of similar events.
  const std::string aggregate_key = AggregateKey(event);
  AggregateRecord record;
  if (AggregateRecord* cached = aggregate_.Get(aggregate_key)) record = *cached;
  if (now - record.last > options_.similar_window) record = AggregateRecord{};
  record.messages.insert(event.message);
  record.last = now;
  if (record.messages.size() < options_.max_similar) {
    aggregate_.Put(aggregate_key, std::move(record));
    result.key = EventKey(event);
  } else {
    // Keep the set from growing past the limit; any member will do.
    record.messages.erase(record.messages.begin());
    aggregate_.Put(aggregate_key, std::move(record));
    Event combined;
    combined.name = EventName(event.involved_object.name, now);
    combined.namespace_ = event.namespace_;
    combined.involved_object = event.involved_object;
    combined.type = event.type;
    combined.reason = event.reason;
    combined.message = CapEventMessage(kCombinedEventPrefix + event.message);
    combined.component = event.component;
    combined.host = event.host;
    combined.first_timestamp = now;
    combined.last_timestamp = now;
    combined.count = 1;
    event = std::move(combined);
    result.key = aggregate_key;
  }

  // 2. De-duplication against what was written before under the same key.
  if (const Observation* seen = observed_.Get(result.key); seen != nullptr && seen->count > 0) {
    event.name = seen->name;
    event.resource_version = seen->resource_version;
    event.first_timestamp = seen->first_timestamp;
    event.count = seen->count + 1;
    result.is_repeat = true;
  }
  observed_.Put(result.key, Observation{event.count, event.first_timestamp, event.name,
                                        event.resource_version});

  // 3. The spam filter: a token bucket per source + object.
  const std::string spam_key = SpamKey(event);
  TokenBucket bucket{static_cast<double>(options_.spam_burst), now};
  if (TokenBucket* cached = spam_.Get(spam_key)) bucket = *cached;
  if (now > bucket.last) {
    const double refill = std::chrono::duration<double>(now - bucket.last).count() /
                          std::chrono::duration<double>(options_.spam_refill_interval).count();
    bucket.tokens = std::min(static_cast<double>(options_.spam_burst), bucket.tokens + refill);
    bucket.last = now;
  }
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
  } else {
    result.skip = true;
  }
  spam_.Put(spam_key, bucket);

  result.event = std::move(event);
  return result;
}

void EventCorrelator::UpdateState(const std::string& key, const Event& written) {
  observed_.Put(key, Observation{written.count, written.first_timestamp, written.name,
                                 written.resource_version});
}

}  // namespace kubeclient
