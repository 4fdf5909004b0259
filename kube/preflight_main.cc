// volumemanager-preflight: the `volumemanager preflight` subcommand as a stand-alone binary until
// the daemon's main exists. Prints one line per check; exit 0 when all pass, 1 otherwise.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "kube/credentials.h"
#include "kube/preflight.h"

int main(int argc, char** argv) {
  CLI::App app{"Checks that volumemanager can reach and use the API server from this node."};
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
  CLI11_PARSE(app, argc, argv);
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
