// volumemanager: the daemon. Parses the flags, wires the pod sources, the object store and the
// volume manager onto one libuv loop, and runs until SIGTERM or SIGINT, after which it takes no
// new work, lets in-flight writes finish and exits 0 (forced after 5 s).
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/catch_all.h"
#include "base/version.h"
#include "cache/local_object_store.h"
#include "config/daemon_config.h"
#include "config/go_duration.h"
#include "kube/quantity.h"
#include "plugins/plugin_registry.h"
#include "podconfig/file_source.h"
#include "podconfig/http_source.h"
#include "podconfig/pod_config.h"
#include "podconfig/redacted_url.h"
#include "volumemanager/json_log_formatter.h"
#include "volumemanager/loop_stall_monitor.h"
#include "volumemanager/ownership_journal.h"
#include "volumemanager/preflight_command.h"
#include "volumemanager/volume_manager.h"

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

// Node allocatable for the downward API: the flag's values, else the machine's capacity (the
// kubelet's allocatable with no reservations configured).
base::Result<kube::ResourceList> NodeAllocatable(const config::DaemonConfig& cfg) {
  std::map<std::string, std::string> text = cfg.node_allocatable;
  if (!text.count("cpu")) text["cpu"] = std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
  if (!text.count("memory")) {
    text["memory"] = std::to_string(static_cast<long long>(::sysconf(_SC_PHYS_PAGES)) *
                                    ::sysconf(_SC_PAGE_SIZE));
  }
  if (!text.count("ephemeral-storage")) {
    struct statvfs st {};
    if (::statvfs(cfg.root_dir.c_str(), &st) == 0) {
      text["ephemeral-storage"] =
          std::to_string(static_cast<unsigned long long>(st.f_blocks) * st.f_frsize);
    }
  }
  kube::ResourceList out;
  for (const auto& [name, value] : text) {
    auto q = kube::Quantity::Parse(value);
    if (!q.ok()) {
      return base::Status::Error("--node-allocatable: " + name + "=" + value + ": " +
                                 q.status().message());
    }
    out[name] = *q;
  }
  return out;
}

struct Daemon {
  uv_loop_t* loop = nullptr;
  std::unique_ptr<plugins::PluginRegistry> registry;
  std::unique_ptr<cache::LocalObjectStore> objects;
  std::unique_ptr<podconfig::PodConfig> pods;
  std::unique_ptr<volumemanager::VolumeManager> manager;
  podconfig::FileSource file_source;
  podconfig::HttpSource http_source;
  volumemanager::LoopStallMonitor stall_monitor;
  uv_signal_t sigterm{};
  uv_signal_t sigint{};
  uv_timer_t deadline{};
  bool stopping = false;

  // The body of a signal callback: a stop that throws midway cannot finish gracefully.
  void ShutdownFromLoop(const char* why) {
    if (base::Status s = base::CatchAll("stop", [&] { Shutdown(why); }); !s.ok()) {
      spdlog::error("{}: {}; exiting now", why, s.message());
      spdlog::shutdown();
      std::_Exit(kExitStopFailed);
    }
  }

  void Shutdown(const char* why) {
    if (stopping) return;
    stopping = true;
    spdlog::info("{}: stopping; waiting for in-flight volume writes", why);
    file_source.Stop();
    http_source.Stop();
    objects->Stop();
    stall_monitor.Stop();
    uv_timer_init(loop, &deadline);
    deadline.data = this;
    uv_timer_start(
        &deadline,
        [](uv_timer_t*) {
          spdlog::error("in-flight writes did not finish within 5s; exiting with status {}",
                        kExitStopTimedOut);
          spdlog::shutdown();
          std::_Exit(kExitStopTimedOut);
        },
        std::chrono::milliseconds(kShutdownGrace).count(), 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&deadline));
    manager->Stop([this] {
      uv_close(reinterpret_cast<uv_handle_t*>(&sigterm), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&sigint), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&deadline), nullptr);
      spdlog::info("stopped");
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "preflight") {
    return volumemanager::RunPreflightCommand(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto parsed =
      config::ParseDaemonFlags(std::vector<std::string>(argv + 1, argv + argc), env, HostName());
  if (!parsed.ok()) {
    std::fprintf(stderr, "volumemanager: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!parsed->config) {
    std::fputs(parsed->output.c_str(), stdout);
    return 0;
  }
  const config::DaemonConfig& cfg = *parsed->config;
  SetUpLogging(cfg);
  auto allocatable = NodeAllocatable(cfg);
  if (!allocatable.ok()) {
    std::fprintf(stderr, "volumemanager: %s\n", allocatable.status().message().c_str());
    return 2;
  }

  // As the kubelet does at start: the root dir and its pods dir exist from now on.
  for (const std::string& dir : {cfg.root_dir, cfg.root_dir + "/pods"}) {
    if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "volumemanager: --root-dir: mkdir %s: %s\n", dir.c_str(),
                   std::strerror(errno));
      return 1;
    }
  }

  // What the daemon owns under the root dir: only what its journal lists, never what it finds.
  auto journal = volumemanager::OwnershipJournal::Open(cfg.state_dir);
  if (!journal.ok()) {
    std::fprintf(stderr, "volumemanager: %s\n", journal.status().message().c_str());
    return 1;
  }
  switch (journal->loaded) {
    case volumemanager::OwnershipJournal::Loaded::kNew:
      spdlog::info(
          "{}: this daemon owns no volume under {}; it records each volume it sets up from now on "
          "in {}",
          journal->detail, cfg.root_dir, journal->journal->file());
      break;
    case volumemanager::OwnershipJournal::Loaded::kTrusted:
      if (!journal->detail.empty()) spdlog::info("{}: {}", journal->journal->file(), journal->detail);
      break;
    case volumemanager::OwnershipJournal::Loaded::kRejected:
      spdlog::error(
          "ownership journal not trusted ({}): this daemon owns nothing under {} and will remove "
          "nothing it finds there; volumes it sets up from now on are recorded in {}",
          journal->detail, cfg.root_dir, journal->journal->file());
      break;
  }

  Daemon d;
  d.loop = uv_default_loop();
  d.registry = plugins::PluginRegistry::NewDefault();

  d.objects = std::make_unique<cache::LocalObjectStore>();
  if (!cfg.object_manifest_path.empty()) {
    cache::LocalObjectStoreOptions store_options;
    store_options.dir = cfg.object_manifest_path;
    store_options.strategy = cfg.strategy;
    store_options.cache_ttl =
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg.object_cache_ttl);
    if (base::Status s = d.objects->Start(d.loop, store_options); !s.ok()) {
      std::fprintf(stderr, "volumemanager: --object-manifest-path: %s\n", s.message().c_str());
      return 2;
    }
  }

  volumemanager::VolumeManagerOptions vm_options;
  vm_options.root_dir = cfg.root_dir;
  vm_options.sync_frequency =
      std::chrono::duration_cast<std::chrono::milliseconds>(cfg.sync_frequency);
  vm_options.durable = cfg.fsync;
  vm_options.tmpfs = cfg.tmpfs;
  vm_options.node_allocatable = *allocatable;
  vm_options.journal = journal->journal.get();
  vm_options.unpublished_grace =
      std::chrono::duration_cast<std::chrono::milliseconds>(cfg.unpublished_grace);
  d.pods = std::make_unique<podconfig::PodConfig>(
      [&d](const podconfig::PodUpdate& u) { d.manager->OnPodUpdate(u); });
  d.manager = std::make_unique<volumemanager::VolumeManager>(
      d.loop, vm_options, d.objects.get(), d.registry.get(),
      [&d] { return d.pods->AllSourcesSeen(); });
  d.objects->SetChangeHandler(
      [&d](const kube::ObjectRef& ref) { d.manager->OnObjectChanged(ref); });

  spdlog::info(
      "volumemanager {} starting: node \"{}\", root dir {}, state dir {}, pods from {}{}{}, "
      "objects from {}, strategy {}, sync frequency {}",
      base::kVersion, cfg.node_name, cfg.root_dir, cfg.state_dir, cfg.pod_manifest_path,
      cfg.pod_manifest_path.empty() || cfg.manifest_url.empty() ? "" : " and ",
      podconfig::RedactedUrl(cfg.manifest_url),
      cfg.object_manifest_path.empty() ? "(none)" : cfg.object_manifest_path,
      cache::ChangeDetectionStrategyName(cfg.strategy),
      config::FormatGoDuration(cfg.sync_frequency));
  d.manager->Start();

  // Sources register before any delivers, so "all sources seen" waits for every one of them.
  podconfig::PodConfig::Sink file_sink, http_sink;
  if (!cfg.pod_manifest_path.empty()) file_sink = d.pods->RegisterSource(podconfig::kFileSource);
  if (!cfg.manifest_url.empty()) http_sink = d.pods->RegisterSource(podconfig::kHttpSource);
  if (file_sink) {
    podconfig::FileSourceOptions o;
    o.path = cfg.pod_manifest_path;
    o.node_name = cfg.node_name;
    if (base::Status s = d.file_source.Start(d.loop, o, file_sink); !s.ok()) {
      spdlog::error("--pod-manifest-path {}: {}", cfg.pod_manifest_path, s.message());
      return 2;
    }
  }
  if (http_sink) {
    podconfig::HttpSourceOptions o;
    o.url = cfg.manifest_url;
    o.node_name = cfg.node_name;
    if (base::Status s = d.http_source.Start(d.loop, o, http_sink); !s.ok()) {
      spdlog::error("--manifest-url {}: {}", podconfig::RedactedUrl(cfg.manifest_url), s.message());
      return 2;
    }
  }

  uv_signal_init(d.loop, &d.sigterm);
  uv_signal_init(d.loop, &d.sigint);
  d.sigterm.data = d.sigint.data = &d;
  uv_signal_start(
      &d.sigterm,
      [](uv_signal_t* s, int) { static_cast<Daemon*>(s->data)->ShutdownFromLoop("SIGTERM"); },
      SIGTERM);
  uv_signal_start(
      &d.sigint,
      [](uv_signal_t* s, int) { static_cast<Daemon*>(s->data)->ShutdownFromLoop("SIGINT"); },
      SIGINT);

  if (base::Status s = d.stall_monitor.Start(
          d.loop,
          std::chrono::duration_cast<std::chrono::microseconds>(cfg.loop_stall_log_threshold));
      !s.ok()) {
    spdlog::warn("{}; event-loop stalls are not measured", s.message());
  }
  uv_run(d.loop, UV_RUN_DEFAULT);
  spdlog::shutdown();
  return 0;
}
