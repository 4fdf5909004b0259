#include "cache/local_object_store.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "kube/manifest_decoder.h"

namespace cache {
namespace {

template <typename T>
bool SameObject(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  return a == b || (a && b && *a == *b);
}

}  // namespace

LocalObjectStore::LocalObjectStore() = default;

LocalObjectStore::~LocalObjectStore() { Stop(); }

LocalObjectStore::Clock::time_point LocalObjectStore::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

base::Status LocalObjectStore::Start(uv_loop_t* loop, LocalObjectStoreOptions options) {
  if (started_) return base::Status::Error("object store: already started");
  if (options.dir.empty()) return base::Status::Error("object store: empty object manifest path");
  options_ = std::move(options);
  started_ = true;
  dir_ = kube::ManifestDir({options_.dir});
  Rescan(kube::ManifestScanScope::kReadAll, {}, false);
  if (options_.strategy == ChangeDetectionStrategy::kWatch) {
    kube::ManifestDirWatcherOptions watch;
    watch.path = options_.dir;
    watch.what = "object manifest path";
    watch.relist_interval = options_.relist_interval;
    watch.debounce = options_.debounce;
    watch.max_debounce = options_.max_debounce;
    base::Status s =
        watcher_.Start(loop, std::move(watch),
                       [this](kube::ManifestScanScope scope, const std::set<std::string>& named) {
                         Rescan(scope, named, true);
                       });
    if (!s.ok()) return s;
  }
  spdlog::info("object store: {} objects from {} files in {} (strategy {})", view_.size(),
               files_.size(), options_.dir, ChangeDetectionStrategyName(options_.strategy));
  return base::Status::OK();
}

void LocalObjectStore::Stop() { watcher_.Stop(); }

void LocalObjectStore::Rescan(kube::ManifestScanScope scope, const std::set<std::string>& force,
                              bool notify) {
  using Listing = kube::ManifestDirScan::Listing;
  if (scope != kube::ManifestScanScope::kNamed) last_scan_ = Now();
  const kube::ManifestDirScan scan = dir_.Scan(scope, force);
  if (scan.listing == Listing::kFailed) {
    if (dir_error_ != scan.error) {
      spdlog::error("object manifest path {}: {}; keeping the objects last read", options_.dir,
                    scan.error);
    }
    dir_error_ = scan.error;
    return;
  }
  if (scan.listing == Listing::kMissing && dir_error_.empty() && !files_.empty()) {
    spdlog::warn("object manifest path {} does not exist; no objects", options_.dir);
  }
  if (scan.listing != Listing::kNotListed) dir_error_.clear();

  bool changed = false;  // some file's objects were replaced, or a file with objects went away
  for (const std::string& name : scan.removed) {
    auto it = files_.find(name);
    if (it == files_.end()) continue;
    if (!it->second.objects.empty()) {
      spdlog::info("object manifest {}/{} removed: its {} objects are gone", options_.dir, name,
                   it->second.objects.size());
      changed = true;
    }
    files_.erase(it);
  }
  for (const kube::ManifestFileRead& read : scan.reads) {
    changed |= TakeRead(read, &files_[read.name]);
  }
  if (changed) RebuildView(notify);
}

bool LocalObjectStore::TakeRead(const kube::ManifestFileRead& read, ManifestFile* file) {
  const std::string path = dir_.PathOf(read.name);
  file->read_at = Now();
  if (!read.status.ok()) {
    spdlog::error("object manifest {}: {}; keeping its {} objects as last read", path,
                  read.status.message(), file->objects.size());
    return false;
  }
  if (!read.bytes) return false;  // the same bytes as last read
  const bool first_read = !file->read;
  file->read = true;
  if (read.bytes->empty() && !first_read && !file->objects.empty()) {
    spdlog::warn(
        "object manifest {} is empty; keeping its {} objects until it has content or "
        "is deleted",
        path, file->objects.size());
    return false;
  }
  base::Result<std::vector<kube::ManifestObject>> decoded = kube::DecodeManifest(*read.bytes, path);
  if (!decoded.ok()) {
    spdlog::error("invalid object manifest, keeping its {} objects as last read: {}",
                  file->objects.size(), decoded.status().message());
    return false;
  }
  std::vector<std::pair<kube::ObjectRef, Object>> objects;
  for (kube::ManifestObject& object : *decoded) {
    if (auto* cm = std::get_if<kube::ConfigMap>(&object)) {
      kube::ObjectRef ref{kube::ObjectKind::kConfigMap, cm->metadata.namespace_, cm->metadata.name};
      objects.emplace_back(std::move(ref), std::make_shared<const kube::ConfigMap>(std::move(*cm)));
    } else if (auto* secret = std::get_if<kube::Secret>(&object)) {
      kube::ObjectRef ref{kube::ObjectKind::kSecret, secret->metadata.namespace_,
                          secret->metadata.name};
      objects.emplace_back(std::move(ref),
                           std::make_shared<const kube::Secret>(std::move(*secret)));
    } else {
      spdlog::warn("object manifest {}: ignoring {} {}: pods belong in the pod manifest path", path,
                   kube::KindOf(object), kube::MetadataOf(object).name);
    }
  }
  spdlog::debug("object manifest {}: {} objects", path, objects.size());
  const bool changed = !file->objects.empty() || !objects.empty();
  file->objects = std::move(objects);
  return changed;
}

void LocalObjectStore::RebuildView(bool notify) {
  std::map<kube::ObjectRef, Served> next;
  for (const auto& [name, file] : files_) {
    for (const auto& [ref, object] : file.objects) {
      auto [it, inserted] = next.try_emplace(ref, Served{object, name});
      if (!inserted && logged_duplicates_.insert({ref, name}).second) {
        spdlog::warn("{} is defined in {} and again in {}; serving the one from {}", ref.ToString(),
                     it->second.file, name, it->second.file);
      }
    }
  }
  std::vector<std::pair<kube::ObjectRef, const char*>> changed;  // with what happened
  auto a = view_.begin();
  auto b = next.begin();
  while (a != view_.end() || b != next.end()) {
    if (b == next.end() || (a != view_.end() && a->first < b->first)) {
      changed.emplace_back(a->first, "deleted");
      ++a;
    } else if (a == view_.end() || b->first < a->first) {
      changed.emplace_back(b->first, "created");
      ++b;
    } else {
      const bool same = std::visit(
          [&](const auto& old_ptr) {
            using Ptr = std::decay_t<decltype(old_ptr)>;
            const Ptr* new_ptr = std::get_if<Ptr>(&b->second.object);
            return new_ptr != nullptr && SameObject(old_ptr, *new_ptr);
          },
          a->second.object);
      if (!same) changed.emplace_back(a->first, "updated");
      ++a;
      ++b;
    }
  }
  view_ = std::move(next);
  for (const auto& [ref, what] : changed) {
    const bool referenced = references_.count(ref) > 0;
    if (referenced) {
      spdlog::info("{} {}", ref.ToString(), what);
    } else {
      spdlog::debug("{} {} (not referenced)", ref.ToString(), what);
    }
    if (notify && referenced && on_change_) on_change_(ref);
  }
}

void LocalObjectStore::Refresh(const kube::ObjectRef& ref) {
  auto it = view_.find(ref);
  std::set<std::string> force;
  if (it != view_.end()) force.insert(it->second.file);
  bool stale = true;
  if (options_.strategy == ChangeDetectionStrategy::kCache && !invalidated_.erase(ref)) {
    const Clock::time_point read_at =
        it != view_.end() ? files_.at(it->second.file).read_at : last_scan_;
    stale = read_at + options_.cache_ttl <= Now();
  }
  if (stale) Rescan(kube::ManifestScanScope::kStatAll, force, false);
}

base::Result<const LocalObjectStore::Object*> LocalObjectStore::Lookup(const kube::ObjectRef& ref) {
  if (!references_.count(ref)) return NotRegisteredError(ref.namespace_, ref.name);
  if (options_.strategy != ChangeDetectionStrategy::kWatch) Refresh(ref);
  auto it = view_.find(ref);
  if (!dir_error_.empty() &&
      (options_.strategy == ChangeDetectionStrategy::kGet || it == view_.end())) {
    return base::Status::Error("failed to read object manifests in " + options_.dir + ": " +
                               dir_error_);
  }
  return it == view_.end() ? nullptr : &it->second.object;
}

base::Result<std::shared_ptr<const kube::ConfigMap>> LocalObjectStore::GetConfigMap(
    const std::string& ns, const std::string& name) {
  base::Result<const Object*> found = Lookup({kube::ObjectKind::kConfigMap, ns, name});
  if (!found.ok()) return found.status();
  if (*found == nullptr) return std::shared_ptr<const kube::ConfigMap>();
  return std::get<std::shared_ptr<const kube::ConfigMap>>(**found);
}

base::Result<std::shared_ptr<const kube::Secret>> LocalObjectStore::GetSecret(
    const std::string& ns, const std::string& name) {
  base::Result<const Object*> found = Lookup({kube::ObjectKind::kSecret, ns, name});
  if (!found.ok()) return found.status();
  if (*found == nullptr) return std::shared_ptr<const kube::Secret>();
  return std::get<std::shared_ptr<const kube::Secret>>(**found);
}

void LocalObjectStore::RegisterPod(const std::string& pod_uid,
                                   const std::vector<kube::ObjectRef>& refs) {
  std::set<kube::ObjectRef> next(refs.begin(), refs.end());
  std::vector<kube::ObjectRef>& current = pods_[pod_uid];
  std::set<kube::ObjectRef> old(current.begin(), current.end());
  for (const kube::ObjectRef& ref : next) {
    if (old.count(ref)) continue;
    ++references_[ref];
    if (options_.strategy == ChangeDetectionStrategy::kCache) invalidated_.insert(ref);
  }
  for (const kube::ObjectRef& ref : old) {
    if (next.count(ref)) continue;
    if (--references_[ref] <= 0) {
      references_.erase(ref);
      invalidated_.erase(ref);
    }
  }
  if (next.empty()) {
    pods_.erase(pod_uid);
  } else {
    current.assign(next.begin(), next.end());
  }
}

void LocalObjectStore::UnregisterPod(const std::string& pod_uid) { RegisterPod(pod_uid, {}); }

void LocalObjectStore::SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) {
  on_change_ = std::move(handler);
}

}  // namespace cache
