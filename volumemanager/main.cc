// volumemanager: the daemon's binary. Parses the flags (or runs the `preflight` subcommand), sets
// up logging, and runs a Daemon (a ClusterDaemon with --kubeconfig or --in-cluster) on the
// default libuv loop until SIGTERM or SIGINT, after which the
// daemon takes no new work, lets in-flight writes finish and the process exits 0 (3 when they
// had not finished after 5 s).
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/catch_all.h"
#include "config/config_file.h"
#include "config/daemon_config.h"
#include "volumemanager/admin_publisher.h"
#include "volumemanager/cluster_daemon.h"
#include "volumemanager/daemon.h"
#include "volumemanager/json_log_formatter.h"
#include "volumemanager/preflight_command.h"
#include "volumemanager/process_hardening.h"

extern char** environ;

namespace {

constexpr auto kShutdownGrace = std::chrono::seconds(5);
// Exit codes of a stop that was not graceful: in-flight writes still running after the grace
// period, or the stop itself failed. 0 means every write finished and every handle closed.
constexpr int kExitStopTimedOut = 3;
constexpr int kExitStopFailed = 4;

void SetUpLogging(const config::DaemonConfig& cfg) {
  auto logger = spdlog::stderr_logger_mt("volumemanager");
  spdlog::set_default_logger(logger);
  if (cfg.log_format == config::LogFormat::kJson) {
    spdlog::set_formatter(std::make_unique<volumemanager::JsonLogFormatter>());
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %L %v", spdlog::pattern_time_type::utc);
  }
  spdlog::level::level_enum level = spdlog::level::info;
  if (cfg.verbosity >= 4) {
    level = spdlog::level::trace;
  } else if (cfg.verbosity >= 1) {
    level = spdlog::level::debug;
  }
  spdlog::set_level(level);
  spdlog::flush_on(spdlog::level::info);
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// SIGTERM and SIGINT stop the daemon gracefully; the loop then runs out of work and uv_run
// returns (exit 0). Should in-flight writes take longer than kShutdownGrace, the process exits
// with kExitStopTimedOut.
class SignalStop {
 public:
  SignalStop(uv_loop_t* loop, volumemanager::Daemon* daemon) : loop_(loop), daemon_(daemon) {
    for (auto [handle, signum] : {std::pair{&sigterm_, SIGTERM}, std::pair{&sigint_, SIGINT}}) {
      uv_signal_init(loop_, handle);
      handle->data = this;
      uv_signal_start(
          handle,
          [](uv_signal_t* s, int sig) {
            static_cast<SignalStop*>(s->data)->StopFromLoop(sig == SIGTERM ? "SIGTERM" : "SIGINT");
          },
          signum);
    }
  }

 private:
  // The body of a signal callback: a stop that throws midway cannot finish gracefully.
  void StopFromLoop(const char* why) {
    if (base::Status s = base::CatchAll("stop", [&] { Stop(why); }); !s.ok()) {
      spdlog::error("{}: {}; exiting now", why, s.message());
      spdlog::shutdown();
      std::_Exit(kExitStopFailed);
    }
  }

  void Stop(const char* why) {
    if (daemon_->stopping()) return;
    spdlog::info("{}: stopping; waiting for in-flight volume writes", why);
    uv_timer_init(loop_, &deadline_);
    uv_timer_start(
        &deadline_,
        [](uv_timer_t*) {
          spdlog::error("in-flight writes did not finish within 5s; exiting with status {}",
                        kExitStopTimedOut);
          spdlog::shutdown();
          std::_Exit(kExitStopTimedOut);
        },
        std::chrono::milliseconds(kShutdownGrace).count(), 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&deadline_));
    daemon_->Stop([this] {
      uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&deadline_), nullptr);
      spdlog::info("stopped");
    });
  }

  uv_loop_t* loop_;
  volumemanager::Daemon* daemon_;
  uv_signal_t sigterm_{};
  uv_signal_t sigint_{};
  uv_timer_t deadline_{};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "preflight") {
    return volumemanager::RunPreflightCommand(std::vector<std::string>(argv + 2, argv + argc));
  }
  auto parsed = config::ParseDaemonFlags(std::vector<std::string>(argv + 1, argv + argc),
                                         Environment(), HostName());
  if (!parsed.ok()) {
    std::fprintf(stderr, "volumemanager: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!parsed->config) {
    std::fputs(parsed->output.c_str(), stdout);
    return 0;
  }
  SetUpLogging(*parsed->config);
  if (base::Status s = volumemanager::MakeNotDumpable(); !s.ok()) {
    spdlog::warn("{}: a crash could hand Secret bytes in memory to the host's core handler",
                 s.message());
  }

  uv_loop_t* loop = uv_default_loop();
  std::unique_ptr<volumemanager::Daemon> owned =
      config::ClusterMode(*parsed->config)
          ? std::make_unique<volumemanager::ClusterDaemon>(loop, *parsed->config)
          : std::make_unique<volumemanager::Daemon>(loop, *parsed->config);
  volumemanager::Daemon& daemon = *owned;
  if (auto error = daemon.Start()) {
    std::fprintf(stderr, "volumemanager: %s\n", error->message.c_str());
    return error->exit_code;
  }
  // The admin endpoints. A listener that cannot bind is logged, not fatal (as the kubelet's
  // healthz server): the volumes matter more, and a failing liveness probe reports it.
  volumemanager::AdminPublisher admin(
      loop, &daemon, config::Configz(*parsed->config, parsed->config_file, parsed->sources));
  if (base::Status s =
          admin.Start(parsed->config->healthz_bind_address, parsed->config->debug_bind_address);
      !s.ok()) {
    spdlog::error("admin endpoints: {}", s.message());
  }
  SignalStop signals(loop, &daemon);
  uv_run(loop, UV_RUN_DEFAULT);
  admin.Stop();
  uv_run(loop, UV_RUN_NOWAIT);  // closes the admin handles
  spdlog::shutdown();
  return 0;
}
