// volumemanager: the daemon's binary. Parses the flags (or runs the `preflight` subcommand), with
// --dynamic-config picks the configuration this start runs on from its checkpoints
// (dynamicconfig/startup.h), sets up logging, and runs a Daemon (a ClusterDaemon with
// --kubeconfig or --in-cluster) on the default libuv loop until SIGTERM or SIGINT, after which the
// daemon takes no new work, lets in-flight writes finish and the process exits 0 (3 when they
// had not finished after 5 s), or until a new dynamic config needs a restart (the same graceful
// stop, exit 5).
#include <fcntl.h>
#include <malloc.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/catch_all.h"
#include "base/unique_fd.h"
#include "cmd/volumemanager/admin_publisher.h"
#include "cmd/volumemanager/cluster_daemon.h"
#include "cmd/volumemanager/daemon.h"
#include "cmd/volumemanager/json_log_formatter.h"
#include "cmd/volumemanager/preflight_command.h"
#include "cmd/volumemanager/process_hardening.h"
#include "config/config_file.h"
#include "config/daemon_config.h"
#include "dynamicconfig/checkpoint_store.h"
#include "dynamicconfig/controller.h"
#include "dynamicconfig/startup.h"
#include "leaderelection/file_lock.h"

extern char** environ;

namespace {

constexpr auto kShutdownGrace = std::chrono::seconds(5);
// Exit codes of a stop that was not graceful: in-flight writes still running after the grace
// period, or the stop itself failed. 0 means every write finished and every handle closed.
constexpr int kExitStopTimedOut = 3;
constexpr int kExitStopFailed = 4;
// A graceful stop to be restarted onto a new dynamic config (its DaemonSet restarts the pod's
// container whatever the code; a distinct one tells the operator why).
constexpr int kExitRestartForConfig = 5;
// Losing the node's lock after writing began is a graceful stop with
// volumemanager::Daemon::kExitLostLock (6): restarted, the daemon reads the journal afresh.

void CreateLogger() {
  auto logger = spdlog::stderr_logger_mt("volumemanager");
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);
}

// Format and verbosity; again on a live dynamic config change.
void ApplyLogSettings(const config::DaemonConfig& cfg) {
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

// SIGTERM or SIGINT before GracefulStop's handlers exist (Daemon::Start() may block for up to
// 10 s on the API server's answer about the daemon's identity): remembered, and a graceful stop
// once the handlers exist, instead of a death by the signal's default action.
volatile std::sig_atomic_t g_early_stop_signal = 0;

void RememberStopSignal(int sig) { g_early_stop_signal = sig; }

// A graceful stop: on SIGTERM or SIGINT (exit 0), or asked for (a new dynamic config that needs a
// restart). The daemon takes no new work, the loop then runs out of work and uv_run returns.
// Should in-flight writes take longer than kShutdownGrace, the process exits with
// kExitStopTimedOut. `on_stop` runs first (the dynamic config's watches stop there).
class GracefulStop {
 public:
  GracefulStop(uv_loop_t* loop, volumemanager::Daemon* daemon, std::function<void()> on_stop)
      : loop_(loop), daemon_(daemon), on_stop_(std::move(on_stop)) {
    for (auto [handle, signum] : {std::pair{&sigterm_, SIGTERM}, std::pair{&sigint_, SIGINT}}) {
      uv_signal_init(loop_, handle);
      handle->data = this;
      uv_signal_start(
          handle,
          [](uv_signal_t* s, int sig) {
            static_cast<GracefulStop*>(s->data)->StopFromLoop(sig == SIGTERM ? "SIGTERM" : "SIGINT",
                                                              0);
          },
          signum);
    }
  }

  // The body of a loop callback: a stop that throws midway cannot finish gracefully.
  void StopFromLoop(const std::string& why, int exit_code) {
    if (base::Status s = base::CatchAll("stop", [&] { Stop(why, exit_code); }); !s.ok()) {
      spdlog::error("{}: {}; exiting now", why, s.message());
      spdlog::shutdown();
      std::_Exit(kExitStopFailed);
    }
  }

  int exit_code() const { return exit_code_; }

 private:
  void Stop(const std::string& why, int exit_code) {
    if (daemon_->stopping()) return;
    exit_code_ = exit_code;
    spdlog::info("{}: stopping; waiting for in-flight volume writes", why);
    if (on_stop_) on_stop_();
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
      if (exit_code_ == 0) {
        spdlog::info("stopped");
      } else {
        spdlog::info("stopped; exiting with status {} to be restarted", exit_code_);
      }
    });
  }

  uv_loop_t* loop_;
  volumemanager::Daemon* daemon_;
  std::function<void()> on_stop_;
  uv_signal_t sigterm_{};
  uv_signal_t sigint_{};
  uv_timer_t deadline_{};
  int exit_code_ = 0;
};

// The node's flock (leaderelection/file_lock.h's file), taken at once or not at all: for a start
// that failed before its election began. Invalid when held by another process or unusable.
base::UniqueFd TryNodeLock(const std::string& state_dir) {
  if (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) return base::UniqueFd();
  const std::string path = state_dir + "/" + leaderelection::kFileLockName;
  base::UniqueFd fd(
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644));
  if (!fd.valid() || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return base::UniqueFd();
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena for every thread (glibc makes one per thread, up to 8 per core): the pool
  // threads decode pods and build payloads that the loop keeps, and each arena's free space
  // stays resident. At 1,000 pods one arena saves about 1.3 MiB; the threads allocate little
  // besides, so they hardly wait on its lock. Before any thread exists.
  mallopt(M_ARENA_MAX, 1);
  // Allocations of 128 KiB or more (a manifest's bytes as read, a 1,000-object file's objects)
  // always get pages of their own, given back when freed. By default glibc raises this threshold
  // to the size of the first such block freed, and later ones come from the heap, where the
  // short-lived ones leave room that long-lived small allocations fill: about 150 KiB more heap
  // after 100 edits of a 1,000-object manifest (BENCHMARKS.md, "Memory against pod count").
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  const std::map<std::string, std::string> environment = Environment();
  const std::string hostname = HostName();
  if (argc >= 2 && std::string(argv[1]) == "preflight") {
    return volumemanager::RunPreflightCommand(std::vector<std::string>(argv + 2, argv + argc),
                                              environment, hostname);
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = config::ParseDaemonFlags(args, environment, hostname);
  if (!parsed.ok()) {
    std::fprintf(stderr, "volumemanager: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!parsed->config) {
    std::fputs(parsed->output.c_str(), stdout);
    return 0;
  }
  // Dynamic config: the checkpoints decide what this start runs on (no API server needed).
  const dynamicconfig::ParseFunction parse = [&](const std::optional<std::string>& dynamic) {
    return config::ParseDaemonFlags(args, environment, hostname, config::ReadConfigFile, dynamic);
  };
  std::unique_ptr<dynamicconfig::CheckpointStore> checkpoints;
  std::optional<dynamicconfig::Startup> startup;
  const config::DaemonConfig base_config = *parsed->config;
  if (!base_config.dynamic_config.empty()) {
    checkpoints = std::make_unique<dynamicconfig::CheckpointStore>(base_config.dynamic_config_dir);
    // A newer release's checkpoints (a rollback): the state is refused, not the flags (exit 1).
    if (base::Status s = checkpoints->RefuseNewerFormat(); !s.ok()) {
      std::fprintf(stderr, "volumemanager: %s\n", s.message().c_str());
      return 1;
    }
    // Read only: another daemon may hold the node's lock and write these checkpoints. This start
    // is counted (and a rollback recorded) once it holds the lock (SetBeforeWriting below).
    auto begun = dynamicconfig::BeginStartup(*checkpoints, static_cast<int64_t>(std::time(nullptr)),
                                             dynamicconfig::kMaxFailedStarts, parse,
                                             dynamicconfig::StartupWrites::kNone);
    if (!begun.ok()) {
      std::fprintf(stderr, "volumemanager: %s\n", begun.status().message().c_str());
      return 2;
    }
    startup = std::move(begun).value();
    *parsed = startup->parsed;
  }
  const config::DaemonConfig& cfg = *parsed->config;
  CreateLogger();
  ApplyLogSettings(cfg);
  if (base::Status s = volumemanager::MakeNotDumpable(); !s.ok()) {
    spdlog::warn("{}: a crash could hand Secret bytes in memory to the host's core handler",
                 s.message());
  }

  uv_loop_t* loop = uv_default_loop();
  std::unique_ptr<volumemanager::Daemon> owned =
      config::ClusterMode(cfg) ? std::make_unique<volumemanager::ClusterDaemon>(loop, cfg)
                               : std::make_unique<volumemanager::Daemon>(loop, cfg);
  volumemanager::Daemon& daemon = *owned;
  std::signal(SIGTERM, RememberStopSignal);
  std::signal(SIGINT, RememberStopSignal);
  if (auto error = daemon.Start()) {
    if (startup) {
      for (const std::string& e : startup->errors) spdlog::error("dynamic config: {}", e);
      // A start that fails before it ever held the lock is counted against the trial only when
      // the lock is free (the node's only daemon restarting in place): then repeated failures
      // roll the config back as ever. Held by another daemon (a surge), this start writes
      // nothing: the holder serves the node on its config, and this pod never becomes Ready.
      // Observe mode writes nothing: no lock file, no trial counted.
      if (base::UniqueFd lock = cfg.observe ? base::UniqueFd() : TryNodeLock(cfg.state_dir);
          lock.valid()) {
        dynamicconfig::BeginStartup(*checkpoints, static_cast<int64_t>(std::time(nullptr)),
                                    dynamicconfig::kMaxFailedStarts, parse)
            .status()
            .IgnoreError();
      }
    }
    std::fprintf(stderr, "volumemanager: %s\n", error->message.c_str());
    return error->exit_code;
  }
  // The admin endpoints. A listener that cannot bind is logged, not fatal (as the kubelet's
  // healthz server): the volumes matter more, and a failing liveness probe reports it.
  volumemanager::AdminPublisher admin(loop, &daemon,
                                      config::Configz(cfg, parsed->config_file, parsed->sources));
  std::unique_ptr<dynamicconfig::Controller> dynamic;
  GracefulStop stop(loop, &daemon, [&] {
    if (dynamic) {
      dynamic->RecordCleanExit();
      dynamic->Stop();
    }
  });
  // Opening the journal or creating the root dir once the lock is held: a graceful stop with the
  // exit code Start() would have returned.
  daemon.SetFatalHandler([&](const volumemanager::Daemon::StartError& error) {
    stop.StopFromLoop(error.message, error.exit_code);
  });
  // The dynamic config's controller writes checkpoints: it starts once the lock is held, on the
  // decision taken again from the disk then, with this start counted.
  auto start_dynamic = [&](dynamicconfig::Startup counted) {
    auto* cluster = static_cast<volumemanager::ClusterDaemon*>(&daemon);  // cluster mode only
    const std::string& source = base_config.dynamic_config;
    dynamicconfig::ControllerOptions options;
    options.namespace_ = source.substr(0, source.find('/'));
    options.name = source.substr(source.find('/') + 1);
    options.node_name = base_config.node_name;
    options.trial = base_config.dynamic_config_trial_duration;
    dynamicconfig::ControllerHooks hooks;
    hooks.parse = parse;
    hooks.apply_live = [&](const config::ParsedFlags& live) {
      ApplyLogSettings(*live.config);
      daemon.ApplyLiveConfig(*live.config);
    };
    hooks.restart = [&](const std::string& why) { stop.StopFromLoop(why, kExitRestartForConfig); };
    hooks.warn = [cluster](const dynamicconfig::Checkpoint& about, const std::string& reason,
                           const std::string& message) {
      cluster->RecordWarning(
          kubeclient::InvolvedObject{"ConfigMap", "v1", about.namespace_, about.name, about.uid,
                                     about.resource_version},
          reason, message);
    };
    hooks.status_changed = [&] {
      if (!dynamic) return;
      const config::ParsedFlags& active = dynamic->active_config();
      nlohmann::json configz = config::Configz(*active.config, active.config_file, active.sources);
      configz["dynamicConfig"] = dynamic->Status();
      admin.SetConfigz(std::move(configz));
    };
    dynamic = std::make_unique<dynamicconfig::Controller>(loop, cluster->api(), checkpoints.get(),
                                                          std::move(counted), options, hooks);
    admin.SetExtraMetrics(
        [&](std::vector<server::MetricFamily>* families) { dynamic->AddMetrics(families); });
    hooks.status_changed();  // not yet called: `dynamic` was null
    dynamic->Start();
  };
  if (startup) {
    daemon.SetBeforeWriting([&]() -> bool {
      auto counted =
          dynamicconfig::BeginStartup(*checkpoints, static_cast<int64_t>(std::time(nullptr)),
                                      dynamicconfig::kMaxFailedStarts, parse);
      if (!counted.ok()) {
        stop.StopFromLoop("dynamic config: " + counted.status().message(), 2);
        return false;
      }
      const bool same = counted->active.has_value() == startup->active.has_value() &&
                        (!counted->active || counted->active->SameRevision(*startup->active));
      if (!same) {
        // E.g. the predecessor took a new assignment, or this config's failed runs rolled it
        // back, while this daemon waited.
        stop.StopFromLoop(
            "the dynamic config to run on changed while this daemon waited for the node's lock",
            kExitRestartForConfig);
        return false;
      }
      start_dynamic(std::move(counted).value());
      return true;
    });
  }
  if (base::Status s = admin.Start(cfg.healthz_bind_address, cfg.debug_bind_address); !s.ok()) {
    spdlog::error("admin endpoints: {}", s.message());
  }
  if (g_early_stop_signal != 0) {
    stop.StopFromLoop(
        g_early_stop_signal == SIGTERM ? "SIGTERM (during start-up)" : "SIGINT (during start-up)",
        0);
  }
  uv_run(loop, UV_RUN_DEFAULT);
  admin.Stop();
  dynamic.reset();
  uv_run(loop, UV_RUN_NOWAIT);  // closes the admin and dynamic config handles
  spdlog::shutdown();
  return stop.exit_code();
}
