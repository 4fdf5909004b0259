#include "kubeclient/auth/credentials.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "base/durable_file.h"
#include "base/redacted_url.h"
#include "kube/base64.h"

namespace kubeclient {
namespace {

namespace fs = std::filesystem;

// A kubeconfig, token, CA or namespace file: a regular file (a FIFO is refused, not waited on)
// of at most kMaxCredentialFileBytes.
base::Result<std::string> ReadWholeFile(const std::string& path) {
  auto bytes = base::ReadRegularFile(path, kMaxCredentialFileBytes, /*follow_symlinks=*/true);
  if (!bytes.ok()) {
    return base::Status::Error("cannot read " + bytes.status().message(),
                               bytes.status().sys_errno());
  }
  return bytes;
}

// A kubeconfig's *-data field, decoded as client-go does (Go's StdEncoding).
base::Result<std::string> DecodeDataField(const std::string& in, const std::string& field) {
  base::Result<std::string> bytes = kube::DecodeBase64(in);
  if (!bytes.ok())
    return base::Status::Error(field + " is not valid base64: " + bytes.status().message());
  return bytes;
}

std::string Trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

// `node` may be anything a kubeconfig holds where a mapping belongs (a scalar, a list, nothing):
// indexing those throws in yaml-cpp, so only a mapping is looked into.
std::string Scalar(const YAML::Node& node, const char* key) {
  if (!node.IsDefined() || !node.IsMap()) return "";
  const YAML::Node value = node[key];
  if (!value || !value.IsScalar()) return "";
  return value.Scalar();
}

bool Bool(const YAML::Node& node, const char* key) {
  if (!node.IsDefined() || !node.IsMap()) return false;
  const YAML::Node value = node[key];
  if (!value || !value.IsScalar()) return false;
  return value.Scalar() == "true" || value.Scalar() == "True" || value.Scalar() == "1";
}

// One named entry (cluster, user or context) and the directory of the file that defined it.
struct Entry {
  YAML::Node body;
  std::string dir;
};

struct MergedConfig {
  std::string current_context;
  std::map<std::string, Entry> clusters, users, contexts;
};

base::Status MergeNamedList(const YAML::Node& list, const char* field, const std::string& dir,
                            std::map<std::string, Entry>& into) {
  if (!list) return base::Status::OK();
  if (!list.IsSequence()) return base::Status::Error(std::string(field) + " is not a list");
  for (const YAML::Node& item : list) {
    std::string name = Scalar(item, "name");
    const char* body_key = field == std::string("clusters") ? "cluster"
                           : field == std::string("users")  ? "user"
                                                            : "context";
    if (name.empty()) return base::Status::Error(std::string(field) + " entry without a name");
    if (into.count(name)) continue;
    // An entry without its body (a context with no `context:`) holds a null body, so it fails
    // later as an empty one, by name; yaml-cpp throws on assigning the missing node itself.
    const YAML::Node body = item[body_key];
    into.emplace(name, Entry{body.IsDefined() ? body : YAML::Node(YAML::NodeType::Null), dir});
  }
  return base::Status::OK();
}

std::string Resolve(const std::string& path, const std::string& dir) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(dir) / path).lexically_normal().string();
}

// The `-data` form wins over the path form. `what` names the field in errors. `file` (when
// given) gets the resolved path of the path form, empty for the data form.
base::Result<std::string> PemFrom(const YAML::Node& node, const char* data_key,
                                  const char* path_key, const std::string& dir,
                                  const std::string& what, const KubeconfigFileReader& read,
                                  std::string* file = nullptr) {
  std::string data = Scalar(node, data_key);
  if (!data.empty()) return DecodeDataField(data, what + " " + data_key);
  std::string path = Scalar(node, path_key);
  if (path.empty()) return std::string();
  if (file != nullptr) *file = Resolve(path, dir);
  return read(Resolve(path, dir));
}

// users[].user.exec as client-go reads it (k8s.io/client-go/tools/clientcmd/api ExecConfig).
base::Result<ExecConfig> ParseExec(const YAML::Node& node, const std::string& dir,
                                   const std::string& user) {
  if (!node.IsMap()) return base::Status::Error("not a mapping");
  ExecConfig exec;
  exec.user = user;
  exec.api_version = Scalar(node, "apiVersion");
  if (exec.api_version != "client.authentication.k8s.io/v1" &&
      exec.api_version != "client.authentication.k8s.io/v1beta1") {
    return base::Status::Error("apiVersion \"" + exec.api_version +
                               "\" is not supported (client.authentication.k8s.io/v1 or v1beta1)");
  }
  exec.command = Scalar(node, "command");
  if (exec.command.empty()) return base::Status::Error("no command");
  // As kubectl: a relative path naming a directory is relative to the kubeconfig; a bare name is
  // looked up in PATH.
  if (exec.command.find('/') != std::string::npos) exec.command = Resolve(exec.command, dir);
  if (const YAML::Node args = node["args"]; args) {
    if (!args.IsSequence()) return base::Status::Error("args is not a list");
    for (const YAML::Node& arg : args) {
      if (!arg.IsScalar()) return base::Status::Error("args holds a value that is not a string");
      exec.args.push_back(arg.Scalar());
    }
  }
  if (const YAML::Node env = node["env"]; env && !env.IsNull()) {
    if (!env.IsSequence()) return base::Status::Error("env is not a list");
    for (const YAML::Node& item : env) {
      std::string name = Scalar(item, "name");
      if (name.empty() || name.find('=') != std::string::npos) {
        return base::Status::Error("env entry without a valid name");
      }
      exec.env.emplace_back(name, Scalar(item, "value"));
    }
  }
  exec.install_hint = Scalar(node, "installHint");
  exec.provide_cluster_info = Bool(node, "provideClusterInfo");
  exec.interactive_mode = Scalar(node, "interactiveMode");
  if (exec.interactive_mode.empty()) {
    if (exec.api_version == "client.authentication.k8s.io/v1") {
      return base::Status::Error("interactiveMode must be set for client.authentication.k8s.io/v1");
    }
    exec.interactive_mode = "IfAvailable";  // v1beta1's default
  }
  if (exec.interactive_mode == "Always") {
    return base::Status::Error(
        "interactiveMode Always needs a terminal, and the daemon has none (use Never or "
        "IfAvailable)");
  }
  if (exec.interactive_mode != "Never" && exec.interactive_mode != "IfAvailable") {
    return base::Status::Error("interactiveMode \"" + exec.interactive_mode +
                               "\" is not Never, IfAvailable or Always");
  }
  return exec;
}

}  // namespace

EnvironmentLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

base::Result<Credentials> LoadKubeconfig(const std::vector<std::string>& files,
                                         const std::string& context) {
  std::vector<KubeconfigFile> read;
  for (const std::string& file : files) {
    if (file.empty()) continue;
    auto text = ReadWholeFile(file);
    if (!text.ok()) return base::Status::Error("kubeconfig " + file + ": cannot read file", ENOENT);
    read.push_back(KubeconfigFile{file, std::move(text).value()});
  }
  return ParseKubeconfig(read, context, ReadWholeFile);
}

namespace {

base::Result<Credentials> ParseKubeconfigNodes(const std::vector<KubeconfigFile>& files,
                                               const std::string& context,
                                               const KubeconfigFileReader& read) {
  MergedConfig merged;
  std::string first_file;
  for (const KubeconfigFile& kubeconfig : files) {
    const std::string& file = kubeconfig.path;
    YAML::Node root;
    try {
      root = YAML::Load(kubeconfig.text);
    } catch (const YAML::Exception& e) {
      return base::Status::Error("kubeconfig " + file + ": not valid YAML: " + e.msg);
    }
    if (first_file.empty()) first_file = file;
    if (!root.IsMap()) return base::Status::Error("kubeconfig " + file + ": not a mapping");
    std::string dir = fs::absolute(fs::path(file)).parent_path().string();
    if (merged.current_context.empty()) merged.current_context = Scalar(root, "current-context");
    for (auto [field, target] :
         {std::pair{"clusters", &merged.clusters}, std::pair{"users", &merged.users},
          std::pair{"contexts", &merged.contexts}}) {
      base::Status s = MergeNamedList(root[field], field, dir, *target);
      if (!s.ok()) return s.WithContext("kubeconfig " + file);
    }
  }
  if (first_file.empty()) return base::Status::Error("kubeconfig: no file given");

  std::string context_name = context.empty() ? merged.current_context : context;
  if (context_name.empty()) return base::Status::Error("kubeconfig: no current-context set");
  auto ctx_it = merged.contexts.find(context_name);
  if (ctx_it == merged.contexts.end()) {
    return base::Status::Error("kubeconfig: context \"" + context_name + "\" not found");
  }
  const YAML::Node& ctx = ctx_it->second.body;
  std::string cluster_name = Scalar(ctx, "cluster");
  std::string user_name = Scalar(ctx, "user");
  auto cluster_it = merged.clusters.find(cluster_name);
  if (cluster_it == merged.clusters.end()) {
    return base::Status::Error("kubeconfig: context \"" + context_name + "\": cluster \"" +
                               cluster_name + "\" not found");
  }
  Credentials creds;
  creds.source = "kubeconfig " + first_file + " context " + context_name;
  if (std::string ns = Scalar(ctx, "namespace"); !ns.empty()) creds.default_namespace = ns;

  const YAML::Node& cluster = cluster_it->second.body;
  const std::string& cluster_dir = cluster_it->second.dir;
  const std::string cluster_what = "cluster \"" + cluster_name + "\"";
  creds.server = Scalar(cluster, "server");
  while (!creds.server.empty() && creds.server.back() == '/') creds.server.pop_back();
  if (creds.server.empty()) {
    return base::Status::Error("kubeconfig: " + cluster_what + " has no server");
  }
  if (creds.server.rfind("https://", 0) != 0) {
    return base::Status::Error("kubeconfig: " + cluster_what + ": server " +
                               base::RedactedUrl(creds.server) + " is not an https:// URL");
  }
  creds.tls.insecure_skip_tls_verify = Bool(cluster, "insecure-skip-tls-verify");
  creds.tls.server_name = Scalar(cluster, "tls-server-name");
  std::string ca_path = Scalar(cluster, "certificate-authority");
  std::string ca_data = Scalar(cluster, "certificate-authority-data");
  if (creds.tls.insecure_skip_tls_verify && (!ca_path.empty() || !ca_data.empty())) {
    return base::Status::Error("kubeconfig: " + cluster_what +
                               ": certificate-authority and insecure-skip-tls-verify together "
                               "are not allowed");
  }
  if (!ca_data.empty()) {
    auto pem = DecodeDataField(ca_data, cluster_what + " certificate-authority-data");
    if (!pem.ok()) return pem.status().WithContext("kubeconfig");
    creds.tls.ca_pem = *pem;
  } else if (!ca_path.empty()) {
    creds.tls.ca_file = Resolve(ca_path, cluster_dir);
    auto pem = read(creds.tls.ca_file);
    if (!pem.ok()) return pem.status().WithContext("kubeconfig: " + cluster_what);
    creds.tls.ca_pem = *pem;
  }

  if (user_name.empty()) return creds;  // anonymous
  auto user_it = merged.users.find(user_name);
  if (user_it == merged.users.end()) {
    return base::Status::Error("kubeconfig: context \"" + context_name + "\": user \"" + user_name +
                               "\" not found");
  }
  const YAML::Node& user = user_it->second.body;
  const std::string& user_dir = user_it->second.dir;
  const std::string user_what = "user \"" + user_name + "\"";
  if (user && !user.IsMap() && !user.IsNull()) {
    return base::Status::Error("kubeconfig: " + user_what + " is not a mapping");
  }
  struct Unsupported {
    const char* key;
    const char* what;
  };
  for (const Unsupported& u :
       {Unsupported{"auth-provider", "auth providers"},
        Unsupported{"username", "basic authentication"},
        Unsupported{"password", "basic authentication"}, Unsupported{"as", "impersonation"},
        Unsupported{"as-groups", "impersonation"}, Unsupported{"as-uid", "impersonation"},
        Unsupported{"as-user-extra", "impersonation"}}) {
    if (user && user[u.key]) {
      return base::Status::Error("kubeconfig: " + user_what + ": " + u.what +
                                 " are not supported (use a token, tokenFile or client "
                                 "certificate)");
    }
  }
  if (user && user["exec"]) {
    auto exec = ParseExec(user["exec"], user_dir, user_name);
    if (!exec.ok()) return exec.status().WithContext("kubeconfig: " + user_what + ": exec");
    for (const char* key : {"token", "tokenFile", "client-certificate", "client-certificate-data",
                            "client-key", "client-key-data"}) {
      if (user[key]) {
        return base::Status::Error("kubeconfig: " + user_what + ": exec together with " + key +
                                   " is not supported (use one of them)");
      }
    }
    creds.exec = std::move(*exec);
    return creds;
  }
  creds.token = Scalar(user, "token");
  if (std::string file = Scalar(user, "tokenFile"); !file.empty()) {
    creds.token_file = Resolve(file, user_dir);
  }
  auto cert = PemFrom(user, "client-certificate-data", "client-certificate", user_dir, user_what,
                      read, &creds.tls.client_cert_file);
  if (!cert.ok()) return cert.status().WithContext("kubeconfig");
  auto key = PemFrom(user, "client-key-data", "client-key", user_dir, user_what, read,
                     &creds.tls.client_key_file);
  if (!key.ok()) return key.status().WithContext("kubeconfig");
  if (cert->empty() != key->empty()) {
    return base::Status::Error("kubeconfig: " + user_what +
                               ": a client certificate needs its key and a key its certificate");
  }
  creds.tls.client_cert_pem = *cert;
  creds.tls.client_key_pem = *key;
  return creds;
}

}  // namespace

base::Result<Credentials> ParseKubeconfig(const std::vector<KubeconfigFile>& files,
                                          const std::string& context,
                                          const KubeconfigFileReader& read) {
  // The code above looks only into mappings; this is the wall behind it, so that a shape it did
  // not foresee fails start-up with an error instead of terminating the process (the fuzzer
  // treats reaching it as a finding). yaml-cpp's message names keys, never values.
  try {
    return ParseKubeconfigNodes(files, context, read);
  } catch (const YAML::Exception& e) {
    return base::Status::Error("kubeconfig: unexpected structure: " + e.msg);
  }
}

base::Result<Credentials> LoadInCluster(const EnvironmentLookup& env,
                                        const std::string& service_account_dir) {
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || !port || host->empty() || port->empty()) {
    return base::Status::Error(
        "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set");
  }
  Credentials creds;
  creds.source = "in-cluster";
  std::string h = *host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  creds.server = "https://" + h + ":" + *port;
  creds.token_file = service_account_dir + "/token";
  auto token = ReadWholeFile(creds.token_file);
  if (!token.ok()) return token.status().WithContext("in-cluster service account token");
  creds.token = Trim(*token);
  creds.tls.ca_file = service_account_dir + "/ca.crt";
  auto ca = ReadWholeFile(creds.tls.ca_file);
  if (!ca.ok()) return ca.status().WithContext("in-cluster service account CA");
  creds.tls.ca_pem = *ca;
  if (std::optional<std::string> ns = env("POD_NAMESPACE"); ns && !ns->empty()) {
    creds.default_namespace = *ns;
  } else if (auto file_ns = ReadWholeFile(service_account_dir + "/namespace");
             file_ns.ok() && !Trim(*file_ns).empty()) {
    creds.default_namespace = Trim(*file_ns);
  }
  return creds;
}

base::Result<Credentials> LoadCredentials(const std::string& kubeconfig, bool in_cluster,
                                          const EnvironmentLookup& env) {
  if (in_cluster) {
    auto creds = LoadInCluster(env);
    if (!creds.ok()) return creds.status().WithContext("--in-cluster");
    return creds;
  }
  if (!kubeconfig.empty()) {
    auto creds = LoadKubeconfig({kubeconfig});
    if (!creds.ok()) return creds.status().WithContext("--kubeconfig " + kubeconfig);
    return creds;
  }
  return base::Status::Error(
      "no API server credentials: pass --kubeconfig FILE (e.g. the kubelet's) or --in-cluster "
      "(the pod's service account); $KUBECONFIG and ~/.kube/config are never read");
}

}  // namespace kubeclient
