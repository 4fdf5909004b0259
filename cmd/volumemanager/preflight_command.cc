#include "cmd/volumemanager/preflight_command.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "kubeclient/credentials.h"
#include "cmd/volumemanager/preflight.h"

namespace volumemanager {

int RunPreflightCommand(const std::vector<std::string>& args) {
  CLI::App app{"Checks that volumemanager can reach and use the API server from this node.",
               "volumemanager preflight"};
  std::string kubeconfig;
  std::string context;
  kube::PreflightOptions options;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", context, "kubeconfig context (default: current-context)");
  app.add_option("--node-name", options.node_name, "this node's name")->required();
  app.add_option("--namespace", options.namespace_name,
                 "namespace of the daemon's Leases and of the ConfigMaps/Secrets to read "
                 "(default: the credentials' namespace)");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
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
