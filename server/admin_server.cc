#include "server/admin_server.h"

#include <unistd.h>

#include <cstdio>
#include <utility>
#include <vector>

namespace server {
namespace {

int64_t Nanos(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string Seconds(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", std::chrono::duration<double>(d).count());
  return buf;
}

std::string ChecksText(const std::vector<ReadinessCheck>& checks, bool verbose) {
  std::string out;
  for (const ReadinessCheck& c : checks) {
    if (c.ok) {
      out += "[+]" + c.name + " ok\n";
    } else {
      out += "[-]" + c.name + " failed: " + (verbose ? c.detail : "reason withheld") + "\n";
    }
  }
  return out;
}

}  // namespace

std::vector<MetricFamily> ScrapeTimeMetrics(const Snapshot& snapshot, const ProcessStats& process) {
  std::vector<MetricFamily> out;
  MetricFamily ready;
  ready.name = "volumemanager_ready";
  ready.help =
      "1 when /readyz answers 200 (every readiness check holds), else 0; /readyz?verbose names "
      "the checks that fail";
  ready.type = MetricType::kGauge;
  ready.values.push_back({{}, AllReady(snapshot.readiness) ? 1.0 : 0.0});
  out.push_back(std::move(ready));
  for (MetricFamily& f : ProcessMetricFamilies(process)) out.push_back(std::move(f));
  return out;
}

AdminServer::AdminServer(AdminServerOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = &std::chrono::steady_clock::now;
  heartbeat_ns_.store(Nanos(options_.clock()));
}

base::Result<std::unique_ptr<AdminServer>> AdminServer::Start(AdminServerOptions options) {
  std::unique_ptr<AdminServer> server(new AdminServer(std::move(options)));
  // Listener i of the HttpServer serves the debug endpoints when debug[i].
  std::vector<HttpServer::Listener> listeners;
  std::vector<bool> debug;
  auto close_all = [&listeners] {
    for (const HttpServer::Listener& l : listeners) ::close(l.fd);
  };
  for (bool is_debug : {false, true}) {
    const AdminServerOptions& o = server->options_;
    const std::string& address = is_debug ? o.debug_address : o.healthz_address;
    if (address.empty()) continue;
    std::string* bound = is_debug ? &server->debug_bound_ : &server->healthz_bound_;
    base::Result<int> fd = HttpServer::Listen(address, bound);
    if (!fd.ok()) {
      close_all();
      return fd.status().WithContext(is_debug ? o.debug_name : o.healthz_name);
    }
    listeners.push_back({*fd, is_debug ? kDebugConnections : kProbeConnections});
    debug.push_back(is_debug);
  }
  if (listeners.empty()) return server;
  auto http = HttpServer::Start(
      std::move(listeners),
      [p = server.get(), debug](size_t listener, const HttpRequest& request) {
        return p->Handle(debug[listener], request);
      },
      HttpServer::Options{});
  if (!http.ok()) return http.status();
  server->http_ = std::move(http).value();
  return server;
}

AdminServer::~AdminServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  published_.notify_all();
  http_.reset();
}

AdminServer::Response AdminServer::Handle(bool debug, const HttpRequest& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    return {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  }
  // "?verbose" has no value: looked up by presence.
  return Serve(debug, request.path, QueryHas(request.query, "verbose"));
}

void AdminServer::Beat() {
  heartbeat_ns_.store(Nanos(options_.clock()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++beats_;
  }
  published_.notify_all();
}

AdminServer::Requests AdminServer::requests() const {
  return Requests{seq_.load(), debug_seq_.load()};
}

void AdminServer::Publish(std::shared_ptr<const Snapshot> snapshot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_ = std::move(snapshot);
  }
  published_.notify_all();
}

std::shared_ptr<const Snapshot> AdminServer::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

std::shared_ptr<const Snapshot> AdminServer::Fresh(bool debug) {
  const uint64_t want = ++seq_;
  const uint64_t want_debug = debug ? ++debug_seq_ : 0;
  if (options_.request_refresh) options_.request_refresh();
  std::unique_lock<std::mutex> lock(mu_);
  published_.wait_for(lock, options_.refresh_wait, [&] {
    return stopping_ || (snapshot_ != nullptr && snapshot_->seq >= want &&
                         (!debug || snapshot_->debug_seq >= want_debug));
  });
  return snapshot_;
}

AdminServer::Response AdminServer::Healthz(bool verbose) {
  auto age = std::chrono::nanoseconds(Nanos(options_.clock()) - heartbeat_ns_.load());
  if (age >= options_.liveness_timeout && options_.request_beat) {
    // No recent beat: ask for one, which an idle loop answers within a millisecond.
    uint64_t before = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      before = beats_;
    }
    options_.request_beat();
    std::unique_lock<std::mutex> lock(mu_);
    const bool beaten =
        published_.wait_for(lock, options_.beat_wait, [&] { return stopping_ || beats_ > before; });
    if (beaten && !stopping_) age = std::chrono::nanoseconds(0);
  }
  if (age < options_.liveness_timeout) {
    return {200, "text/plain; charset=utf-8",
            verbose ? "[+]loop ok\nhealthz check passed\n" : "ok"};
  }
  return {500, "text/plain; charset=utf-8",
          "[-]loop failed: the event loop has not answered for " + Seconds(age) + " (limit " +
              Seconds(options_.liveness_timeout) + ")\nhealthz check failed\n"};
}

AdminServer::Response AdminServer::Readyz(bool verbose) {
  std::shared_ptr<const Snapshot> snapshot = Fresh(false);
  if (snapshot == nullptr) {
    return {503, "text/plain; charset=utf-8",
            "[-]started failed: " +
                std::string(verbose ? "no state published yet" : "reason withheld") +
                "\nreadyz check failed\n"};
  }
  const bool ok = AllReady(snapshot->readiness);
  if (ok && !verbose) return {200, "text/plain; charset=utf-8", "ok"};
  return {ok ? 200u : 503u, "text/plain; charset=utf-8",
          ChecksText(snapshot->readiness, verbose) +
              (ok ? "readyz check passed\n" : "readyz check failed\n")};
}

AdminServer::Response AdminServer::Serve(bool debug, const std::string& path, bool verbose) {
  if (!debug) {
    if (path == "/healthz") return Healthz(verbose);
    if (path == "/readyz") return Readyz(verbose);
    if (path == "/metrics") {
      std::shared_ptr<const Snapshot> snapshot = Fresh(false);
      if (snapshot == nullptr) return {503, "text/plain; charset=utf-8", "no metrics yet\n"};
      return {200, "text/plain; version=0.0.4; charset=utf-8",
              RenderPrometheusText(snapshot->metrics) +
                  RenderPrometheusText(ScrapeTimeMetrics(*snapshot, ReadProcessStats()))};
    }
  } else {
    if (path == "/debug/state") {
      std::shared_ptr<const Snapshot> snapshot = Fresh(true);
      if (snapshot == nullptr || snapshot->debug_state == nullptr) {
        return {503, "text/plain; charset=utf-8", "the event loop has not answered\n"};
      }
      return {200, "application/json",
              snapshot->debug_state->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                  "\n"};
    }
    if (path == "/configz") {
      // Fresh: a dynamic config changes it while the daemon runs.
      std::shared_ptr<const Snapshot> snapshot = Fresh(false);
      if (snapshot == nullptr || snapshot->configz == nullptr) {
        return {503, "text/plain; charset=utf-8", "the event loop has not answered\n"};
      }
      return {
          200, "application/json",
          snapshot->configz->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
    }
  }
  return {404, "text/plain; charset=utf-8", "404 page not found\n"};
}

}  // namespace server
