// Reflector: keeps an ObjectStore equal to one collection on the API server (optionally narrowed
// by field and label selectors) with list + watch, following client-go's reflector
// (docs/kubernetes-api.md §4.7 and the robustness table of §9).
//
// * List: RV "0" on first start, then the last synced RV (not older than), or "" after a 410 or
//   a too-large-RV answer. Pages of `page_size` for RV ""/"0"; a 410 on a continue page drops the
//   pages and lists once, unpaged, at the original RV. A successful list replaces the store
//   (absent objects are deletions, unchanged RVs are no-ops) and sets the synced RV.
// * Watch from the synced RV with bookmarks and a random timeoutSeconds in
//   [min_watch_timeout, max_watch_timeout). Each applied event (BOOKMARK included) advances the
//   synced RV; it never moves backwards. Replayed events (same RV as cached) are no-ops; DELETED
//   for an unknown object is ignored; ADDED for a known one is an update; an object of another
//   kind is skipped and logged.
// * A stream that ends (normally, EOF, reset, cut mid-event) re-watches at once from the last
//   fully applied RV; a watch silent past timeoutSeconds + `watchdog_grace` is ended the same
//   way. A periodic relist (`resync_period`, 0 = off) bounds how long a watch that silently lost
//   events can go unnoticed.
// * Two backoffs, as client-go's reflector keeps two (its backoffManager and
//   initConnBackoffManager; each 800 ms doubling to 30 s, jitter 1.0, reset after 2 min without
//   a wait), so that a relist never waits out a delay that an outage grew, nor the other way:
//   - the relist backoff (`relist_backoff`), before a relist after the server answered with a
//     failure: a 410 (HTTP status at watch set-up, or an ERROR event), any other ERROR event, an
//     HTTP error at watch set-up or on a list (403, 404, 5xx, ...); after undecodable watch data
//     (bad JSON, unknown type, over `max_event_bytes`) or a watch ending within `short_watch`
//     with no events. A 401 at watch set-up re-watches after it without relisting (the token is
//     read again; the RV is still good).
//   - the reconnect backoff (`reconnect_backoff`), when a request got no HTTP response at all
//     (refused, reset before the answer, TLS, timeout): a watch is opened again from its RV, a
//     list is sent again (client-go waits for a list on its relist backoff: an outage during a
//     relist would grow it); and for a 429 at watch set-up (HTTP or ERROR event: the server sheds
//     load), re-watched without relisting, as client-go after 1.20 does.
// * A wait after no answer also ends as soon as the server answers again: the ApiClient's
//   ServerReachability (server_reachability.h) probes the server about once a second while
//   someone waits, one probe for all of them, and wakes every waiter at the first answer after a
//   probe got none. The woken retries go through the client's rate limiter. So a reconnect comes
//   about a second after the server is back, however long the outage grew the backoff, while a
//   daemon with thousands of reflectors asks a dead server once a second more than client-go's
//   backoffs do (each reflector's own retry still goes when its backoff ends, up to 30 s apart),
//   not thousands of times. A reflector whose request alone failed (the probe answered) waits its
//   backoff out.
// * Within the reconnect grace after such a reconnect (ServerReachability::InReconnectGrace:
//   a restarted server's Node authorizer refuses reads until its graph fills), a 403 is relisted
//   after at most `grace_retry_delay` (1 s) and logged at debug level; later, as any HTTP error.
// * Losing the API server never changes the store: during a relist the old contents stay until
//   the new list has fully arrived.
// * Every list page and watch set-up goes through the ApiClient, so its rate limiter paces them.
// Handlers run on the loop thread, after the store is updated; they must not destroy the
// Reflector. An exception from a handler is logged and swallowed. Not thread-safe.
#ifndef VOLUMEMANAGER_KUBECLIENT_WATCH_REFLECTOR_H_
#define VOLUMEMANAGER_KUBECLIENT_WATCH_REFLECTOR_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kubeclient/api_client.h"
#include "kubeclient/backoff.h"
#include "kubeclient/watch/object_store.h"
#include "kubeclient/watch/watch_decoder.h"

namespace kubeclient {

struct ReflectorOptions {
  // Collection path: "/api/v1/pods", "/api/v1/namespaces/shop/configmaps".
  std::string path;
  // Unescaped selectors, e.g. "spec.nodeName=node-1", "metadata.name=app-config".
  std::string field_selector;
  std::string label_selector;
  // Kind and apiVersion of the objects ("Pod", "v1"): list items get them filled in, and watch
  // events of another kind are skipped. Empty: no check.
  std::string kind;
  std::string api_version;
  // For logs (key "reflector"), e.g. "pods on node-1".
  std::string description;
  // The one object watched as "kind/namespace/name", when there is one: its lines carry it as
  // their "object" key, as every line about an object does.
  std::string object;
  int page_size = 500;
  std::chrono::seconds min_watch_timeout{300};
  std::chrono::seconds max_watch_timeout{600};
  std::chrono::milliseconds watchdog_grace{30000};
  std::chrono::milliseconds short_watch{1000};
  std::chrono::milliseconds resync_period{std::chrono::minutes(30)};
  size_t max_event_bytes = WatchDecoder::kDefaultMaxEventBytes;
  // The two backoffs (header comment): before a relist after an answered failure, and before a
  // retry of a request that got no answer (or a 429's re-watch).
  BackoffOptions relist_backoff{};
  BackoffOptions reconnect_backoff{};
  // False: the store keeps each object's identity only (its resourceVersion; the name and
  // namespace are the key's), for owners that take what they need from the handlers' new
  // objects. The handlers' `old_object` and, for a deletion found by a relist, `last_state` are
  // then that identity as an object ({"metadata": {name, namespace, resourceVersion}}). A
  // watched ConfigMap costs about 2.5 KiB of heap in full, an identity about 50 bytes.
  bool keep_objects = true;
};

struct ReflectorHandlers {
  std::function<void(const nlohmann::json& object)> on_add;
  std::function<void(const nlohmann::json& old_object, const nlohmann::json& new_object)> on_update;
  std::function<void(const nlohmann::json& last_state)> on_delete;
  // After every successful list (the store is then complete as of that list's RV).
  std::function<void()> on_synced;
  // When a list, or a watch at set-up, is answered with an HTTP error (403, 404, 5xx, ...; not a
  // transport failure, and not the 410 or too-large answers the reflector handles itself), before
  // it waits out the backoff: the owner can tell its readers why nothing was listed (a 403 within
  // the reconnect grace too: the owner decides what it makes of it).
  std::function<void(const ApiError& error)> on_error;
};

class Reflector {
 public:
  struct Stats {
    int lists = 0;  // successful lists
    int list_failures = 0;
    int watches = 0;  // watch requests started
    int events = 0;   // ADDED/MODIFIED/DELETED applied
    int bookmarks = 0;
    int decode_errors = 0;
    int expired = 0;  // 410s seen (list, watch set-up or ERROR event)
    int error_events = 0;
    int skipped_wrong_kind = 0;
    int watchdog_fired = 0;
    int short_watches = 0;
    int backoff_waits = 0;    // waits before a retry, on either backoff
    int relist_waits = 0;     // on the relist backoff
    int reconnect_waits = 0;  // on the reconnect backoff
    int woken_by_answer = 0;  // waits after no answer ended early: the server answered again
    int grace_refusals = 0;   // 403s within the reconnect grace (relisted within 1 s)
    std::chrono::milliseconds last_delay{0};  // the delay the last wait chose
  };

  Reflector(ApiClient* api, ReflectorOptions options, ReflectorHandlers handlers);
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void Start();
  // Stops listing and watching; no handler runs afterwards. The store keeps its contents.
  void Stop();

  const ObjectStore& store() const { return store_; }
  const std::string& last_sync_resource_version() const { return last_sync_rv_; }
  // True once a list has completed.
  bool synced() const { return stats_.lists > 0; }
  const Stats& stats() const { return stats_; }

 private:
  enum class Phase { kIdle, kListing, kWatching, kWaiting, kStopped };

  void ListNow();
  void RequestPage(const std::string& continue_token);
  void OnPage(ApiResult result, const std::string& continue_token);
  void Replace(const std::string& list_rv);
  // What the store keeps of `object` (see ReflectorOptions::keep_objects).
  nlohmann::json Stored(const nlohmann::json& object) const;
  void StartWatch();
  bool OnWatchData(std::string_view data);
  // False when the stream must end (ERROR event).
  bool ApplyEvent(WatchEvent& event);
  void OnWatchEnded(base::Status transport, const HttpResponse& response);
  void CancelWatch();
  // Once the watch is sent: starts its clocks (short-watch measure, watchdog).
  void ArmWatchdog(long long timeout_s);
  // Which backoff a retry waits on (header comment).
  enum class Wait {
    kRelist,     // the relist backoff
    kNoAnswer,   // the reconnect backoff, ended early when the server answers again
    kThrottled,  // the reconnect backoff (a 429)
  };
  // `code`: the HTTP code of the failure (0: none).
  void ScheduleRelist(const std::string& why, Wait wait = Wait::kRelist, long code = 0);
  void ScheduleRewatch(const std::string& why, Wait wait, long code = 0);
  void ScheduleRetry(void (Reflector::*next)(), const char* message, const std::string& why,
                     Wait wait, long code);
  // The retry line: a warning when `why` differs from the last retry's, else at debug level; a
  // relist after a 410 at least at info; a 403 within the reconnect grace at debug.
  void LogRetry(const char* message, const std::string& why, std::chrono::milliseconds delay,
                long code, bool grace);
  void After(std::chrono::milliseconds delay, void (Reflector::*next)(), bool until_answer);
  // The server answered again while a retry after no answer waited: it goes now.
  void OnAnswerAgain();
  void CancelAnswerWait();
  void SetSyncedRv(const std::string& rv);
  // Runs a handler of the owner's; what it throws is logged.
  template <typename F>
  void CallHandler(const char* what, F&& f);
  // Runs the body of a libuv or libcurl callback; a throw is logged and the reflector relists
  // after backoff.
  template <typename F>
  void Guarded(const char* where, F&& body);

  ApiClient* api_;
  ReflectorOptions options_;
  ReflectorHandlers handlers_;
  ObjectStore store_;
  Stats stats_;
  Backoff relist_backoff_;
  // Made on the first retry after no answer or a 429 (most reflectors never lose their server).
  std::unique_ptr<Backoff> reconnect_backoff_;
  // Waiting for the server to answer again (ServerReachability), besides the retry timer.
  ServerReachability::Ticket answer_wait_ = 0;
  Phase phase_ = Phase::kIdle;
  std::string last_sync_rv_;
  bool rv_unavailable_ = false;

  // The list in progress.
  ApiClient::CallId list_call_ = 0;
  bool list_in_flight_ = false;
  std::string list_rv_;  // the RV asked for
  bool list_paged_ = false;
  std::vector<nlohmann::json> pages_;

  // The watch in progress.
  ApiClient::CallId watch_request_ = 0;
  bool watch_in_flight_ = false;
  std::unique_ptr<WatchDecoder> decoder_;
  std::chrono::steady_clock::time_point watch_started_;
  int watch_events_ = 0;
  long watch_status_ = 0;
  // Heap, not inline: an ApiError is about 230 bytes and an ERROR event is rare, while a daemon
  // holds a reflector per watched object.
  std::unique_ptr<ApiError> watch_error_;
  std::optional<std::string> decode_error_;
  // The reason of the last retry logged as a warning since the last successful list (heap: most
  // reflectors never retry).
  std::unique_ptr<std::string> last_warned_;

  uv_timer_t* retry_timer_ = nullptr;  // created on the first wait (most reflectors never wait)
  uv_timer_t* watchdog_timer_;
  uv_timer_t* resync_timer_;
  void (Reflector::*pending_)() = nullptr;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_WATCH_REFLECTOR_H_
