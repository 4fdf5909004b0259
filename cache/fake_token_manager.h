// FakeTokenManager: an in-memory TokenManager (token_manager.h) for the tests of the modules
// above: set a token (a new serial, the change handler runs), make one fail, hold fetches until
// released, and see registrations and fetches. Loop thread only, header-only.
#ifndef VOLUMEMANAGER_CACHE_FAKE_TOKEN_MANAGER_H_
#define VOLUMEMANAGER_CACHE_FAKE_TOKEN_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/token_manager.h"

namespace cache {

class FakeTokenManager : public TokenManager {
 public:
  void RegisterPod(const std::string& pod_uid, const std::vector<kube::TokenRef>& refs) override {
    if (refs.empty()) {
      registered_.erase(pod_uid);
    } else {
      registered_[pod_uid] = refs;
    }
  }
  void UnregisterPod(const std::string& pod_uid) override { registered_.erase(pod_uid); }

  base::Result<TokenRevision> Get(const kube::TokenRef& ref) const override {
    if (!Registered(ref))
      return base::Status::Error("token for " + ref.Account() + " not registered");
    auto it = tokens_.find(ref);
    if (it == tokens_.end())
      return base::Status::Error("token for " + ref.Account() + " not received yet");
    return it->second;
  }

  void Fetch(const std::vector<kube::TokenRef>& refs, std::function<void()> done) override {
    fetched_.insert(fetched_.end(), refs.begin(), refs.end());
    if (hold_) {
      held_.push_back(std::move(done));
      return;
    }
    done();
  }

  void SetChangeHandler(std::function<void(const kube::TokenRef&)> handler) override {
    handler_ = std::move(handler);
  }

  std::optional<TokenStatus> Status(const kube::TokenRef& ref) const override {
    if (!Registered(ref)) return std::nullopt;
    TokenStatus status;
    auto it = tokens_.find(ref);
    status.has_token = it != tokens_.end() && it->second.ok();
    if (it != tokens_.end() && !it->second.ok()) status.last_error = it->second.status().message();
    return status;
  }

  // A new token for `ref` (a new serial); the change handler runs.
  void Set(const kube::TokenRef& ref, const std::string& token) {
    TokenRevision r;
    r.token = std::make_shared<const std::string>(token);
    r.serial = ++serial_;
    tokens_.insert_or_assign(ref, base::Result<TokenRevision>(r));
    if (handler_) handler_(ref);
  }
  // Gets of `ref` fail with `message`; the change handler runs (as when a token expires).
  void Fail(const kube::TokenRef& ref, const std::string& message) {
    tokens_.insert_or_assign(ref, base::Result<TokenRevision>(base::Status::Error(message)));
    if (handler_) handler_(ref);
  }
  // While held, fetches wait until Release.
  void Hold(bool hold) { hold_ = hold; }
  void Release() {
    std::vector<std::function<void()>> held = std::move(held_);
    held_.clear();
    for (auto& done : held) done();
  }

  size_t held_count() const { return held_.size(); }
  const std::vector<kube::TokenRef>& fetched() const { return fetched_; }
  const std::map<std::string, std::vector<kube::TokenRef>>& registered() const {
    return registered_;
  }

 private:
  bool Registered(const kube::TokenRef& ref) const {
    auto it = registered_.find(ref.pod_uid);
    if (it == registered_.end()) return false;
    for (const kube::TokenRef& r : it->second) {
      if (r == ref) return true;
    }
    return false;
  }

  std::map<std::string, std::vector<kube::TokenRef>> registered_;
  std::map<kube::TokenRef, base::Result<TokenRevision>> tokens_;
  std::function<void(const kube::TokenRef&)> handler_;
  std::vector<kube::TokenRef> fetched_;
  std::vector<std::function<void()>> held_;
  bool hold_ = false;
  uint64_t serial_ = 0;
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_FAKE_TOKEN_MANAGER_H_
