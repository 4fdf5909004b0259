#include "config/daemon_config.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <set>
#include <sstream>

#include "base/bind_address.h"
#include "base/durable_file.h"
#include "base/strings.h"
#include "base/version.h"
#include "config/closest_match.h"
#include "config/config_file.h"
#include "config/go_duration.h"
#include "kube/validation.h"

namespace config {
namespace {

base::Status ParseDurationFlag(const std::string& flag, const std::string& text,
                               std::chrono::nanoseconds* out) {
  auto d = ParseGoDuration(text);
  if (!d.ok()) return d.status().WithContext(flag);
  *out = *d;
  return base::Status::OK();
}

base::Status ParseAllocatable(const std::string& text, std::map<std::string, std::string>* out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return base::Status::Error("--node-allocatable: \"" + item +
                                 "\" is not name=quantity (e.g. cpu=4,memory=8Gi)");
    }
    const std::string name = item.substr(0, eq);
    if (name != "cpu" && name != "memory" && name != "ephemeral-storage" &&
        !name.starts_with("hugepages-")) {
      return base::Status::Error("--node-allocatable: unknown resource \"" + name +
                                 "\" (cpu, memory, ephemeral-storage, hugepages-<size>)");
    }
    (*out)[name] = item.substr(eq + 1);
  }
  return base::Status::OK();
}

// --object-namespaces: a comma-separated list of namespace names, each once ("" = every
// namespace).
base::Status ParseNamespaces(const std::string& text, std::vector<std::string>* out) {
  if (text.empty()) return base::Status::OK();
  for (std::string_view item : base::Split(text, ',')) {
    const std::string name(item);
    if (name.empty()) {
      return base::Status::Error("--object-namespaces: \"" + text +
                                 "\" has an empty name (NAMESPACE,NAMESPACE,...)");
    }
    if (auto msgs = kube::ValidateLabelName(name); !msgs.empty()) {
      return base::Status::Error("--object-namespaces: \"" + name +
                                 "\" is not a namespace name: " + msgs.front());
    }
    if (std::find(out->begin(), out->end(), name) != out->end()) {
      return base::Status::Error("--object-namespaces: \"" + name + "\" is listed twice");
    }
    out->push_back(name);
  }
  return base::Status::OK();
}

// The first --help group: help, version and the flags about the flags.
constexpr char kGroupGeneral[] = "General";

std::string HelpFooter() {
  return "Subcommand:\n"
         "  volumemanager preflight --kubeconfig PATH|--in-cluster [the daemon's flags]\n"
         "      checks what cluster mode needs from the API server, with the daemon's flags and\n"
         "      --config, as the identity it runs as (reachable, credentials, the node exists,\n"
         "      pods of the node, reads in their namespaces, Events, the Lease when chosen, "
         "rights\n"
         "      beyond need); exit 0: every right is there, 1: something is missing (each check\n"
         "      says what), 2: bad flags, 3: nothing failed but a check could not be made.\n"
         "\n"
         "Exit codes:\n"
         "  0  stopped on SIGTERM or SIGINT with every write finished (or --help, --version,\n"
         "     --validate-only)\n"
         "  1  the machine or the daemon's state refused at start (a directory, the node's lock,\n"
         "     the journal, the API server's credentials)\n"
         "  2  a flag, --config field or dynamic config value cannot be used (the message names "
         "it)\n"
         "  3  in-flight writes had not finished 5s after SIGTERM or SIGINT\n"
         "  4  the stop itself failed\n"
         "  5  stopped to be restarted onto a new dynamic config\n"
         "  6  lost the node's lock after writing began (restarted, it reads its journal afresh)\n"
         "\n"
         "Configuration file: --config PATH, a VolumeManagerConfiguration (apiVersion\n" +
         std::string(kConfigApiVersion) +
         ") with one field per flag; --help-all lists them.\nFlags on the command line win.\n";
}

// CLI11's help with both usages (the daemon's and preflight's) and each description wrapped to
// fit 100 columns.
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(34); }

  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: volumemanager [FLAGS]             run the daemon\n"
           "       volumemanager preflight [FLAGS]   check what cluster mode needs (below)\n\n";
  }

  // One blank line between groups, not CLI11's two.
  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> opts) const override {
    std::string out = CLI::Formatter::make_group(std::move(group), is_positional, std::move(opts));
    if (out.starts_with("\n")) out.erase(0, 1);
    return out;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    const size_t width = kWidth - get_column_width();
    std::string out;
    size_t line = 0;
    std::stringstream words(opt->get_description());
    std::string word;
    while (words >> word) {
      if (line > 0 && line + 1 + word.size() > width) {
        out += "\n";
        line = 0;
      } else if (line > 0) {
        out += " ";
        ++line;
      }
      out += word;
      line += word.size();
    }
    return out;
  }

 private:
  static constexpr size_t kWidth = 100;
};

// " (did you mean X?)" when `value` looks like a typo of one of `choices`, else "".
std::string DidYouMean(const std::string& value, const std::vector<std::string>& choices) {
  const std::string match = ClosestMatch(value, choices);
  return match.empty() ? "" : " (did you mean " + match + "?)";
}

// " (valid: A, B or C)", with "; did you mean B?" when `value` looks like a typo of one.
std::string ValidValues(const std::string& value, const std::vector<std::string>& choices) {
  const std::string match = ClosestMatch(value, choices);
  return " (valid: " + JoinChoices(choices) +
         (match.empty() ? "" : "; did you mean " + match + "?") + ")";
}

// The error for arguments CLI11 did not take: each unknown flag named, with the flag it most
// likely meant.
base::Status UnexpectedArguments(const CLI::App& app) {
  std::vector<std::string> known;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) known.push_back("--" + name);
  }
  std::string message;
  for (const std::string& arg : app.remaining()) {
    std::string part;
    if (arg.starts_with("-")) {
      const std::string name = arg.substr(0, arg.find('='));
      part = "unknown flag " + name + DidYouMean(name, known);
    } else {
      part = "unexpected argument \"" + arg +
             "\" (a flag's value goes after it: --flag VALUE "
             "or --flag=VALUE)";
    }
    message += (message.empty() ? "" : "; ") + part;
  }
  return base::Status::Error(message + " (see --help)");
}

ParsedFlags Output(std::string text) {
  ParsedFlags parsed;
  parsed.output = std::move(text);
  return parsed;
}

// One parse of `args` (a config file's arguments, if any, then the command line's). `given`
// gets the flags of ConfigFields() that `args` set and `config_file` the --config value, both
// before validation.
base::Result<ParsedFlags> ParseArgs(const std::vector<std::string>& args,
                                    const std::map<std::string, std::string>& environment,
                                    const std::string& hostname, std::set<std::string>* given,
                                    std::string* config_file) {
  DaemonConfig cfg;
  std::string sync_frequency = "1m";
  std::string object_cache_ttl = "1m";
  std::string unpublished_grace = "30s";
  std::string loop_stall_log_threshold = "100ms";
  std::string trial_duration = "10m";
  std::string reload_timeout = "5s";
  std::string manifest_settle_time = "1s";
  std::string strategy = "Watch";
  std::string log_format = "text";
  std::string allocatable;
  std::string ownership;

  std::string lock_type = "file", lease_duration, renew_deadline, retry_period;
  CLI::App app{
      "volumemanager: projects ConfigMaps and Secrets (and projected and downwardAPI volumes) into "
      "pod volume directories, byte for byte as the kubelet does, and keeps them current.",
      "volumemanager"};
  app.formatter(std::make_shared<HelpFormatter>());
  app.set_version_flag("--version", std::string("volumemanager ") + base::kVersion);
  CLI::Option* help_all =
      app.set_help_all_flag("--help-all", "Print this help and the configuration file's fields");
  app.option_defaults()->always_capture_default();
  // A flag given twice takes its last value: a config file's values come first, so the command
  // line's win.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.footer(HelpFooter());
  for (CLI::Option* opt : {app.get_help_ptr(), help_all, app.get_version_ptr()}) {
    opt->group(kGroupGeneral);
  }
  std::string current_group;
  // Options are added group by group (CLI11 lists groups in the order of their first option).
  auto option = [&](const std::string& name, auto& variable, const std::string& type,
                    const std::string& help) {
    return app.add_option(name, variable, help)->type_name(type)->group(current_group);
  };
  auto add_flag = [&](const std::string& name, bool& variable, const std::string& help) {
    return app.add_flag(name, variable, help)->group(current_group);
  };

  current_group = kGroupGeneral;
  option("--config", *config_file, "PATH",
         "A VolumeManagerConfiguration file (YAML or JSON; one field per flag, see --help-all); "
         "flags on the command line override its values");
  bool validate_only = false;
  add_flag(
      "--validate-only", validate_only,
      "Parse and validate the flags (and --config), print the effective configuration as "
      "/configz shows it and exit (0 when valid, 2 naming the bad flag or field); nothing else "
      "is read or written");

  current_group = "Pod sources (standalone: at least one; cluster mode: the API server)";
  option("--pod-manifest-path", cfg.pod_manifest_path, "PATH",
         "Directory of Pod manifests, one per file");
  option("--manifest-url", cfg.manifest_url, "URL", "URL of a Pod or PodList, polled every 20s");
  option("--node-name", cfg.node_name, "NAME",
         "This node's name (default: $NODE_NAME, else the host name)");
  option("--manifest-settle-time", manifest_settle_time, "DURATION",
         "How long a pod or object manifest file that is gone, or cannot be read or decoded, may "
         "take to come back or be completed before it counts (a checkout's unlink and create is "
         "one change; a file caught mid-write is no error)");

  current_group = "Objects (ConfigMaps and Secrets)";
  option("--object-manifest-path", cfg.object_manifest_path, "PATH",
         "Standalone: directory of ConfigMap and Secret manifests");
  option("--config-map-and-secret-change-detection-strategy", strategy, "Get|Cache|Watch",
         "Get: read on every mount; Cache: re-read after --object-cache-ttl; Watch: react to "
         "every change at once");
  option("--object-cache-ttl", object_cache_ttl, "DURATION",
         "How long the Cache strategy keeps an object");

  current_group = "Cluster mode (only with --kubeconfig or --in-cluster)";
  option("--kubeconfig", cfg.kubeconfig, "PATH",
         "Pods bound to --node-name and their ConfigMaps and Secrets come from the API server "
         "named in this kubeconfig ($KUBECONFIG is not read)");
  add_flag("--in-cluster", cfg.in_cluster,
           "Use the pod's service account (token, CA and KUBERNETES_SERVICE_HOST/PORT), as a "
           "DaemonSet runs it");
  option("--volume-ownership", ownership, "kubelet|self",
         "kubelet (default in cluster mode): the kubelet sets up and tears down every volume, the "
         "daemon only refreshes those it has set up; self (the only choice standalone): the "
         "daemon sets up and tears down the volumes itself");
  bool no_secrets = false;
  add_flag("--no-secrets", no_secrets,
           "Read no Secrets (the chart's rbac.secrets: false grants none): beside the kubelet, "
           "secret volumes and projected volumes with a secret source are left to it, each pod "
           "told once by a Normal Event; with --volume-ownership self they fail");
  std::string object_namespaces;
  option("--object-namespaces", object_namespaces, "NAMESPACE,...",
         "Read ConfigMaps and Secrets only in these namespaces (the chart's rbac.namespaces; "
         "default: every namespace): beside the kubelet, volumes reading objects elsewhere are "
         "left to it, each pod told once by a Normal Event; with --volume-ownership self they "
         "fail");
  option("--kube-api-qps", cfg.kube_api_qps, "NUM",
         "Requests per second to the API server (token bucket, as the kubelet; 0: client-go's 5)");
  option("--kube-api-burst", cfg.kube_api_burst, "INT",
         "Requests allowed at once above --kube-api-qps (0: client-go's 10)");
  option("--event-qps", cfg.event_qps, "NUM",
         "Events posted per second (their own token bucket; 0: client-go's 5)");
  option("--event-burst", cfg.event_burst, "INT",
         "Events allowed at once above --event-qps (0: client-go's 10)");
  option("--dynamic-config", cfg.dynamic_config, "NAMESPACE/NAME",
         "A ConfigMap whose key \"volumemanager\" holds a VolumeManagerConfiguration applied over "
         "--config (flags still win); <name>-<node name> in that namespace overrides it for this "
         "node");
  option("--dynamic-config-dir", cfg.dynamic_config_dir, "PATH",
         "Dynamic config checkpoints and trial records (default: <state dir>/dynamic-config)");
  option("--dynamic-config-trial-duration", trial_duration, "DURATION",
         "How long a new dynamic config is on trial before it becomes the last known good one");

  current_group = "Writing volumes";
  option("--root-dir", cfg.root_dir, "PATH", "Directory holding pods/<uid>/volumes");
  option("--state-dir", cfg.state_dir, "PATH",
         "The daemon's own state: the journal of the volumes it set up (the only ones it ever "
         "removes) and the node's lock; outside the root dir's pods/");
  option("--sync-frequency", sync_frequency, "DURATION", "Periodic resync of every pod's volumes");
  option("--unpublished-grace", unpublished_grace, "DURATION",
         "How long a version dir that ..data does not point to (a replaced version, or another "
         "writer's write in progress) stays before removal (0s only where no other writer "
         "touches the volumes)");
  option("--node-allocatable", allocatable, "NAME=QTY,...",
         "Downward API values for unset container limits, e.g. cpu=4,memory=8Gi (names: cpu, "
         "memory, ephemeral-storage, hugepages-<size>; default: the machine's)");
  add_flag("--fsync", cfg.fsync, "fsync files and directories before and after each volume update");
  bool no_tmpfs = false;
  add_flag("--no-tmpfs", no_tmpfs,
           "Keep secret, downwardAPI and projected volumes on the node's disk instead of a tmpfs "
           "(the kubelet always uses tmpfs)");

  add_flag("--observe", cfg.observe,
           "Write nothing: read pods and objects, compare each volume's content with the disk and "
           "report what a normal run would change (info log per volume, /debug/state, "
           "volumemanager_observe_volumes_differing). Takes no lock, creates no dir, opens the "
           "ownership journal read-only, posts no Event, runs no reload action or subPath copy: "
           "for a canary beside the kubelet");

  current_group = "Reload actions (pod annotation volumemanager.io/reload)";
  option("--reload-max-concurrent", cfg.reload_max_concurrent, "INT",
         "HTTP requests in flight at once, node-wide");
  option("--reload-timeout", reload_timeout, "DURATION",
         "How long one HTTP attempt may take, connect to answer");
  add_flag("--reload-signals", cfg.reload_signals,
           "Run signal actions (cluster mode; needs hostPID and CAP_KILL, which the chart's "
           "reload.signals.enabled grants)");

  current_group =
      "Admin endpoints (ADDR: IP:PORT, [IPv6]:PORT; port 0 picks a free one; empty "
      "(--flag=): not served)";
  option("--healthz-bind-address", cfg.healthz_bind_address, "ADDR",
         "Serves /healthz, /readyz and /metrics");
  option("--debug-bind-address", cfg.debug_bind_address, "ADDR",
         "Serves /debug/state and /configz, which name every pod and object on the node: keep it "
         "on loopback unless it must be reachable");

  current_group = "Logging";
  option("--log-format", log_format, "text|json", "One line of text or one JSON object per event");
  app.add_option("-v,--v", cfg.verbosity,
                 "Verbosity: 0 info; 1-3 debug (also volumes no container mounts, manifests read); "
                 "4+ trace")
      ->type_name("0-10")
      ->check(CLI::Range(0, 10).description(""))
      ->group(current_group);
  option("--loop-stall-log-threshold", loop_stall_log_threshold, "DURATION",
         "Log every event-loop iteration whose callbacks run this long or longer");

  current_group = "Leader election (one writer per node)";
  add_flag(
      "--leader-elect", cfg.leader_election.leader_elect,
      "Campaign for the lock --leader-elect-resource-lock names (default true). The flock in "
      "--state-dir is taken either way and nothing is written before it is held, so two daemons "
      "on one node never both write; --leader-elect=false adds no Lease");
  option("--leader-elect-resource-lock", lock_type, "file|leases",
         "file: a flock in --state-dir (no API load, freed at once when the holder dies); leases: "
         "a per-node coordination.k8s.io Lease besides the flock, the holder visible in the API");
  option("--leader-elect-lease-duration", lease_duration, "DURATION",
         "How long a holder's lock lasts unrenewed (default 15s for file, 40s for leases)");
  option("--leader-elect-renew-deadline", renew_deadline, "DURATION",
         "How long the holder retries renewing before it stops writing (default 10s for file, "
         "25s for leases)");
  option("--leader-elect-retry-period", retry_period, "DURATION",
         "Between acquire and renew attempts (default 400ms for file, 10s for leases)");
  option("--leader-elect-resource-namespace", cfg.leader_election.resource_namespace, "NAMESPACE",
         "leases: the Lease's namespace (default: the pod's own namespace)");
  option("--leader-elect-resource-name", cfg.leader_election.resource_name, "NAME",
         "leases: the Lease's name (default volumemanager-<node name>)");

  const std::vector<std::string> split = SplitEmptyValues(args, [&](const std::string& flag) {
    const CLI::Option* opt = app.get_option_no_throw(flag);
    return opt != nullptr && opt->get_type_size() != 0;
  });
  std::vector<std::string> reversed(split.rbegin(), split.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return Output(app.help());
  } catch (const CLI::CallForAllHelp&) {
    return Output(app.help() + "\n" + ConfigFileHelp());
  } catch (const CLI::CallForVersion&) {
    return Output(std::string("volumemanager ") + base::kVersion + "\n");
  } catch (const CLI::ExtrasError&) {
    return UnexpectedArguments(app);
  } catch (const CLI::ParseError& e) {
    return base::Status::Error(std::string(e.what()) + " (see --help)");
  }
  // No value may hold a NUL byte. A command line cannot carry one, but --config and the dynamic
  // config (JSON "\u0000", YAML "\0") can, and a path cut at its NUL by the system calls is
  // another path ("--root-dir /srv/x\0y" would be /srv/x). Refused for every flag, the one
  // in effect (the last given) being checked; the message names the flag, not the value.
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->results().empty()) continue;
    if (base::Status s = base::CheckNoNul(opt->results().back(), opt->get_name()); !s.ok()) {
      return s;
    }
  }
  for (const ConfigField& f : ConfigFields()) {
    if (app.get_option(f.flag)->count() > 0) given->insert(f.flag);
  }

  for (auto [flag, text, out] :
       {std::tuple{"--sync-frequency", &sync_frequency, &cfg.sync_frequency},
        std::tuple{"--object-cache-ttl", &object_cache_ttl, &cfg.object_cache_ttl},
        std::tuple{"--unpublished-grace", &unpublished_grace, &cfg.unpublished_grace},
        std::tuple{"--loop-stall-log-threshold", &loop_stall_log_threshold,
                   &cfg.loop_stall_log_threshold},
        std::tuple{"--dynamic-config-trial-duration", &trial_duration,
                   &cfg.dynamic_config_trial_duration},
        std::tuple{"--reload-timeout", &reload_timeout, &cfg.reload_timeout},
        std::tuple{"--manifest-settle-time", &manifest_settle_time, &cfg.manifest_settle_time}}) {
    base::Status s = ParseDurationFlag(flag, *text, out);
    if (!s.ok()) return s;
  }
  if (cfg.sync_frequency.count() == 0) {
    return base::Status::Error("--sync-frequency: must be greater than 0");
  }
  cfg.tmpfs = !no_tmpfs;
  cfg.read_secrets = !no_secrets;
  if (base::Status s = ParseNamespaces(object_namespaces, &cfg.object_namespaces); !s.ok()) {
    return s;
  }
  auto parsed_strategy = cache::ParseChangeDetectionStrategy(strategy);
  if (!parsed_strategy.ok()) {
    return base::Status::Error(
        "--config-map-and-secret-change-detection-strategy: " + parsed_strategy.status().message() +
        ValidValues(strategy, {"Get", "Cache", "Watch"}));
  }
  cfg.strategy = *parsed_strategy;
  if (log_format == "text") {
    cfg.log_format = LogFormat::kText;
  } else if (log_format == "json") {
    cfg.log_format = LogFormat::kJson;
  } else {
    return base::Status::Error("--log-format: \"" + log_format + "\" is not text or json" +
                               DidYouMean(log_format, {"text", "json"}));
  }
  if (base::Status s = ParseAllocatable(allocatable, &cfg.node_allocatable); !s.ok()) return s;
  for (auto [flag, address] : {std::pair{"--healthz-bind-address", &cfg.healthz_bind_address},
                               std::pair{"--debug-bind-address", &cfg.debug_bind_address}}) {
    if (address->empty()) continue;
    if (auto a = base::ParseBindAddress(*address); !a.ok()) return a.status().WithContext(flag);
  }
  {
    auto lock = leaderelection::ParseLockType(lock_type);
    if (!lock.ok()) {
      return base::Status::Error(lock.status().message() +
                                 DidYouMean(lock_type, {"file", "leases"}));
    }
    cfg.leader_election.resource_lock = *lock;
    for (auto [flag, text, out] : {std::tuple{"--leader-elect-lease-duration", &lease_duration,
                                              &cfg.leader_election.lease_duration},
                                   std::tuple{"--leader-elect-renew-deadline", &renew_deadline,
                                              &cfg.leader_election.renew_deadline},
                                   std::tuple{"--leader-elect-retry-period", &retry_period,
                                              &cfg.leader_election.retry_period}}) {
      if (text->empty()) continue;
      std::chrono::nanoseconds d{};
      if (base::Status s = ParseDurationFlag(flag, *text, &d); !s.ok()) return s;
      *out = d;
    }
    auto timing = leaderelection::ResolveTiming(cfg.leader_election);
    if (!timing.ok()) return timing.status();
    cfg.leader_election_timing = *timing;
  }
  cfg.node_name = ResolveNodeName(cfg.node_name, environment, hostname);
  // The node's name goes into field selectors and static pods' names: one the API would refuse
  // fails here, before anything is created.
  if (auto msgs = kube::ValidateSubdomainName(cfg.node_name); !msgs.empty()) {
    return base::Status::Error("--node-name \"" + cfg.node_name + "\": " + msgs.front());
  }
  if (!cfg.manifest_url.empty() && !cfg.manifest_url.starts_with("http://") &&
      !cfg.manifest_url.starts_with("https://")) {
    return base::Status::Error("--manifest-url: scheme must be http or https");
  }
  if (cfg.root_dir.empty()) return base::Status::Error("--root-dir: must not be empty");
  while (cfg.root_dir.size() > 1 && cfg.root_dir.back() == '/') cfg.root_dir.pop_back();
  if (cfg.state_dir.empty()) return base::Status::Error("--state-dir: must not be empty");
  while (cfg.state_dir.size() > 1 && cfg.state_dir.back() == '/') cfg.state_dir.pop_back();
  if (cfg.dynamic_config_dir.empty()) cfg.dynamic_config_dir = cfg.state_dir + "/dynamic-config";
  if (const std::string pods = cfg.root_dir + "/pods";
      cfg.state_dir == pods || cfg.state_dir.starts_with(pods + "/")) {
    return base::Status::Error("--state-dir " + cfg.state_dir + ": must be outside " + pods);
  }
  if (!cfg.kubeconfig.empty() && cfg.in_cluster) {
    return base::Status::Error("--kubeconfig and --in-cluster: give one, not both");
  }
  if (cfg.kube_api_burst < 0) return base::Status::Error("--kube-api-burst: must not be negative");
  if (!(cfg.kube_api_qps >= 0)) {
    return base::Status::Error("--kube-api-qps: must not be negative");
  }
  if (cfg.event_burst < 0) return base::Status::Error("--event-burst: must not be negative");
  if (cfg.reload_max_concurrent < 1 || cfg.reload_max_concurrent > 1024) {
    return base::Status::Error("--reload-max-concurrent: must be between 1 and 1024");
  }
  if (cfg.reload_timeout < std::chrono::milliseconds(100) ||
      cfg.reload_timeout > std::chrono::minutes(5)) {
    return base::Status::Error("--reload-timeout: must be between 100ms and 5m");
  }
  if (!(cfg.event_qps >= 0)) return base::Status::Error("--event-qps: must not be negative");
  if (!cfg.dynamic_config.empty()) {
    const size_t slash = cfg.dynamic_config.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == cfg.dynamic_config.size() ||
        cfg.dynamic_config.find('/', slash + 1) != std::string::npos) {
      return base::Status::Error("--dynamic-config: \"" + cfg.dynamic_config +
                                 "\" is not namespace/name");
    }
    if (!ClusterMode(cfg)) {
      return base::Status::Error(
          "--dynamic-config: needs cluster mode (--kubeconfig or --in-cluster): the config comes "
          "from a ConfigMap");
    }
  }
  if (cfg.dynamic_config_trial_duration.count() <= 0) {
    return base::Status::Error("--dynamic-config-trial-duration: must be greater than 0");
  }
  if (ownership.empty()) {
    cfg.volume_ownership = ClusterMode(cfg) ? VolumeOwnership::kKubelet : VolumeOwnership::kSelf;
  } else if (ownership == "kubelet") {
    if (!ClusterMode(cfg)) {
      return base::Status::Error(
          "--volume-ownership kubelet: needs cluster mode (--kubeconfig or --in-cluster); "
          "standalone mode sets up its volumes itself");
    }
    cfg.volume_ownership = VolumeOwnership::kKubelet;
  } else if (ownership == "self") {
    cfg.volume_ownership = VolumeOwnership::kSelf;
  } else {
    return base::Status::Error("--volume-ownership: \"" + ownership + "\" is not kubelet or self" +
                               DidYouMean(ownership, {"kubelet", "self"}));
  }
  if (cfg.pod_manifest_path.empty() && cfg.manifest_url.empty() && !ClusterMode(cfg)) {
    return base::Status::Error(
        "no pod source: give --pod-manifest-path DIR and/or --manifest-url URL (standalone), or "
        "--kubeconfig FILE / --in-cluster (cluster mode)");
  }
  if (!ClusterMode(cfg)) {
    for (const auto& [flag, present] :
         {std::pair{"--no-secrets", no_secrets},
          std::pair{"--object-namespaces", !object_namespaces.empty()}}) {
      if (present) {
        return base::Status::Error(std::string(flag) +
                                   ": needs cluster mode (--kubeconfig or --in-cluster): it says "
                                   "what the daemon may read from the API server; standalone, "
                                   "objects come from --object-manifest-path");
      }
    }
  }
  if (ClusterMode(cfg) && !cfg.object_manifest_path.empty()) {
    return base::Status::Error(
        "--object-manifest-path: standalone only; in cluster mode ConfigMaps and Secrets come "
        "from the API server");
  }
  ParsedFlags parsed;
  parsed.config = cfg;
  parsed.validate_only = validate_only;
  return parsed;
}

// Whether `message` names `flag` (followed by a separator, so --v does not match --volume-...).
bool Names(const std::string& message, const std::string& flag) {
  for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
    const size_t end = at + flag.size();
    if (end == message.size() || message[end] == ':' || message[end] == ' ' ||
        message[end] == '=' || message[end] == ',') {
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> SplitEmptyValues(
    const std::vector<std::string>& args,
    const std::function<bool(const std::string& flag)>& takes_value) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    if (arg.size() > 3 && arg.starts_with("--") && arg.find('=') == arg.size() - 1 &&
        takes_value(arg.substr(0, arg.size() - 1))) {
      out.push_back(arg.substr(0, arg.size() - 1));
      out.push_back("");
      continue;
    }
    out.push_back(arg);
  }
  return out;
}

base::Result<std::string> ReadConfigFile(const std::string& path) {
  // Followed through symlinks: a config from a ConfigMap volume is a link through ..data.
  return base::ReadRegularFile(path, kMaxConfigFileBytes, /*follow_symlinks=*/true);
}

std::string ResolveNodeName(const std::string& flag,
                            const std::map<std::string, std::string>& environment,
                            const std::string& hostname) {
  std::string name = flag;
  if (name.empty()) {
    auto it = environment.find("NODE_NAME");
    name = it != environment.end() && !it->second.empty() ? it->second : hostname;
  }
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

base::Result<ParsedFlags> ParseDaemonFlags(const std::vector<std::string>& args,
                                           const std::map<std::string, std::string>& environment,
                                           const std::string& hostname,
                                           const ReadFileFunction& read_file,
                                           const std::optional<std::string>& dynamic_config) {
  std::set<std::string> given;
  std::string config_file;
  auto first = ParseArgs(args, environment, hostname, &given, &config_file);
  // Layers of fields below the command line, lowest first: the file, then the dynamic config.
  struct Layer {
    std::string where;   // error context
    std::string source;  // "file" or "dynamic"
    FileArgs fields;
  };
  std::vector<Layer> layers;
  auto with_sources = [&](base::Result<ParsedFlags> r) -> base::Result<ParsedFlags> {
    if (!r.ok() || !r->config) return r;
    r->config_file = config_file;
    for (const ConfigField& f : ConfigFields()) {
      std::string source = given.count(f.flag) ? "flag" : "default";
      for (auto layer = layers.rbegin(); source == "default" && layer != layers.rend(); ++layer) {
        const auto& names = layer->fields.fields;
        if (std::find(names.begin(), names.end(), f.name) != names.end()) source = layer->source;
      }
      r->sources[f.name] = source;
    }
    if (r->validate_only) {
      r->output = Configz(*r->config, config_file, r->sources).dump(2) + "\n";
      r->config.reset();
    }
    return r;
  };
  if (first.ok() && !first->config) return with_sources(std::move(first));
  if (config_file.empty() && !dynamic_config) return with_sources(std::move(first));

  if (!config_file.empty()) {
    const std::string where = "--config " + config_file;
    auto text = read_file(config_file);
    if (!text.ok()) return text.status().WithContext("--config");  // the error names the path
    auto file = ConfigFileArgs(*text);
    if (!file.ok()) return file.status().WithContext(where);
    layers.push_back({where, "file", std::move(file).value()});
  }
  if (dynamic_config) {
    const std::string where = "dynamic config";
    auto dynamic = ConfigFileArgs(*dynamic_config);
    if (!dynamic.ok()) return dynamic.status().WithContext(where);
    for (const std::string& name : dynamic->fields) {
      if (DynamicConfigForbidden(name)) {
        return base::Status::Error(where + ": field " + name +
                                   ": cannot be set by the dynamic config (give it as a flag or "
                                   "in --config)");
      }
    }
    layers.push_back({where, "dynamic", std::move(dynamic).value()});
  }
  std::vector<std::string> merged;
  for (const Layer& layer : layers) {
    merged.insert(merged.end(), layer.fields.args.begin(), layer.fields.args.end());
  }
  merged.insert(merged.end(), args.begin(), args.end());
  std::set<std::string> given_merged;
  std::string again;
  auto second = ParseArgs(merged, environment, hostname, &given_merged, &again);
  if (!second.ok()) {
    // The layers' values pass the flags' checks: name the field when its value is at fault (the
    // highest layer that set it, unless the command line did).
    const std::string message = second.status().message();
    for (auto layer = layers.rbegin(); layer != layers.rend(); ++layer) {
      for (const ConfigField& f : ConfigFields()) {
        const auto& names = layer->fields.fields;
        if (given.count(f.flag) || std::find(names.begin(), names.end(), f.name) == names.end()) {
          continue;
        }
        if (Names(message, f.flag)) {
          return second.status().WithContext(layer->where + ": field " + f.name);
        }
      }
    }
    return second;
  }
  return with_sources(std::move(second));
}

}  // namespace config
