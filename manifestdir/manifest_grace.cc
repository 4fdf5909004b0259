#include "manifestdir/manifest_grace.h"

#include <algorithm>

#include "base/uv_timer.h"

namespace manifestdir {

ManifestGrace::~ManifestGrace() { Stop(); }

void ManifestGrace::Start(uv_loop_t* loop, std::chrono::milliseconds window, Expired expired) {
  loop_ = loop;
  window_ = window;
  expired_ = std::move(expired);
  if (window_.count() > 0 && timer_ == nullptr) timer_ = base::NewTimer(loop_, this);
}

void ManifestGrace::Stop() {
  expired_ = nullptr;
  pending_.clear();
  if (timer_ != nullptr) {
    base::CloseTimer(timer_);
    timer_ = nullptr;
  }
}

bool ManifestGrace::Gone(const std::string& name) {
  if (timer_ == nullptr || !expired_) return false;
  pending_[name] = {Kind::kGone, std::chrono::steady_clock::now() + window_};
  Arm();
  return true;
}

bool ManifestGrace::Present(const std::string& name) {
  auto it = pending_.find(name);
  if (it == pending_.end() || it->second.kind != Kind::kGone) return false;
  pending_.erase(it);
  return true;
}

bool ManifestGrace::Invalid(const std::string& name) {
  if (timer_ == nullptr || !expired_) return false;
  auto [it, inserted] = pending_.try_emplace(
      name, Pending{Kind::kInvalid, std::chrono::steady_clock::now() + window_});
  if (!inserted) {
    if (it->second.kind == Kind::kInvalid) return true;  // the first failure's deadline holds
    it->second = {Kind::kInvalid, std::chrono::steady_clock::now() + window_};
  }
  Arm();
  return true;
}

bool ManifestGrace::Valid(const std::string& name) {
  auto it = pending_.find(name);
  if (it == pending_.end() || it->second.kind != Kind::kInvalid) return false;
  pending_.erase(it);
  return true;
}

bool ManifestGrace::GonePending(const std::string& name) const {
  auto it = pending_.find(name);
  return it != pending_.end() && it->second.kind == Kind::kGone;
}

bool ManifestGrace::InvalidPending(const std::string& name) const {
  auto it = pending_.find(name);
  return it != pending_.end() && it->second.kind == Kind::kInvalid;
}

// The timer is set for the earliest deadline; each Fire reports what has expired and re-arms.
void ManifestGrace::Arm() {
  if (timer_ == nullptr || pending_.empty()) return;
  auto earliest =
      std::min_element(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) {
        return a.second.deadline < b.second.deadline;
      })->second.deadline;
  const auto wait =
      std::chrono::ceil<std::chrono::milliseconds>(earliest - std::chrono::steady_clock::now());
  uv_timer_start(
      timer_, [](uv_timer_t* t) { static_cast<ManifestGrace*>(t->data)->Fire(); },
      static_cast<uint64_t>(std::max<int64_t>(0, wait.count())), 0);
}

void ManifestGrace::Fire() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> gone;
  std::vector<std::string> invalid;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    (it->second.kind == Kind::kGone ? gone : invalid).push_back(it->first);
    it = pending_.erase(it);
  }
  Arm();
  if ((!gone.empty() || !invalid.empty()) && expired_) {
    Expired expired = expired_;  // it may Stop
    expired(gone, invalid);
  }
}

}  // namespace manifestdir
