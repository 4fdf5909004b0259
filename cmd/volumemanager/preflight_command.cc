#include "cmd/volumemanager/preflight_command.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "cmd/volumemanager/preflight.h"
#include "config/daemon_config.h"
#include "kubeclient/auth/credentials.h"

namespace volumemanager {
namespace {

constexpr char kPreamble[] =
    "volumemanager preflight [FLAGS]: checks that the daemon, started with the same flags (and\n"
    "--config file), can reach and use the API server from this node, as the identity it runs as\n"
    "(its credentials: --kubeconfig or --in-cluster; $KUBECONFIG is never read). The first line\n"
    "names the credentials and the identity checked, then one line per check: ok, WARN (passed,\n"
    "look at it), SKIP (could not be checked) or FAIL. Exit 0: all passed; 1: a check failed;\n"
    "2: bad flags; 3: nothing failed but a check could not be made (the node's existence\n"
    "without the right to get nodes: a wrong --node-name would go unnoticed).\n"
    "It takes every flag of the daemon:\n\n";

// Where $KUBECONFIG is set but the daemon's credentials are not given: it is ignored, and says so
// (it would have been taken by an earlier preflight, and by kubectl).
std::string KubeconfigEnvHint(const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& environment) {
  auto it = environment.find("KUBECONFIG");
  if (it == environment.end() || it->second.empty()) return "";
  for (const std::string& a : args) {
    if (a.starts_with("--kubeconfig") || a.starts_with("--in-cluster")) return "";
  }
  return "; $KUBECONFIG (" + it->second +
         ") is ignored, as by the daemon: pass the file the daemon will use with --kubeconfig";
}

}  // namespace

int RunPreflightCommand(const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& environment,
                        const std::string& hostname) {
  // The daemon's own parser, flags and --config file: what preflight checks is what the daemon
  // would run as.
  auto parsed = config::ParseDaemonFlags(args, environment, hostname);
  if (!parsed.ok()) {
    std::fprintf(stderr, "volumemanager preflight: %s%s (see --help)\n",
                 parsed.status().message().c_str(), KubeconfigEnvHint(args, environment).c_str());
    return 2;
  }
  if (!parsed->config) {
    if (!parsed->validate_only) std::fputs(kPreamble, stdout);
    std::fputs(parsed->output.c_str(), stdout);
    return 0;
  }
  const config::DaemonConfig& cfg = *parsed->config;
  spdlog::set_level(spdlog::level::warn);
  PreflightOptions options;
  options.node_name = cfg.node_name;
  options.namespace_name = cfg.leader_election.resource_namespace;
  options.lease_lock = cfg.leader_election.leader_elect &&
                       cfg.leader_election.resource_lock == leaderelection::LockType::kLeases;
  options.read_policy.secrets = cfg.read_secrets;
  options.read_policy.namespaces =
      std::set<std::string>(cfg.object_namespaces.begin(), cfg.object_namespaces.end());

  // The daemon's own resolution (cluster_daemon.cc): the flags only.
  auto credentials =
      kubeclient::LoadCredentials(cfg.kubeconfig, cfg.in_cluster, kubeclient::ProcessEnvironment());
  if (!credentials.ok()) {
    std::printf("FAIL  credentials: %s%s\n", credentials.status().message().c_str(),
                KubeconfigEnvHint(args, environment).c_str());
    return 1;
  }
  const PreflightReport report = RunPreflight(*credentials, options);
  std::printf("%s\n", FormatPreflightHeader(report).c_str());
  for (const PreflightCheck& check : report.checks) {
    std::printf("%s\n", FormatPreflightCheck(check).c_str());
  }
  return PreflightExitCode(report.checks);
}

}  // namespace volumemanager
