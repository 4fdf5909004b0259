#include "server/admin_server.h"

#include <microhttpd.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>

#include "base/bind_address.h"
#include "base/catch_all.h"

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

void LogFromMhd(void* cls, const char* format, va_list ap) {
  (void)cls;
  char buf[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(buf, sizeof(buf), format, copy);
  va_end(copy);
  std::string line(buf);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  base::CatchAll("admin server log", [&] { spdlog::warn("admin server: {}", line); }).IgnoreError();
}

MHD_Result Send(MHD_Connection* connection, const AdminServer::Response& r) {
  MHD_Response* response = MHD_create_response_from_buffer(
      r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  const MHD_Result queued = MHD_queue_response(connection, r.status, response);
  MHD_destroy_response(response);
  return queued;
}

// libmicrohttpd's access handler: a C callback, so its body runs inside CatchAll.
MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url, const char* method,
                     const char* version, const char* upload_data, size_t* upload_data_size,
                     void** con_cls) {
  (void)version;
  (void)upload_data;
  (void)upload_data_size;
  (void)con_cls;
  auto* listener = static_cast<AdminServer::Listener*>(cls);
  AdminServer::Response response;
  base::Status s = base::CatchAll("admin server request", [&] {
    const std::string m = method;
    if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD) {
      response = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
      return;
    }
    // "?verbose" has no value: look it up by presence.
    const char* value = nullptr;
    const bool verbose =
        MHD_lookup_connection_value_n(connection, MHD_GET_ARGUMENT_KIND, "verbose",
                                      sizeof("verbose") - 1, &value, nullptr) == MHD_YES;
    response = listener->server->Serve(listener->debug, url, verbose);
  });
  if (!s.ok()) {
    response = {500, "text/plain; charset=utf-8", "internal error\n"};
    base::CatchAll("admin server log", [&] { spdlog::error("{}", s.message()); }).IgnoreError();
  }
  return Send(connection, response);
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

AdminServer::AdminServer(AdminServerOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = &std::chrono::steady_clock::now;
  heartbeat_ns_.store(Nanos(options_.clock()));
}

base::Result<std::unique_ptr<AdminServer>> AdminServer::Start(AdminServerOptions options) {
  std::unique_ptr<AdminServer> server(new AdminServer(std::move(options)));
  if (!server->options_.healthz_address.empty()) {
    base::Status s = server->Listen(server->options_.healthz_address, &server->probe_listener_,
                                    &server->probe_, &server->healthz_bound_);
    if (!s.ok()) return s.WithContext(server->options_.healthz_name);
  }
  if (!server->options_.debug_address.empty()) {
    base::Status s = server->Listen(server->options_.debug_address, &server->debug_listener_,
                                    &server->debug_, &server->debug_bound_);
    if (!s.ok()) return s.WithContext(server->options_.debug_name);
  }
  return server;
}

base::Status AdminServer::Listen(const std::string& address, Listener* listener,
                                 MHD_Daemon** daemon, std::string* bound) {
  auto addr = base::ParseBindAddress(address);
  if (!addr.ok()) return addr.status();
  unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_ERROR_LOG;
  if (addr->ipv6) flags |= MHD_USE_IPv6;
  // The port argument is ignored when MHD_OPTION_SOCK_ADDR is given. The logger goes first, so
  // that it sees the other options' errors.
  *daemon = MHD_start_daemon(
      flags, static_cast<uint16_t>(addr->port), nullptr, nullptr, &OnRequest, listener,
      MHD_OPTION_EXTERNAL_LOGGER, &LogFromMhd, nullptr, MHD_OPTION_SOCK_ADDR,
      reinterpret_cast<const sockaddr*>(&addr->addr), MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(30), MHD_OPTION_END);
  if (*daemon == nullptr) {
    return base::Status::Error(address + ": cannot listen (address in use or not on this host?)");
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(*daemon, MHD_DAEMON_INFO_BIND_PORT);
  const int port = info != nullptr ? info->port : addr->port;
  *bound = base::FormatBindAddress(addr->host, addr->ipv6, port);
  return base::Status::OK();
}

AdminServer::~AdminServer() {
  if (probe_ != nullptr) MHD_stop_daemon(probe_);
  if (debug_ != nullptr) MHD_stop_daemon(debug_);
}

void AdminServer::Beat() { heartbeat_ns_.store(Nanos(options_.clock())); }

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
    return snapshot_ != nullptr && snapshot_->seq >= want &&
           (!debug || snapshot_->debug_seq >= want_debug);
  });
  return snapshot_;
}

AdminServer::Response AdminServer::Healthz(bool verbose) const {
  const auto age = std::chrono::nanoseconds(Nanos(options_.clock()) - heartbeat_ns_.load());
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
  bool ok = true;
  for (const ReadinessCheck& c : snapshot->readiness) ok = ok && c.ok;
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
              RenderPrometheusText(snapshot->metrics)};
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
