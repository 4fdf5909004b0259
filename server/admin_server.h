// AdminServer: the daemon's admin HTTP endpoints (HttpServer, http_server.h), on two listeners:
//  * the probe address (--healthz-bind-address): /healthz, /readyz, /metrics;
//  * the debug address (--debug-bind-address, loopback by default): /debug/state, /configz,
//    which name every pod and object on the node.
// Either address may be empty (not served); port 0 binds a free port (see bound addresses).
//
// Threads: HttpServer's acceptor plus one thread per open connection, each listener with its own
// budget (kProbeConnections, kDebugConnections): whatever is done to the debug listener, the
// probe listener's connections stay free for the kubelet's probes and the metrics scraper, and on
// either, idle and slow clients are closed to make room for new ones (http_server.h). Handlers read
// only what the loop thread hands over: a heartbeat (Beat, an atomic time) and immutable Snapshots
// (Publish). A handler that needs a snapshot asks for a new one through `request_refresh`
// (thread-safe; the loop thread then builds and publishes it) and waits at most `refresh_wait` for
// it; when the loop does not answer in time it serves the last snapshot published, so /metrics and
// /debug/state still answer while the loop is stuck.
//
//  * /healthz: 200 "ok" while the loop thread's last heartbeat is younger than
//    `liveness_timeout`; otherwise the handler asks the loop for one (`request_beat`) and waits
//    at most `beat_wait` for it: 200 when it comes, 500 naming the last one's age when not. The
//    loop beats only when asked (or when it publishes), so an idle daemon wakes for a probe, not
//    on a timer. Nothing else: the API server's health never restarts the daemon.
//  * /readyz: 200 "ok" when every ReadinessCheck holds, 503 otherwise; the body lists the checks
//    ("[+]name ok" / "[-]name failed: ..."), with what is missing only under ?verbose.
//  * /metrics: the Prometheus text format: the snapshot's families, then what the scrape reads
//    itself on the server's thread (ScrapeTimeMetrics: readiness as a gauge, the process_*
//    families read from /proc).
//  * /debug/state, /configz: JSON.
// Only GET and HEAD; anything else is 405, an unknown path 404.
#ifndef VOLUMEMANAGER_SERVER_ADMIN_SERVER_H_
#define VOLUMEMANAGER_SERVER_ADMIN_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/http_server.h"
#include "server/process_metrics.h"
#include "server/snapshot.h"

namespace server {

// What /metrics adds to the snapshot's families when it is scraped, on the server's thread:
// volumemanager_ready (1 when /readyz would answer 200 on that snapshot, from the same checks),
// then the process_* families of `process` (process_metrics.h).
std::vector<MetricFamily> ScrapeTimeMetrics(const Snapshot& snapshot, const ProcessStats& process);

struct AdminServerOptions {
  std::string healthz_address;  // "IP:PORT"; "" = not served
  std::string debug_address;    // "IP:PORT"; "" = not served
  // How errors name the two addresses (e.g. the flags that set them).
  std::string healthz_name = "healthz address";
  std::string debug_name = "debug address";
  std::chrono::nanoseconds liveness_timeout = std::chrono::seconds(2);
  std::chrono::milliseconds refresh_wait{1000};
  // Called on a server thread (thread-safe, returns at once): /healthz wants the loop to Beat.
  // Unset: /healthz judges the last heartbeat's age alone.
  std::function<void()> request_beat;
  // Under the kubelet's default probe timeout (1 s), so a slow answer is a 500, not a timeout.
  std::chrono::milliseconds beat_wait{500};
  // Called on a server thread (must be thread-safe and return at once): a handler wants a
  // snapshot newer than Requests(); e.g. a uv_async_send to the loop.
  std::function<void()> request_refresh;
  // The steady clock, for tests.
  std::function<std::chrono::steady_clock::time_point()> clock = &std::chrono::steady_clock::now;
};

class AdminServer {
 public:
  // Connections served at once on each listener (HttpServer::Listener::max_connections). The
  // probe listener sees the kubelet's probes (a connection each, closed after the answer) and a
  // scraper or two keeping theirs open: 16 is several times that. The debug listener is for a
  // person with curl. Together fewer than the 32 connections both listeners shared before.
  static constexpr size_t kProbeConnections = 16;
  static constexpr size_t kDebugConnections = 8;

  // Binds and starts serving; an error names the address that failed (the caller adds the flag).
  // The heartbeat counts from now.
  static base::Result<std::unique_ptr<AdminServer>> Start(AdminServerOptions options);
  // Stops both listeners; wakes handlers waiting for a snapshot and waits for them.
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // "IP:PORT" actually bound (the port chosen when 0 was asked), or "" when not served.
  const std::string& healthz_address() const { return healthz_bound_; }
  const std::string& debug_address() const { return debug_bound_; }

  // --- loop thread ---
  // The loop thread is alive now (wakes a /healthz waiting for it).
  void Beat();
  struct Requests {
    uint64_t seq = 0;        // any snapshot
    uint64_t debug_seq = 0;  // one with the debug state
  };
  // The refresh requests so far: a snapshot built after this call and carrying these numbers
  // answers them.
  Requests requests() const;
  void Publish(std::shared_ptr<const Snapshot> snapshot);

  // --- any thread ---
  std::shared_ptr<const Snapshot> latest() const;

  using Response = HttpResponse;
  // What a GET of `path` on the probe (`debug` false) or debug listener answers (server
  // threads).
  Response Serve(bool debug, const std::string& path, bool verbose);

 private:
  explicit AdminServer(AdminServerOptions options);
  // The answer to one request (a connection's thread).
  Response Handle(bool debug, const HttpRequest& request);
  Response Healthz(bool verbose);
  Response Readyz(bool verbose);
  // A snapshot published after the call (asking the loop for it), or the latest one when the
  // loop does not publish within refresh_wait; null when none was ever published.
  std::shared_ptr<const Snapshot> Fresh(bool debug);

  AdminServerOptions options_;
  std::unique_ptr<HttpServer> http_;
  std::string healthz_bound_;
  std::string debug_bound_;
  std::atomic<int64_t> heartbeat_ns_{0};
  uint64_t beats_ = 0;  // guarded by mu_: Beat calls so far
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> debug_seq_{0};
  mutable std::mutex mu_;
  std::condition_variable published_;
  std::shared_ptr<const Snapshot> snapshot_;  // guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
};

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_ADMIN_SERVER_H_
