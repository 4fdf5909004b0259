#include "config/config_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace config {
namespace {

constexpr char kHead[] =
    "apiVersion: volumemanager.io/v1alpha1\nkind: VolumeManagerConfiguration\n";

// ParseDaemonFlags with --config "vm.yaml" holding `file`.
base::Result<ParsedFlags> ParseWithFile(const std::string& file,
                                        std::vector<std::string> flags = {}) {
  flags.insert(flags.begin(), {"--config", "vm.yaml"});
  return ParseDaemonFlags(flags, {}, "host", [file](const std::string& path) {
    EXPECT_EQ(path, "vm.yaml");
    return base::Result<std::string>(file);
  });
}

TEST(ConfigFileTest, EveryFlagHasAField) {
  auto help = ParseDaemonFlags({"--help"}, {}, "host");
  ASSERT_TRUE(help.ok());
  std::set<std::string> fields_flags;
  for (const ConfigField& f : ConfigFields()) fields_flags.insert(f.flag);
  std::set<std::string> flags;
  std::istringstream lines(help->output);
  const std::regex option(R"(^\s+(?:-\w,)?(--[a-z0-9-]+))");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, option)) flags.insert(m[1]);
  }
  for (const char* not_a_field :
       {"--help", "--help-all", "--version", "--config", "--validate-only"}) {
    ASSERT_EQ(flags.erase(not_a_field), 1u) << not_a_field;
  }
  ASSERT_GT(flags.size(), 20u);
  for (const std::string& flag : flags) {
    EXPECT_EQ(fields_flags.count(flag), 1u) << flag << " has no field in the config file";
  }
  EXPECT_EQ(fields_flags.size(), flags.size());
  // --help-all lists the fields too.
  auto help_all = ParseDaemonFlags({"--help-all"}, {}, "host");
  ASSERT_TRUE(help_all.ok());
  EXPECT_NE(help_all->output.find("staticPodPath (--pod-manifest-path): string"),
            std::string::npos);
  EXPECT_NE(help_all->output.find("kind: VolumeManagerConfiguration"), std::string::npos);
}

TEST(ConfigFileTest, DecodesEveryFieldAndSaysWhereEachCameFrom) {
  auto r = ParseWithFile(std::string(kHead) + R"(
rootDir: /data/kubelet
stateDir: /data/vm
nodeName: Node-A
staticPodPath: /etc/pods
staticPodURL: http://127.0.0.1/pods
objectManifestPath: /etc/objects
syncFrequency: 1m30s
configMapAndSecretChangeDetectionStrategy: Cache
objectCacheTTL: 500ms
unpublishedGrace: 2s
nodeAllocatable: {cpu: "4", memory: 8Gi, ephemeral-storage: 1000}
fsync: true
tmpfs: false
logging:
  format: json
  verbosity: 3
loopStallLogThreshold: 50ms
healthzBindAddress: 127.0.0.1:0
debugBindAddress: ""
kubeAPIQPS: 7.5
kubeAPIBurst: 9
volumeOwnership: self
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DaemonConfig& c = *r->config;
  EXPECT_EQ(c.root_dir, "/data/kubelet");
  EXPECT_EQ(c.state_dir, "/data/vm");
  EXPECT_EQ(c.node_name, "node-a");
  EXPECT_EQ(c.pod_manifest_path, "/etc/pods");
  EXPECT_EQ(c.manifest_url, "http://127.0.0.1/pods");
  EXPECT_EQ(c.object_manifest_path, "/etc/objects");
  EXPECT_EQ(c.sync_frequency, std::chrono::seconds(90));
  EXPECT_EQ(c.strategy, cache::ChangeDetectionStrategy::kCache);
  EXPECT_EQ(c.object_cache_ttl, std::chrono::milliseconds(500));
  EXPECT_EQ(c.unpublished_grace, std::chrono::seconds(2));
  EXPECT_EQ(c.node_allocatable,
            (std::map<std::string, std::string>{
                {"cpu", "4"}, {"memory", "8Gi"}, {"ephemeral-storage", "1000"}}));
  EXPECT_TRUE(c.fsync);
  EXPECT_FALSE(c.tmpfs);
  EXPECT_EQ(c.log_format, LogFormat::kJson);
  EXPECT_EQ(c.verbosity, 3);
  EXPECT_EQ(c.loop_stall_log_threshold, std::chrono::milliseconds(50));
  EXPECT_EQ(c.healthz_bind_address, "127.0.0.1:0");
  EXPECT_EQ(c.debug_bind_address, "");
  EXPECT_EQ(c.kube_api_qps, 7.5);
  EXPECT_EQ(c.kube_api_burst, 9);
  EXPECT_EQ(r->config_file, "vm.yaml");
  EXPECT_EQ(r->sources.at("syncFrequency"), "file");
  EXPECT_EQ(r->sources.at("logging.verbosity"), "file");
  EXPECT_EQ(r->sources.at("kubeconfig"), "default");
  EXPECT_EQ(r->sources.size(), ConfigFields().size());
}

TEST(ConfigFileTest, CommandLineFlagsOverrideTheFile) {
  auto r = ParseWithFile(std::string(kHead) + R"(
staticPodPath: /etc/pods
syncFrequency: 2m
fsync: false
tmpfs: false
logging: {verbosity: 3, format: json}
)",
                         {"--sync-frequency", "30s", "--fsync", "-v", "1"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DaemonConfig& c = *r->config;
  EXPECT_EQ(c.sync_frequency, std::chrono::seconds(30));
  EXPECT_TRUE(c.fsync);
  EXPECT_EQ(c.verbosity, 1);
  EXPECT_FALSE(c.tmpfs);                      // from the file
  EXPECT_EQ(c.log_format, LogFormat::kJson);  // from the file
  EXPECT_EQ(c.pod_manifest_path, "/etc/pods");
  EXPECT_EQ(r->sources.at("syncFrequency"), "flag");
  EXPECT_EQ(r->sources.at("fsync"), "flag");
  EXPECT_EQ(r->sources.at("logging.verbosity"), "flag");
  EXPECT_EQ(r->sources.at("logging.format"), "file");
  EXPECT_EQ(r->sources.at("tmpfs"), "file");
  EXPECT_EQ(r->sources.at("rootDir"), "default");

  // A file value the command line overrides is not checked on its own.
  auto bad_but_overridden = ParseWithFile(
      std::string(kHead) + "staticPodPath: p\nsyncFrequency: 0s\n", {"--sync-frequency", "5s"});
  ASSERT_TRUE(bad_but_overridden.ok()) << bad_but_overridden.status().message();
}

TEST(ConfigFileTest, ADynamicConfigOverridesTheFileAndTheFlagsOverrideIt) {
  const std::string file = std::string(kHead) +
                           "kubeconfig: /k\nsyncFrequency: 2m\nfsync: true\nobjectCacheTTL: 5s\n"
                           "unpublishedGrace: 3s\n";
  auto parse = [&](const std::string& dynamic, std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"--config", "vm.yaml"});
    return ParseDaemonFlags(
        flags, {}, "host", [file](const std::string&) { return base::Result<std::string>(file); },
        dynamic);
  };
  auto r = parse(std::string(kHead) + "syncFrequency: 3m\nfsync: false\nobjectCacheTTL: 9s\n",
                 {"--object-cache-ttl", "1s"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->config->sync_frequency, std::chrono::minutes(3));
  EXPECT_FALSE(r->config->fsync);
  EXPECT_EQ(r->config->object_cache_ttl, std::chrono::seconds(1));
  EXPECT_EQ(r->config->unpublished_grace, std::chrono::seconds(3));
  EXPECT_EQ(r->sources.at("syncFrequency"), "dynamic");
  EXPECT_EQ(r->sources.at("fsync"), "dynamic");
  EXPECT_EQ(r->sources.at("objectCacheTTL"), "flag");
  EXPECT_EQ(r->sources.at("unpublishedGrace"), "file");
  EXPECT_EQ(r->config->dynamic_config_dir, "/var/lib/volumemanager/dynamic-config");

  // Errors name the dynamic config's field; fields that locate it or name the node are refused.
  auto bad = parse(std::string(kHead) + "syncFrequency: 0s\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "dynamic config: field syncFrequency: --sync-frequency: must be greater than 0");
  for (const char* field :
       {"stateDir: /x", "nodeName: x", "kubeconfig: /x", "inCluster: true", "dynamicConfig: a/b",
        "dynamicConfigDir: /x", "dynamicConfigTrialDuration: 1m"}) {
    auto refused = parse(std::string(kHead) + field + "\n");
    ASSERT_FALSE(refused.ok()) << field;
    EXPECT_NE(refused.status().message().find("cannot be set by the dynamic config"),
              std::string::npos)
        << refused.status().message();
  }
  EXPECT_TRUE(LiveField("syncFrequency"));
  EXPECT_FALSE(LiveField("configMapAndSecretChangeDetectionStrategy"));
}

TEST(ConfigFileTest, DynamicConfigFlagsAreChecked) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--dynamic-config", "vm-config"}, "--dynamic-config: \"vm-config\" is not namespace/name"},
      {{"--dynamic-config", "a/b/c"}, "is not namespace/name"},
      {{"--dynamic-config", "/b"}, "is not namespace/name"},
      {{"--dynamic-config-trial-duration", "0s"},
       "--dynamic-config-trial-duration: must be greater"},
      {{"--event-qps", "-1"}, "--event-qps: must not be negative"},
  };
  for (const auto& [flags, error] : cases) {
    std::vector<std::string> args = {"--kubeconfig", "/k"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = ParseDaemonFlags(args, {}, "host");
    ASSERT_FALSE(r.ok()) << flags[0];
    EXPECT_NE(r.status().message().find(error), std::string::npos) << r.status().message();
  }
  auto standalone =
      ParseDaemonFlags({"--pod-manifest-path", "/p", "--dynamic-config", "a/b"}, {}, "host");
  ASSERT_FALSE(standalone.ok());
  EXPECT_NE(standalone.status().message().find("--dynamic-config: needs cluster mode"),
            std::string::npos);
}

TEST(ConfigFileTest, StrictDecodingNamesTheField) {
  const struct {
    const char* name;
    std::string file;
    const char* error;
  } cases[] = {
      {"unknown", std::string(kHead) + "syncFrequncy: 1m\n", "unknown field \"syncFrequncy\""},
      {"flag_name_is_not_a_field", std::string(kHead) + "root-dir: /r\n",
       "unknown field \"root-dir\""},
      {"config_in_config", std::string(kHead) + "config: other.yaml\n", "unknown field \"config\""},
      {"unknown_nested", std::string(kHead) + "logging: {formatt: json}\n",
       "unknown field \"logging.formatt\""},
      {"duration_as_number", std::string(kHead) + "syncFrequency: 60\n",
       "field syncFrequency: must be a duration string (Go syntax, e.g. 1m30s), not an integer"},
      {"bool_as_string", std::string(kHead) + "fsync: \"true\"\n",
       "field fsync: must be a boolean, not a string"},
      {"integer_as_float", std::string(kHead) + "kubeAPIBurst: 1.5\n",
       "field kubeAPIBurst: must be a integer, not a number"},
      {"string_as_list", std::string(kHead) + "rootDir: [a]\n",
       "field rootDir: must be a string, not a list"},
      {"map_as_string", std::string(kHead) + "nodeAllocatable: cpu=4\n",
       "field nodeAllocatable: must be a map of resource name to quantity, not a string"},
      {"quantity_as_bool", std::string(kHead) + "nodeAllocatable: {cpu: true}\n",
       "field nodeAllocatable.cpu: must be a quantity (a string such as 8Gi, or an integer), not "
       "a boolean"},
      {"logging_not_a_map", std::string(kHead) + "logging: json\n",
       "field logging: must be a map (format, verbosity), not a string"},
      {"other_version", "apiVersion: volumemanager.io/v1\nkind: VolumeManagerConfiguration\n",
       "field apiVersion: \"volumemanager.io/v1\" is not supported (want "
       "volumemanager.io/v1alpha1)"},
      {"kubelet_kind", "apiVersion: volumemanager.io/v1alpha1\nkind: KubeletConfiguration\n",
       "field kind: \"KubeletConfiguration\" is not supported (want VolumeManagerConfiguration)"},
      {"no_kind", "apiVersion: volumemanager.io/v1alpha1\n",
       "field kind: missing (want VolumeManagerConfiguration)"},
      {"two_documents", std::string(kHead) + "---\n" + kHead,
       "more than one document (want one VolumeManagerConfiguration)"},
      {"empty", "", "no document (want a VolumeManagerConfiguration)"},
      {"not_a_map", "- a\n", "not a map of fields but a list"},
  };
  for (const auto& c : cases) {
    auto r = ParseWithFile(c.file, {"--pod-manifest-path", "p"});
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().message(), std::string("--config vm.yaml: ") + c.error) << c.name;
  }
}

TEST(ConfigFileTest, ValidationGivesTheFlagsMessagesPrefixedWithTheField) {
  const struct {
    const char* file;
    const char* error;
  } cases[] = {
      {"syncFrequency: 0s\n",
       "--config vm.yaml: field syncFrequency: --sync-frequency: must be greater than 0"},
      {"syncFrequency: \"10\"\n",
       "--config vm.yaml: field syncFrequency: --sync-frequency: invalid duration \"10\": missing "
       "unit"},
      {"configMapAndSecretChangeDetectionStrategy: Poll\n",
       "--config vm.yaml: field configMapAndSecretChangeDetectionStrategy: "
       "--config-map-and-secret-change-detection-strategy: unknown configmap and secret manager "
       "mode: Poll (valid: Get, Cache or Watch)"},
      {"logging: {format: xml}\n",
       "--config vm.yaml: field logging.format: --log-format: \"xml\" is not text or json"},
      {"healthzBindAddress: localhost:1\n",
       "--config vm.yaml: field healthzBindAddress: --healthz-bind-address: \"localhost:1\": "
       "\"localhost\" is not an IPv4 address (IPv6 goes in brackets: [::1]:PORT)"},
      {"stateDir: /var/lib/kubelet/pods/x\n",
       "--config vm.yaml: field stateDir: --state-dir /var/lib/kubelet/pods/x: must be outside "
       "/var/lib/kubelet/pods"},
  };
  for (const auto& c : cases) {
    auto r = ParseWithFile(std::string(kHead) + "staticPodPath: p\n" + c.file);
    ASSERT_FALSE(r.ok()) << c.file;
    EXPECT_EQ(r.status().message(), c.error);
  }
  // CLI11's own checks too.
  auto v = ParseWithFile(std::string(kHead) + "staticPodPath: p\nlogging: {verbosity: 20}\n");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message().rfind("--config vm.yaml: field logging.verbosity: ", 0), 0u)
      << v.status().message();
  // A check that needs no field: the same message as with flags only.
  auto none = ParseWithFile(std::string(kHead) + "rootDir: /r\n");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message().rfind("no pod source: ", 0), 0u) << none.status().message();
}

TEST(ConfigFileTest, AnUnreadableFileIsAnErrorNamingIt) {
  auto r = ParseDaemonFlags({"--config", "/nonexistent/vm.yaml"}, {}, "host");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--config: /nonexistent/vm.yaml: No such file or directory");
}

// A device, a FIFO or a directory is refused before any read (a FIFO would block the start for
// ever, /dev/zero would be read without end); a regular file is read up to 1 MiB.
TEST(ConfigFileTest, OnlyARegularFileOfAtMostOneMebibyteIsRead) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("vm-config-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string fifo = (dir / "fifo.yaml").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = (dir / "big.yaml").string();
  {
    std::ofstream out(big);
    out << "rootDir: /r\n";
  }
  fs::resize_file(big, kMaxConfigFileBytes + 1);
  struct Case {
    std::string path;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"/dev/zero", "--config: /dev/zero: not a regular file (a character device)"},
           {fifo, "--config: " + fifo + ": not a regular file (a FIFO)"},
           {dir.string(), "--config: " + dir.string() + ": not a regular file (a directory)"},
           {big, "--config: " + big + ": larger than the limit of 1048576 bytes"},
       }) {
    SCOPED_TRACE(c.path);
    auto r = ParseDaemonFlags({"--config", c.path}, {}, "host");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), c.message);
  }
  fs::resize_file(big, kMaxConfigFileBytes);  // at the limit: read (and then parsed)
  auto r = ParseDaemonFlags({"--config", big}, {}, "host");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("larger"), std::string::npos) << r.status().message();
  fs::remove_all(dir);
}

TEST(ConfigFileTest, EncodedConfigurationDecodesToTheSameConfiguration) {
  auto flags = ParseDaemonFlags(
      {"--pod-manifest-path", "/p", "--sync-frequency", "90s", "--node-allocatable", "cpu=2",
       "--no-tmpfs", "-v", "2", "--log-format", "json", "--kube-api-qps", "2.5"},
      {}, "host");
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  const nlohmann::json encoded = EncodeConfiguration(*flags->config);
  EXPECT_EQ(encoded["apiVersion"], kConfigApiVersion);
  EXPECT_EQ(encoded["syncFrequency"], "1m30s");
  EXPECT_EQ(encoded["tmpfs"], false);
  EXPECT_EQ(encoded["logging"], (nlohmann::json{{"format", "json"}, {"verbosity", 2}}));
  // JSON is YAML: the encoded document is a valid config file.
  auto decoded = ParseWithFile(encoded.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(EncodeConfiguration(*decoded->config), encoded);
}

// Observe mode: the flag, the field (flags win), off by default, and said in --help.
TEST(ConfigFileTest, ObserveIsAFlagAndAField) {
  auto off = ParseWithFile(std::string(kHead) + "staticPodPath: /etc/pods\n");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE(off->config->observe);
  auto file = ParseWithFile(std::string(kHead) + "staticPodPath: /etc/pods\nobserve: true\n");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_TRUE(file->config->observe);
  EXPECT_EQ(file->sources.at("observe"), "file");
  auto flag = ParseWithFile(std::string(kHead) + "staticPodPath: /etc/pods\n", {"--observe"});
  ASSERT_TRUE(flag.ok()) << flag.status().message();
  EXPECT_TRUE(flag->config->observe);
  EXPECT_EQ(flag->sources.at("observe"), "flag");
  auto help = ParseDaemonFlags({"--help"}, {}, "host");
  ASSERT_TRUE(help.ok());
  EXPECT_NE(help->output.find("--observe"), std::string::npos);
  EXPECT_NE(help->output.find("Write nothing"), std::string::npos);
}

// Issue 44: what the daemon may read (the chart's rbac.secrets: false, rbac.namespaces), as flags
// and fields; cluster mode only; bad namespace lists name the flag and the name.
TEST(ConfigFileTest, TheReadPolicyIsFlagsAndFields) {
  auto defaults = ParseDaemonFlags({"--in-cluster"}, {}, "host");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_TRUE(defaults->config->read_secrets);
  EXPECT_TRUE(defaults->config->object_namespaces.empty());

  auto flags = ParseDaemonFlags({"--in-cluster", "--no-secrets", "--object-namespaces", "shop,a"},
                                {}, "host");
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  EXPECT_FALSE(flags->config->read_secrets);
  EXPECT_EQ(flags->config->object_namespaces, (std::vector<std::string>{"shop", "a"}));
  const nlohmann::json encoded = EncodeConfiguration(*flags->config);
  EXPECT_EQ(encoded["secrets"], false);
  EXPECT_EQ(encoded["objectNamespaces"], "shop,a");

  auto file = ParseWithFile(std::string(kHead) +
                            "inCluster: true\nsecrets: false\nobjectNamespaces: shop,a\n");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_FALSE(file->config->read_secrets);
  EXPECT_EQ(file->config->object_namespaces, (std::vector<std::string>{"shop", "a"}));
  EXPECT_EQ(file->sources.at("secrets"), "file");
  EXPECT_EQ(EncodeConfiguration(*file->config), encoded);

  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--pod-manifest-path", "/p", "--no-secrets"},
            "--no-secrets: needs cluster mode (--kubeconfig or --in-cluster): it says what the "
            "daemon may read from the API server; standalone, objects come from "
            "--object-manifest-path"},
           {{"--pod-manifest-path", "/p", "--object-namespaces", "a"},
            "--object-namespaces: needs cluster mode (--kubeconfig or --in-cluster): it says what "
            "the daemon may read from the API server; standalone, objects come from "
            "--object-manifest-path"},
           {{"--in-cluster", "--object-namespaces", "Shop"},
            "--object-namespaces: \"Shop\" is not a namespace name: a lowercase RFC 1123 label "
            "must consist of lower case alphanumeric characters or '-', and must start and end "
            "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
           {{"--in-cluster", "--object-namespaces", "a,,b"},
            "--object-namespaces: \"a,,b\" has an empty name (NAMESPACE,NAMESPACE,...)"},
           {{"--in-cluster", "--object-namespaces", "a,b,a"},
            "--object-namespaces: \"a\" is listed twice"}}) {
    auto bad = ParseDaemonFlags(args, {}, "host");
    ASSERT_FALSE(bad.ok()) << args.back();
    EXPECT_EQ(bad.status().message(), message);
  }
  auto bad_field =
      ParseWithFile(std::string(kHead) + "inCluster: true\nobjectNamespaces: shop.a\n");
  ASSERT_FALSE(bad_field.ok());
  EXPECT_EQ(bad_field.status().message().rfind(
                "--config vm.yaml: field objectNamespaces: --object-namespaces: \"shop.a\" is not "
                "a namespace name",
                0),
            0u)
      << bad_field.status().message();
  auto help = ParseDaemonFlags({"--help"}, {}, "host");
  ASSERT_TRUE(help.ok());
  EXPECT_NE(help->output.find("--no-secrets"), std::string::npos);
  EXPECT_NE(help->output.find("--object-namespaces NAMESPACE,..."), std::string::npos);
}

}  // namespace
}  // namespace config
