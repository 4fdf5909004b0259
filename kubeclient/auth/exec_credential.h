// ExecCredentialSource: the credential of a kubeconfig user whose `exec` names a plugin (how EKS,
// GKE and AKS kubeconfigs authenticate), obtained the way client-go does
// (k8s.io/client-go/plugin/pkg/client/auth/exec) on the daemon's loop.
//
// Promises:
// * The plugin runs as a child process through libuv (uv_spawn), never blocking the loop: its
//   arguments and the kubeconfig's env added to the daemon's environment, KUBERNETES_EXEC_INFO
//   set as kubectl sets it (an ExecCredential with spec.interactive false, and spec.cluster when
//   provideClusterInfo), stdin /dev/null (never a terminal), stderr discarded (a plugin may print
//   anything there, the credential included, so it reaches no log). It is killed (SIGKILL) when it
//   runs longer than `timeout` or writes more than `max_output` bytes.
// * Its output must be an ExecCredential of the configured apiVersion with status.token and/or
//   status.clientCertificateData + clientKeyData (a matching PEM pair). The credential is cached
//   until status.expirationTimestamp (forever without one) or Invalidate() (a 401); the next Get()
//   then runs the plugin again. One run at a time: callers arriving meanwhile wait for it.
// * Errors name the kubeconfig user, the command, the exit status or signal, and the
//   installHint when the command cannot be found; never the plugin's output or the credential.
// Single-threaded: use it from the loop thread. Destroying it kills a running plugin; no callback
// runs afterwards.
#ifndef VOLUMEMANAGER_KUBECLIENT_AUTH_EXEC_CREDENTIAL_H_
#define VOLUMEMANAGER_KUBECLIENT_AUTH_EXEC_CREDENTIAL_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kubeclient/auth/client_cert_source.h"
#include "kubeclient/auth/credentials.h"

namespace kubeclient {

struct ExecCredential {
  std::string token;                           // empty when the plugin gave a certificate only
  std::shared_ptr<const ClientCertPair> cert;  // null when it gave a token only
  std::optional<std::chrono::system_clock::time_point> expiry;
  uint64_t generation = 0;  // one more for each run that succeeded
};

// Parses a plugin's output (for the source and its tests). Errors never quote `output`.
base::Result<ExecCredential> ParseExecCredential(const std::string& output,
                                                 const std::string& api_version);

class ExecCredentialSource {
 public:
  struct Options {
    std::chrono::milliseconds timeout{30000};
    size_t max_output = 1 << 20;
    std::function<std::chrono::system_clock::time_point()> wall_clock;
  };
  // `cluster`: what provideClusterInfo passes (the server, TLS settings, the CA).
  ExecCredentialSource(uv_loop_t* loop, ExecConfig config, const Credentials& cluster,
                       Options options);
  ~ExecCredentialSource();
  ExecCredentialSource(const ExecCredentialSource&) = delete;
  ExecCredentialSource& operator=(const ExecCredentialSource&) = delete;

  // The cached credential while it has not expired; null otherwise.
  const ExecCredential* Cached();
  // Runs the plugin unless a run is in flight; `done` gets OK once Cached() holds a credential,
  // else the run's error. Never called inside Get().
  void Get(std::function<void(base::Status)> done);
  // After a 401: the cached credential is dropped (unless a run is already getting a new one).
  void Invalidate();
  // "kubeconfig user "U": exec plugin C", for messages.
  std::string Describe() const;
  int runs() const { return runs_; }

 private:
  struct Run;
  void Start();
  void Finish(base::Status status);

  uv_loop_t* loop_;
  ExecConfig config_;
  std::string exec_info_;  // KUBERNETES_EXEC_INFO
  Options options_;
  std::optional<ExecCredential> cached_;
  uint64_t generation_ = 0;
  std::vector<std::function<void(base::Status)>> waiting_;
  Run* run_ = nullptr;  // the run in flight; owns itself until its handles are closed
  int runs_ = 0;
  std::shared_ptr<bool> alive_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_AUTH_EXEC_CREDENTIAL_H_
