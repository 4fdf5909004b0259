#include "config/daemon_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace config {
namespace {

base::Result<ParsedFlags> Parse(std::vector<std::string> args,
                                std::map<std::string, std::string> env = {}) {
  return ParseDaemonFlags(args, env, "My-Host");
}

TEST(DaemonConfigTest, DefaultsAreTheKubeletsAndNodeNameFallsBack) {
  auto r = Parse({"--pod-manifest-path", "/etc/pods"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DaemonConfig& c = *r->config;
  EXPECT_EQ(c.root_dir, "/var/lib/kubelet");
  EXPECT_EQ(c.state_dir, "/var/lib/volumemanager");
  EXPECT_EQ(c.unpublished_grace, std::chrono::seconds(30));
  EXPECT_EQ(c.node_name, "my-host");
  EXPECT_EQ(c.sync_frequency, std::chrono::minutes(1));
  EXPECT_EQ(c.strategy, cache::ChangeDetectionStrategy::kWatch);
  EXPECT_EQ(c.log_format, LogFormat::kText);
  EXPECT_FALSE(c.fsync);
  EXPECT_TRUE(c.tmpfs);
  EXPECT_EQ(c.healthz_bind_address, "0.0.0.0:10358");
  EXPECT_EQ(c.debug_bind_address, "127.0.0.1:10359");

  auto env = Parse({"--manifest-url", "http://127.0.0.1/pods"}, {{"NODE_NAME", "node-7"}});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->config->node_name, "node-7");
  auto flag = Parse({"--manifest-url", "http://u", "--node-name", "n1"}, {{"NODE_NAME", "node-7"}});
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->config->node_name, "n1");
  // Lowercased as the kubelet does, then it must be a name the API accepts.
  auto upper = Parse({"--manifest-url", "http://u", "--node-name", "Node-1"}, {});
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(upper->config->node_name, "node-1");
  auto bad = Parse({"--manifest-url", "http://u", "--node-name", "Bad_Node!"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("--node-name \"bad_node!\": a lowercase RFC 1123", 0), 0u)
      << bad.status().message();
  auto url = Parse({"--manifest-url", "not a url"}, {});
  ASSERT_FALSE(url.ok());
  EXPECT_EQ(url.status().message(), "--manifest-url: scheme must be http or https");
}

TEST(DaemonConfigTest, ParsesEveryFlag) {
  auto r = Parse({"--root-dir=/tmp/root/",
                  "--pod-manifest-path",
                  "p",
                  "--object-manifest-path",
                  "o",
                  "--sync-frequency",
                  "1m30s",
                  "--config-map-and-secret-change-detection-"
                  "strategy",
                  "Cache",
                  "--object-cache-ttl",
                  "500ms",
                  "--log-format",
                  "json",
                  "-v",
                  "3",
                  "--fsync",
                  "--node-allocatable",
                  "cpu=4,memory=8Gi",
                  "--no-tmpfs",
                  "--state-dir",
                  "/tmp/state/",
                  "--unpublished-grace",
                  "2s",
                  "--healthz-bind-address",
                  "[::1]:0",
                  "--debug-bind-address",
                  ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DaemonConfig& c = *r->config;
  EXPECT_EQ(c.root_dir, "/tmp/root");
  EXPECT_EQ(c.state_dir, "/tmp/state");
  EXPECT_EQ(c.unpublished_grace, std::chrono::seconds(2));
  EXPECT_EQ(c.object_manifest_path, "o");
  EXPECT_EQ(c.sync_frequency, std::chrono::seconds(90));
  EXPECT_EQ(c.strategy, cache::ChangeDetectionStrategy::kCache);
  EXPECT_EQ(c.object_cache_ttl, std::chrono::milliseconds(500));
  EXPECT_EQ(c.log_format, LogFormat::kJson);
  EXPECT_EQ(c.verbosity, 3);
  EXPECT_TRUE(c.fsync);
  EXPECT_FALSE(c.tmpfs);
  EXPECT_EQ(c.node_allocatable.at("cpu"), "4");
  EXPECT_EQ(c.node_allocatable.at("memory"), "8Gi");
  EXPECT_EQ(c.healthz_bind_address, "[::1]:0");
  EXPECT_EQ(c.debug_bind_address, "");
}

TEST(DaemonConfigTest, BadInputIsAClearError) {
  const struct {
    std::vector<std::string> args;
    const char* error;
  } cases[] = {
      {{"--pod-manifest-path", "p", "--root-dir", "/r", "--state-dir", "/r/pods/x"},
       "--state-dir /r/pods/x: must be outside /r/pods"},
      {{"--pod-manifest-path", "p", "--state-dir", ""}, "--state-dir: must not be empty"},
      {{"--pod-manifest-path", "p", "--sync-frequency", "10"},
       "--sync-frequency: invalid duration \"10\": missing unit"},
      {{"--pod-manifest-path", "p", "--sync-frequency", "0s"},
       "--sync-frequency: must be greater than 0"},
      {{"--pod-manifest-path", "p", "--config-map-and-secret-change-detection-strategy", "Poll"},
       "--config-map-and-secret-change-detection-strategy: unknown configmap and secret manager "
       "mode: Poll (valid: Get, Cache or Watch)"},
      {{"--pod-manifest-path", "p", "--log-format", "xml"},
       "--log-format: \"xml\" is not text or json"},
      {{},
       "no pod source: give --pod-manifest-path DIR and/or --manifest-url URL (standalone), or "
       "--kubeconfig FILE / --in-cluster (cluster mode)"},
      {{"--kubeconfig", "k", "--in-cluster"}, "--kubeconfig and --in-cluster: give one, not both"},
      {{"--pod-manifest-path", "p", "--volume-ownership", "kubelet"},
       "--volume-ownership kubelet: needs cluster mode (--kubeconfig or --in-cluster); standalone "
       "mode sets up its volumes itself"},
      {{"--in-cluster", "--volume-ownership", "both"},
       "--volume-ownership: \"both\" is not kubelet or self"},
      {{"--in-cluster", "--object-manifest-path", "o"},
       "--object-manifest-path: standalone only; in cluster mode ConfigMaps and Secrets come from "
       "the API server"},
      {{"--in-cluster", "--kube-api-burst", "-1"}, "--kube-api-burst: must not be negative"},
      {{"--in-cluster", "--kube-api-qps", "-1"}, "--kube-api-qps: must not be negative"},
      {{"--pod-manifest-path", "p", "--healthz-bind-address", "localhost:10358"},
       "--healthz-bind-address: \"localhost:10358\": \"localhost\" is not an IPv4 address "
       "(IPv6 goes in brackets: [::1]:PORT)"},
      {{"--pod-manifest-path", "p", "--debug-bind-address", "127.0.0.1:70000"},
       "--debug-bind-address: \"127.0.0.1:70000\": port \"70000\" is not 0-65535"},
      {{"--pod-manifest-path", "p", "--debug-bind-address", "127.0.0.1"},
       "--debug-bind-address: \"127.0.0.1\" is not IP:PORT (e.g. 127.0.0.1:10359 or "
       "[::1]:10359)"},
      {{"--pod-manifest-path", "p", "--node-allocatable", "gpu=1"},
       "--node-allocatable: unknown resource \"gpu\" (cpu, memory, ephemeral-storage, "
       "hugepages-<size>)"},
  };
  for (const auto& c : cases) {
    auto r = Parse(c.args);
    ASSERT_FALSE(r.ok()) << c.error;
    EXPECT_EQ(r.status().message(), c.error);
  }
  auto unknown = Parse({"--pod-manifest-path", "p", "--no-such-flag"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--no-such-flag"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("(see --help)"), std::string::npos);
}

// A path cut at a NUL by the system calls is another path: no flag value may hold one. A command
// line cannot carry a NUL, but a --config file (YAML "\0", JSON "\u0000") or the dynamic config
// can; the error names the field and the flag, never the value.
TEST(DaemonConfigTest, NoValueMayHoldANulByte) {
  using namespace std::string_literals;
  for (const auto& [flag, value] :
       {std::pair{"--root-dir", "/srv/kubelet\0/x"s}, std::pair{"--state-dir", "/s\0"s},
        std::pair{"--pod-manifest-path", "/etc/kubernetes/manifests\0/../.."s},
        std::pair{"--object-manifest-path", "o\0"s}, std::pair{"--dynamic-config-dir", "/d\0x"s}}) {
    auto r = Parse({"--pod-manifest-path", "p", flag, value});
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_EQ(r.status().message(), std::string(flag) + ": must not contain a NUL byte");
  }
  auto kubeconfig = Parse({"--kubeconfig", "/etc/k\0"s});
  ASSERT_FALSE(kubeconfig.ok());
  EXPECT_EQ(kubeconfig.status().message(), "--kubeconfig: must not contain a NUL byte");

  const auto with_file = [](const std::string& file) {
    return ParseDaemonFlags({"--config", "vm.yaml"}, {}, "host",
                            [file](const std::string&) { return base::Result<std::string>(file); });
  };
  const std::string head =
      "apiVersion: volumemanager.io/v1alpha1\nkind: VolumeManagerConfiguration\n";
  auto yaml = with_file(head + "staticPodPath: p\nrootDir: \"/srv/kubelet\\0/x\"\n");
  ASSERT_FALSE(yaml.ok());
  EXPECT_EQ(yaml.status().message(),
            "--config vm.yaml: field rootDir: --root-dir: must not contain a NUL byte");
  auto json = with_file(
      R"({"apiVersion": "volumemanager.io/v1alpha1", "kind": "VolumeManagerConfiguration",
          "staticPodPath": "/etc/kubernetes/manifests\u0000/x"})");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().message(),
            "--config vm.yaml: field staticPodPath: --pod-manifest-path: must not contain a NUL "
            "byte");
}

TEST(DaemonConfigTest, ClusterModeOnlyWithExplicitCredentials) {
  // $KUBECONFIG is not read: without --kubeconfig/--in-cluster the daemon stays standalone.
  auto standalone = Parse({"--pod-manifest-path", "p"}, {{"KUBECONFIG", "/root/.kube/config"},
                                                         {"KUBERNETES_SERVICE_HOST", "10.0.0.1"}});
  ASSERT_TRUE(standalone.ok()) << standalone.status().message();
  EXPECT_FALSE(ClusterMode(*standalone->config));
  EXPECT_TRUE(standalone->config->kubeconfig.empty());
  EXPECT_EQ(standalone->config->volume_ownership, VolumeOwnership::kSelf);

  auto cluster = Parse(
      {"--kubeconfig", "/etc/vm/kubeconfig", "--kube-api-qps", "20", "--kube-api-burst", "40"});
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  EXPECT_TRUE(ClusterMode(*cluster->config));
  EXPECT_EQ(cluster->config->kubeconfig, "/etc/vm/kubeconfig");
  EXPECT_EQ(cluster->config->kube_api_qps, 20);
  EXPECT_EQ(cluster->config->kube_api_burst, 40);
  EXPECT_EQ(cluster->config->volume_ownership, VolumeOwnership::kKubelet);

  auto self = Parse({"--in-cluster", "--volume-ownership", "self"});
  ASSERT_TRUE(self.ok()) << self.status().message();
  EXPECT_TRUE(self->config->in_cluster);
  EXPECT_EQ(self->config->volume_ownership, VolumeOwnership::kSelf);
  EXPECT_EQ(self->config->kube_api_qps, 50);
  EXPECT_EQ(self->config->kube_api_burst, 100);
}

TEST(DaemonConfigTest, HelpAndVersionAreOutputNotConfig) {
  auto help = Parse({"--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_FALSE(help->config.has_value());
  EXPECT_NE(help->output.find("--sync-frequency"), std::string::npos);
  auto version = Parse({"--version"});
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(version->output.rfind("volumemanager ", 0), 0u);
}

// "--flag=" is the flag's empty value: never the next argument taken as its value.
TEST(DaemonConfigTest, AnEmptyValueAfterTheEqualsSignIsTheEmptyValue) {
  const struct {
    const char* name;
    std::vector<std::string> args;
  } cases[] = {
      {"before a flag with =", {"--pod-manifest-path=p", "--healthz-bind-address=", "--v=2"}},
      {"before a flag and its value",
       {"--pod-manifest-path=p", "--healthz-bind-address=", "-v", "2"}},
      {"last", {"--v=2", "--pod-manifest-path=p", "--healthz-bind-address="}},
  };
  for (const auto& c : cases) {
    auto r = Parse(c.args);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().message();
    EXPECT_EQ(r->config->healthz_bind_address, "") << c.name;
    EXPECT_EQ(r->config->verbosity, 2) << c.name;
    EXPECT_EQ(r->config->debug_bind_address, "127.0.0.1:10359") << c.name;
  }
  // Both listeners off, the next flag still a flag.
  auto both = Parse({"--debug-bind-address=", "--healthz-bind-address=", "--pod-manifest-path=p"});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->config->debug_bind_address, "");
  EXPECT_EQ(both->config->healthz_bind_address, "");
  EXPECT_EQ(both->config->pod_manifest_path, "p");
  // An empty value where one is needed is that flag's error, not the next flag's.
  auto root = Parse({"--root-dir=", "--pod-manifest-path=p"});
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().message(), "--root-dir: must not be empty");
}

TEST(DaemonConfigTest, SplitEmptyValuesSplitsOnlyEmptyValuesOfFlagsThatTakeOne) {
  auto takes_value = [](const std::string& flag) { return flag != "--fsync"; };
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitEmptyValues({"--a=", "--v=2"}, takes_value), (V{"--a", "", "--v=2"}));
  EXPECT_EQ(SplitEmptyValues({"--a=b=", "--fsync=", "x="}, takes_value),
            (V{"--a=b=", "--fsync=", "x="}))
      << "a value ending in '=', a flag without a value, a positional: as they are";
  EXPECT_EQ(SplitEmptyValues({"--=", "--a"}, takes_value), (V{"--=", "--a"}));
}

TEST(DaemonConfigTest, ATypoGetsTheValidValuesOrTheFlagItMeant) {
  const struct {
    std::vector<std::string> args;
    const char* error;
  } cases[] = {
      {{"--pod-manifest-path", "p", "--config-map-and-secret-change-detection-strategy", "watch"},
       "--config-map-and-secret-change-detection-strategy: unknown configmap and secret manager "
       "mode: watch (valid: Get, Cache or Watch; did you mean Watch?)"},
      {{"--in-cluster", "--volume-ownership", "selff"},
       "--volume-ownership: \"selff\" is not kubelet or self (did you mean self?)"},
      {{"--pod-manifest-path", "p", "--log-format", "jsn"},
       "--log-format: \"jsn\" is not text or json (did you mean json?)"},
      {{"--pod-manifest-path", "p", "--leader-elect-resource-lock", "lease"},
       "--leader-elect-resource-lock: \"lease\" is not a lock type (file, leases) (did you mean "
       "leases?)"},
      {{"--pod-manifest-path", "p", "--sync-frequncy", "1m"},
       "unknown flag --sync-frequncy (did you mean --sync-frequency?); unexpected argument \"1m\" "
       "(a flag's value goes after it: --flag VALUE or --flag=VALUE) (see --help)"},
      {{"--pod-manifest-path", "p", "--helthz-bind-address=:1"},
       "unknown flag --helthz-bind-address (did you mean --healthz-bind-address?) (see --help)"},
      {{"--pod-manifest-path", "p", "--bogus"}, "unknown flag --bogus (see --help)"},
  };
  for (const auto& c : cases) {
    auto r = Parse(c.args);
    ASSERT_FALSE(r.ok()) << c.error;
    EXPECT_EQ(r.status().message(), c.error);
  }
}

// --help is for people: flags grouped, types by what they are, valid values and defaults, the
// exit codes and the preflight subcommand.
TEST(DaemonConfigTest, HelpGroupsFlagsAndShowsTypesValuesExitCodesAndPreflight) {
  auto r = Parse({"--help"});
  ASSERT_TRUE(r.ok());
  const std::string& help = r->output;
  size_t at = 0;
  for (const char* group :
       {"General:", "Pod sources", "Objects", "Cluster mode", "Writing volumes", "Admin endpoints",
        "Logging:", "Leader election", "Subcommand:", "Exit codes:"}) {
    const size_t found = help.find(std::string("\n") + group, at);
    ASSERT_NE(found, std::string::npos) << group << " missing or out of order";
    at = found;
  }
  for (const char* text :
       {"--sync-frequency DURATION=1m", "--healthz-bind-address ADDR=0.0.0.0:10358",
        "--root-dir PATH=/var/lib/kubelet",
        "--config-map-and-secret-change-detection-strategy Get|Cache|Watch=Watch",
        "--volume-ownership kubelet|self", "--log-format text|json=text",
        "--leader-elect-resource-lock file|leases=file", "volumemanager preflight --kubeconfig",
        "  2  a flag", "  6  lost the node's lock"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
  EXPECT_EQ(help.find(" TEXT"), std::string::npos) << "a flag's type shown as TEXT";
  EXPECT_EQ(help.find("\n\n\n"), std::string::npos) << "two blank lines in a row";
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    // The long flag names and their defaults alone may pass the width.
    if (!line.starts_with("  --") && !line.starts_with("volumemanager:")) {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
}

// --validate-only: the daemon does not run; the effective values are the output, and a bad flag
// is still an error (so the chart test can parse the DaemonSet's args with the binary).
TEST(DaemonConfigTest, ValidateOnlyPrintsTheEffectiveConfigInsteadOfRunning) {
  auto r = Parse({"--validate-only", "--in-cluster", "--root-dir=/var/lib/k0s/kubelet/",
                  "--sync-frequency=90s"},
                 {{"NODE_NAME", "Node-3"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->config.has_value());
  const nlohmann::json out = nlohmann::json::parse(r->output);
  EXPECT_EQ(out["volumemanager"]["rootDir"], "/var/lib/k0s/kubelet");
  EXPECT_EQ(out["volumemanager"]["nodeName"], "node-3");
  EXPECT_EQ(out["volumemanager"]["syncFrequency"], "1m30s");
  EXPECT_EQ(out["volumemanager"]["volumeOwnership"], "kubelet");
  EXPECT_EQ(out["sources"]["syncFrequency"], "flag");
  EXPECT_EQ(out["sources"]["stateDir"], "default");

  auto bad = Parse({"--validate-only", "--in-cluster", "--state-dir=/var/lib/kubelet/pods/x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--state-dir /var/lib/kubelet/pods/x: must be outside /var/lib/kubelet/pods");
}

}  // namespace
}  // namespace config
