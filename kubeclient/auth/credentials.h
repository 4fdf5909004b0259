// Credentials: where the API server is and how to authenticate to it, from a kubeconfig or from
// the in-cluster service account (docs/kubernetes-api.md §5).
//
// Loading resolves everything that can fail once, at start: the context, cluster and user, the
// base64 `*-data` fields, relative paths (against the kubeconfig file that names them), and the
// combinations client-go refuses (a CA together with insecure-skip-tls-verify, a client
// certificate without its key). Exec credential plugins are resolved (ExecConfig) and run later
// by the HTTP client; users that need an auth provider, basic auth or impersonation fail with a
// clear "not supported" error. Error messages never contain a token or
// key material. Plain values: copy freely; no I/O after loading except through TokenSource,
// ClientCertSource and the CA file, which the HTTP client re-read when they change.
#ifndef VOLUMEMANAGER_KUBECLIENT_AUTH_CREDENTIALS_H_
#define VOLUMEMANAGER_KUBECLIENT_AUTH_CREDENTIALS_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kubeclient {

// The largest kubeconfig, token, CA bundle or namespace file read (a CA bundle of every public
// root is about 200 KiB).
inline constexpr size_t kMaxCredentialFileBytes = 16 << 20;

struct TlsConfig {
  // PEM bundle the server must chain to. Empty with an empty ca_file: the system roots.
  std::string ca_pem;
  // When set the CA comes from this file (in-cluster ca.crt, kubeconfig certificate-authority),
  // and is reloaded when the file changes; ca_pem then holds the copy read at load time.
  std::string ca_file;
  bool insecure_skip_tls_verify = false;
  // tls-server-name: the name verified in the server certificate instead of the URL's host.
  std::string server_name;
  // PEM client certificate and key, both or neither (the copies read at load time).
  std::string client_cert_pem;
  std::string client_key_pem;
  // When set they come from these files (kubeconfig client-certificate / client-key; one file may
  // hold both, as the kubelet's kubelet-client-current.pem does), which ClientCertSource follows
  // as they rotate (client_cert_source.h).
  std::string client_cert_file;
  std::string client_key_file;
};

// An exec credential plugin (kubeconfig users[].user.exec), run by ExecCredentialSource
// (exec_credential.h). Nothing here is secret; env values are passed to the plugin only.
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or v1beta1
  std::string command;      // a relative path with a '/' resolved against the kubeconfig's dir
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string install_hint;
  bool provide_cluster_info = false;
  std::string interactive_mode;  // Never or IfAvailable (Always is refused at load)
  std::string user;              // the kubeconfig user's name, for messages
};

struct Credentials {
  // https://host:port with an optional path prefix, never a trailing slash.
  std::string server;
  TlsConfig tls;
  // A fixed bearer token, and/or a file re-read as it rotates (its last good read wins).
  std::string token;
  std::string token_file;
  // Set when the user's credential comes from an exec plugin (then no token, file or certificate).
  std::optional<ExecConfig> exec;
  // The context's namespace (in-cluster: the pod's), "default" when unset.
  std::string default_namespace = "default";
  // For logs: "kubeconfig <file> context <name>" or "in-cluster". Never secret.
  std::string source;
};

// Reads environment variables; tests inject their own.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvironmentLookup ProcessEnvironment();

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// Merges the kubeconfig files in order (the first file defining a cluster, user, context or
// current-context wins, like KUBECONFIG's colon-separated list) and resolves `context`, or the
// current-context when empty.
base::Result<Credentials> LoadKubeconfig(const std::vector<std::string>& files,
                                         const std::string& context = "");

// One kubeconfig file: its path (relative paths inside resolve against its directory) and text.
struct KubeconfigFile {
  std::string path;
  std::string text;
};
// Reads a file a kubeconfig names (certificate-authority, client-certificate, client-key).
using KubeconfigFileReader = std::function<base::Result<std::string>(const std::string& path)>;
// LoadKubeconfig on files already read, reading the files they name through `read`: the parsing
// and resolution alone, for tests and the fuzzer. Any text fails with a Status, never an exception.
base::Result<Credentials> ParseKubeconfig(const std::vector<KubeconfigFile>& files,
                                          const std::string& context,
                                          const KubeconfigFileReader& read);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT and the service-account directory's token, ca.crt and
// namespace (POD_NAMESPACE wins; fallback "default").
base::Result<Credentials> LoadInCluster(
    const EnvironmentLookup& env, const std::string& service_account_dir = kServiceAccountDir);

// The daemon's credentials, for the daemon and `volumemanager preflight` alike: the kubeconfig
// file of --kubeconfig (its current-context), or with `in_cluster` the pod's service account.
// Nothing else: neither $KUBECONFIG nor ~/.kube/config is read (as the kubelet reads neither), so
// a shell's admin kubeconfig never stands in for the daemon's. An error starts with the flag
// ("--kubeconfig FILE: ", "--in-cluster: "); with neither flag it says to pass one.
base::Result<Credentials> LoadCredentials(const std::string& kubeconfig, bool in_cluster,
                                          const EnvironmentLookup& env);

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_AUTH_CREDENTIALS_H_
