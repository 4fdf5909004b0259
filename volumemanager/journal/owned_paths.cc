#include "volumemanager/journal/owned_paths.h"

#include <algorithm>

namespace volumemanager {

namespace {
constexpr std::string_view kPods = "pods/";
}  // namespace

bool OwnedPaths::Split(std::string_view path, std::string_view* uid, std::string_view* rest) {
  if (!path.starts_with(kPods)) return false;
  path.remove_prefix(kPods.size());
  const size_t slash = path.find('/');
  *uid = path.substr(0, slash);
  if (uid->empty()) return false;
  if (slash == std::string_view::npos) {
    *rest = {};
    return true;
  }
  *rest = path.substr(slash + 1);
  return !rest->empty();  // "pods/<uid>/" is no path
}

OwnedPaths::Entries::const_iterator OwnedPaths::LowerBound(const Entries& entries,
                                                           std::string_view rest) {
  return std::lower_bound(entries.begin(), entries.end(), rest,
                          [](const Entry& e, std::string_view r) { return *e.rest < r; });
}

const std::string* OwnedPaths::Intern(std::string_view rest) {
  auto it = rests_.find(rest);
  if (it == rests_.end()) it = rests_.emplace(std::string(rest), 0).first;
  ++it->second;
  return &it->first;
}

void OwnedPaths::Release(const std::string* rest) {
  auto it = rests_.find(*rest);
  if (it != rests_.end() && --it->second == 0) rests_.erase(it);
}

const OwnedPaths::Owned* OwnedPaths::Find(std::string_view path) const {
  std::string_view uid;
  std::string_view rest;
  if (!Split(path, &uid, &rest)) return nullptr;
  auto pod = pods_.find(uid);
  if (pod == pods_.end()) return nullptr;
  auto it = LowerBound(pod->second, rest);
  return it != pod->second.end() && *it->rest == rest ? &it->owned : nullptr;
}

OwnedPaths::Owned* OwnedPaths::Find(std::string_view path) {
  return const_cast<Owned*>(static_cast<const OwnedPaths*>(this)->Find(path));
}

std::pair<OwnedPaths::Owned*, bool> OwnedPaths::Emplace(std::string_view path, Owned value) {
  std::string_view uid;
  std::string_view rest;
  if (!Split(path, &uid, &rest)) return {nullptr, false};
  auto pod = pods_.find(uid);
  if (pod == pods_.end()) pod = pods_.emplace(std::string(uid), Entries{}).first;
  Entries& entries = pod->second;
  auto at = LowerBound(entries, rest);
  if (at != entries.end() && *at->rest == rest) {
    return {&entries[at - entries.begin()].owned, false};
  }
  const size_t index = at - entries.begin();
  // A pod has a handful of entries: grown one at a time, the vector holds no spare slots.
  if (entries.size() == entries.capacity()) entries.reserve(entries.size() + 1);
  entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(index), Entry{Intern(rest), value});
  ++size_;
  return {&entries[index].owned, true};
}

bool OwnedPaths::Erase(std::string_view path) {
  std::string_view uid;
  std::string_view rest;
  if (!Split(path, &uid, &rest)) return false;
  auto pod = pods_.find(uid);
  if (pod == pods_.end()) return false;
  Entries& entries = pod->second;
  auto at = LowerBound(entries, rest);
  if (at == entries.end() || *at->rest != rest) return false;
  const std::string* interned = at->rest;
  entries.erase(at);
  Release(interned);
  --size_;
  if (entries.empty()) {
    pods_.erase(pod);
  } else if (entries.capacity() > 2 * entries.size()) {
    entries.shrink_to_fit();
  }
  return true;
}

void OwnedPaths::Visit(const std::string& uid, const Entries& entries,
                       const std::function<void(const std::string&, const Owned&)>& f) {
  const std::string pod = std::string(kPods) + uid;
  for (const Entry& e : entries) f(e.rest->empty() ? pod : pod + "/" + *e.rest, e.owned);
}

void OwnedPaths::ForEach(const std::function<void(const std::string&, const Owned&)>& f) const {
  for (const auto& [uid, entries] : pods_) Visit(uid, entries, f);
}

void OwnedPaths::ForEachOfPod(
    std::string_view uid, const std::function<void(const std::string&, const Owned&)>& f) const {
  auto pod = pods_.find(uid);
  if (pod != pods_.end()) Visit(pod->first, pod->second, f);
}

}  // namespace volumemanager
