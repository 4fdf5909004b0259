#include "cmd/volumemanager/preflight_command.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "cmd/volumemanager/preflight.h"
#include "config/daemon_config.h"
#include "kubeclient/credentials.h"

namespace volumemanager {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

int RunPreflightCommand(const std::vector<std::string>& args) {
  CLI::App app{
      "Checks that volumemanager can reach and use the API server from this node, as the "
      "identity it runs as (node or service account) and for the set-up chosen.",
      "volumemanager preflight"};
  std::string kubeconfig;
  std::string context;
  std::string node_name;
  std::string lock = "file";
  kube::PreflightOptions options;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", context, "kubeconfig context (default: current-context)");
  app.add_option("--node-name", node_name,
                 "this node's name (default: $NODE_NAME, else the host name, as the daemon's)");
  app.add_option("--namespace", options.namespace_name,
                 "namespace of the Lease lock, and the one read when the node has no pods "
                 "(default: the credentials' namespace)");
  app.add_option("--leader-elect-resource-lock", lock,
                 "the daemon's lock: file (no API rights) or leases (Lease rights checked)")
      ->check(CLI::IsMember({"file", "leases"}));
  // "--flag=" is the empty value, not a swallow of the next argument.
  const std::vector<std::string> split =
      config::SplitEmptyValues(args, [&](const std::string& flag) {
        const CLI::Option* opt = app.get_option_no_throw(flag);
        return opt != nullptr && opt->get_type_size() != 0;
      });
  std::vector<std::string> reversed(split.rbegin(), split.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "volumemanager preflight: %s (see --help)\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  std::map<std::string, std::string> environment;
  if (const char* env = std::getenv("NODE_NAME")) environment["NODE_NAME"] = env;
  options.node_name = config::ResolveNodeName(node_name, environment, HostName());
  options.lease_lock = lock == "leases";

  auto credentials = kube::ResolveCredentials(kubeconfig, kube::ProcessEnvironment(), context);
  if (!credentials.ok()) {
    std::printf("FAIL  credentials: %s\n", credentials.status().message().c_str());
    return 1;
  }
  bool all_ok = true;
  for (const kube::PreflightCheck& check : kube::RunPreflight(*credentials, options)) {
    std::printf("%s\n", kube::FormatPreflightCheck(check).c_str());
    all_ok = all_ok && check.ok;
  }
  return all_ok ? 0 : 1;
}

}  // namespace volumemanager
