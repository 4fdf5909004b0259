// EventRecorder: posts core/v1 Events about objects (FailedMount warnings on pods) through an
// ApiClient, with client-go's aggregation, de-duplication and rate limits (event_correlator.h)
// and its write rules (tools/record's recordToSink; docs/kubernetes-api.md §7):
//
//   * Record() never blocks and never fails: it queues the event (at most `max_queued`; beyond
//     that the event is dropped and counted). Events are written one at a time, in order, so a
//     repeat is correlated only once the event it repeats has been written.
//   * A new event is a POST to /api/v1/namespaces/<ns>/events; a repeat is a PATCH
//     (application/strategic-merge-patch+json) of count, lastTimestamp and message, and a POST
//     again when the PATCH answers 404 (the event expired on the server).
//   * A transport failure or a 5xx is tried again, `retry_interval` apart (the first wait random
//     in [0, retry_interval), so that nodes do not retry in step), at most `max_tries` attempts in
//     all; a 4xx drops the event (AlreadyExists and a terminating namespace quietly).
//   * Logs name the event by reason and object (kind namespace/name), never by message: nothing
//     the recorder writes anywhere carries text the caller did not pass, except the fixed combined
//     prefix, the component and the host.
//
// Thread model: a loop-thread object on the ApiClient's loop; Record, the destructor and every
// callback run there. The ApiClient must outlive the recorder. Destroying the recorder drops what
// is queued and cancels the write in flight.
#ifndef VOLUMEMANAGER_KUBECLIENT_EVENTS_EVENT_RECORDER_H_
#define VOLUMEMANAGER_KUBECLIENT_EVENTS_EVENT_RECORDER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "kubeclient/api_client.h"
#include "kubeclient/events/event_correlator.h"

namespace kubeclient {

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string component = "volumemanager";  // source.component, reportingComponent
  std::string host;                         // the node name: source.host, reportingInstance
  EventCorrelatorOptions correlator;
  int max_tries = 12;
  std::chrono::milliseconds retry_interval{10'000};
  size_t max_queued = 1000;
  // Wall-clock time for timestamps, names and the correlator; system_clock::now when empty.
  std::function<EventTime()> clock;
};

class EventRecorder {
 public:
  struct Stats {
    int recorded = 0;      // Record calls
    int created = 0;       // successful POSTs
    int patched = 0;       // successful PATCHes
    int rate_limited = 0;  // skipped by the spam filter
    int rejected = 0;      // dropped on a 4xx
    int retries = 0;       // attempts after a transport failure or 5xx
    int gave_up = 0;       // dropped after max_tries failed attempts
    int queue_full = 0;    // dropped because the queue was full
  };

  EventRecorder(ApiClient* api, EventRecorderOptions options);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues an event about `object`. `reason` is one UpperCamelCase word; `message` is cut below
  // 1 KiB and must carry no secret (the recorder posts it as given).
  void Record(const InvolvedObject& object, EventType type, std::string reason,
              std::string message);

  const Stats& stats() const { return stats_; }
  // Events waiting to be written, the one in flight included.
  size_t pending() const { return queue_.size() + (current_ ? 1 : 0); }

 private:
  struct Write {
    EventCorrelator::Result correlated;
    int attempts = 0;
  };

  EventTime Now() const;
  void Pump();
  void Attempt();
  void OnWritten(ApiResult result);
  void Finish();

  ApiClient* api_;
  EventRecorderOptions options_;
  EventCorrelator correlator_;
  std::deque<Event> queue_;
  std::optional<Write> current_;
  ApiClient::CallId call_ = 0;  // the write in flight, 0 when none
  uint64_t attempt_seq_ = 0;    // attempts started
  uint64_t completed_seq_ = 0;  // the last attempt whose callback ran
  uv_timer_t* retry_timer_;
  Stats stats_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_EVENTS_EVENT_RECORDER_H_
