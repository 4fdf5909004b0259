// TokenManager: where the volume manager gets the service account tokens of projected
// serviceAccountToken sources (kube::TokenRef names one), and how it learns that one was renewed:
// the kubelet's token manager (pkg/kubelet/token) behind an interface shaped like ObjectManager's
// (object_manager.h), so that a token reaches a volume the way an object does. Implementation:
// ApiTokenManager (api_token_manager.h, cluster mode: the TokenRequest API); a fake in tests.
// Standalone mode has none: a token source there fails, naming the source.
//
// Contract:
//   * A pod's tokens are registered before its volumes are mounted and unregistered when the pod
//     goes (RegisterPod replaces the pod's earlier registration); a token no registered pod uses
//     is forgotten, and a get of it fails.
//   * Fetch(refs, done) before a mount or remount, asynchronously: `done` runs on the loop thread
//     once a get of each ref returns a current token or the error that kept it from doing so (a
//     token past its refresh time is requested again; concurrent fetches share one request).
//     `done` runs exactly once, at once when nothing needs a request, also when the manager stops
//     first, never after it is destroyed.
//   * The change handler runs on the loop thread when a ref's token changed (a new token landed,
//     or the one held expired): the volumes that use it are remounted.
//   * Tokens are immutable snapshots; a revision's `serial` changes with every new token, so a
//     volume's inputs (volume_inputs.h) change with it without the token being hashed or compared.
//   * No token ever reaches a log line, an error, a status or a metric: they name the service
//     account, the pod, the audience and the expiry.
//
// Thread model: loop thread only, including the change handler.
#ifndef VOLUMEMANAGER_CACHE_TOKEN_MANAGER_H_
#define VOLUMEMANAGER_CACHE_TOKEN_MANAGER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/token_ref.h"

namespace cache {

// One token as served.
struct TokenRevision {
  std::shared_ptr<const std::string> token;
  // Unique per token the manager received: equal serials, the same token.
  uint64_t serial = 0;
  std::chrono::system_clock::time_point expires_at;
};

// What /debug/state shows of one token: times and errors, never the token.
struct TokenStatus {
  bool has_token = false;
  std::chrono::system_clock::time_point expires_at;  // of the token held
  std::chrono::system_clock::time_point refresh_at;  // when it is requested again
  bool requesting = false;
  std::string last_error;  // of the last request ("" when it succeeded), or why none is made
};

class TokenManager {
 public:
  virtual ~TokenManager() = default;

  virtual void RegisterPod(const std::string& pod_uid, const std::vector<kube::TokenRef>& refs) = 0;
  virtual void UnregisterPod(const std::string& pod_uid) = 0;

  // The token, or an error naming the service account (never a token): not registered, never
  // received, refused, expired with its refresh failing.
  virtual base::Result<TokenRevision> Get(const kube::TokenRef& ref) const = 0;

  virtual void Fetch(const std::vector<kube::TokenRef>& refs, std::function<void()> done) = 0;

  virtual void SetChangeHandler(std::function<void(const kube::TokenRef&)> handler) = 0;

  // For /debug/state; nullopt when `ref` is not registered.
  virtual std::optional<TokenStatus> Status(const kube::TokenRef& ref) const = 0;
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_TOKEN_MANAGER_H_
