#include "cache/local_object_store.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "kube/manifest_decoder.h"
#include "logging/structured_log.h"

namespace cache {

LocalObjectStore::LocalObjectStore() = default;

LocalObjectStore::~LocalObjectStore() { Stop(); }

LocalObjectStore::Clock::time_point LocalObjectStore::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

// Pool thread: uses only its arguments.
LocalObjectStore::DecodedFile LocalObjectStore::Decode(const std::string& path,
                                                       const std::string& bytes) {
  DecodedFile out;
  if (bytes.empty()) {
    out.empty = true;
    return out;
  }
  base::Result<std::vector<kube::ManifestObject>> decoded = kube::DecodeManifest(bytes, path);
  if (!decoded.ok()) {
    out.objects = decoded.status();
    return out;
  }
  std::vector<std::pair<kube::ObjectRef, ObjectRevision>> objects;
  for (kube::ManifestObject& object : *decoded) {
    ObjectRevision revision;
    if (auto* cm = std::get_if<kube::ConfigMap>(&object)) {
      kube::ObjectRef ref{kube::ObjectKind::kConfigMap, cm->metadata.namespace_, cm->metadata.name};
      revision.digest = ContentDigest(*cm);
      revision.config_map = std::make_shared<const kube::ConfigMap>(std::move(*cm));
      objects.emplace_back(std::move(ref), std::move(revision));
    } else if (auto* secret = std::get_if<kube::Secret>(&object)) {
      kube::ObjectRef ref{kube::ObjectKind::kSecret, secret->metadata.namespace_,
                          secret->metadata.name};
      revision.digest = ContentDigest(*secret);
      revision.secret = std::make_shared<const kube::Secret>(std::move(*secret));
      objects.emplace_back(std::move(ref), std::move(revision));
    } else {
      out.ignored.push_back(std::string(kube::KindOf(object)) + " " +
                            kube::MetadataOf(object).name);
    }
  }
  out.objects = std::move(objects);
  return out;
}

base::Status LocalObjectStore::Start(uv_loop_t* loop, LocalObjectStoreOptions options) {
  if (started_) return base::Status::Error("object store: already started");
  if (options.dir.empty()) return base::Status::Error("object store: empty object manifest path");
  options_ = std::move(options);
  started_ = true;
  scanner_ = std::make_unique<Scanner>(manifestdir::ManifestDirOptions{options_.dir}, &Decode);
  // The first read reports at once: what is broken at start is not caught mid-write.
  Apply(scanner_->ScanNow(manifestdir::ManifestScanScope::kReadAll), false);
  grace_.Start(loop, options_.settle,
               [this](const std::vector<std::string>& gone,
                      const std::vector<std::string>& invalid) { Settled(gone, invalid); });
  scanner_->Start(loop, [this](Scanner::Outcome outcome) {
    Apply(std::move(outcome), options_.strategy == ChangeDetectionStrategy::kWatch);
  });
  manifestdir::ManifestDirWatcherOptions watch;
  watch.path = options_.dir;
  watch.what = "object manifest path";
  watch.relist_interval = options_.relist_interval;
  watch.debounce = options_.debounce;
  watch.max_debounce = options_.max_debounce;
  base::Status s = watcher_.Start(
      loop, std::move(watch),
      [this](manifestdir::ManifestScanScope scope, const std::set<std::string>& named) {
        scanner_->Request(scope, named);
      });
  if (!s.ok()) return s;
  spdlog::info("object store: {} objects from {} files in {} (strategy {})", view_.size(),
               files_.size(), options_.dir, ChangeDetectionStrategyName(options_.strategy));
  return base::Status::OK();
}

void LocalObjectStore::Stop() {
  watcher_.Stop();
  grace_.Stop();
  if (scanner_) scanner_->Stop();
}

void LocalObjectStore::Apply(Scanner::Outcome outcome, bool notify) {
  using Listing = manifestdir::ManifestDirScan::Listing;
  if (outcome.listing == Listing::kFailed) {
    if (dir_error_ != outcome.error) {
      logging::Error("Cannot list the object manifest path; keeping the objects last read",
                     {{"dir", options_.dir}, {"err", outcome.error}});
    }
    dir_error_ = outcome.error;
    return;
  }
  if (outcome.listing == Listing::kMissing && dir_error_.empty() && !files_.empty()) {
    logging::Warn("Object manifest path does not exist; no objects", {{"dir", options_.dir}});
  }
  if (outcome.listing != Listing::kNotListed) dir_error_.clear();

  bool changed = false;  // some file's objects were replaced, or a file with objects went away
  for (const std::string& name : outcome.removed) {
    // Most likely the first half of an unlink and create (a checkout): the objects stay until
    // the settle time passes without the file coming back, so no volume sees them deleted.
    if (grace_.Gone(name)) continue;
    changed |= Remove(name);
  }
  for (Scanner::File& read : outcome.files) {
    grace_.Present(read.name);
    changed |= TakeRead(read, &files_[read.name]);
  }
  if (changed) RebuildView(notify);
}

bool LocalObjectStore::Remove(const std::string& name) {
  failing_.erase(name);
  reported_.erase(name);
  auto it = files_.find(name);
  if (it == files_.end()) return false;
  const bool had_objects = !it->second.objects.empty();
  if (had_objects) {
    logging::Info("Object manifest removed: its objects are gone",
                  {{"file", logging::Value::Path(options_.dir, name)},
                   {"objects", it->second.objects.size()}});
  }
  files_.erase(it);
  return had_objects;
}

void LocalObjectStore::Settled(const std::vector<std::string>& gone,
                               const std::vector<std::string>& invalid) {
  bool changed = false;
  for (const std::string& name : gone) changed |= Remove(name);
  for (const std::string& name : invalid) Report(name);
  if (changed) RebuildView(options_.strategy == ChangeDetectionStrategy::kWatch);
}

void LocalObjectStore::Fail(const std::string& name, const std::string& path, const char* what,
                            const base::Status& error) {
  failing_[name] = {path, what, error};
  if (!grace_.Invalid(name)) Report(name);
}

void LocalObjectStore::Report(const std::string& name) {
  auto f = failing_.find(name);
  if (f == failing_.end()) return;
  manifestdir::RejectedManifest& logged = reported_[name];
  const std::string reason = f->second.error.ok() ? f->second.what : f->second.error.message();
  if (logged.reason == reason) return;
  logged = {f->second.file, reason};
  auto file = files_.find(name);
  const size_t objects = file == files_.end() ? 0 : file->second.objects.size();
  if (f->second.error.ok()) {  // emptied
    logging::Warn(f->second.what, {{"file", f->second.file}, {"objects", objects}});
  } else {
    logging::Error(f->second.what,
                   {{"file", f->second.file}, {"err", f->second.error}, {"objects", objects}});
  }
}

std::vector<manifestdir::RejectedManifest> LocalObjectStore::Rejected() const {
  std::vector<manifestdir::RejectedManifest> out;
  for (const auto& [name, rejected] : reported_) out.push_back(rejected);
  return out;
}

bool LocalObjectStore::TakeRead(Scanner::File& read, ManifestFile* file) {
  const std::string& path = read.path;
  if (!read.status.ok()) {
    // kUnavailable marks a failed read (as against an invalid or emptied file): see below.
    Fail(read.name, path, "Cannot read object manifest; keeping its objects as last read",
         read.status.WithCode(base::StatusCode::kUnavailable));
    return false;
  }
  if (!read.decoded) {
    // The same bytes as the last good read: a failed read in between is over.
    if (auto f = failing_.find(read.name);
        f != failing_.end() && f->second.error.code() == base::StatusCode::kUnavailable) {
      grace_.Valid(read.name);
      failing_.erase(f);
      reported_.erase(read.name);
    }
    return false;
  }
  DecodedFile& decoded = *read.decoded;
  const bool first_read = !file->read;
  file->read = true;
  // An in-place rewrite truncates before it writes: an empty file that had objects keeps them.
  if (decoded.empty && !first_read && !file->objects.empty()) {
    Fail(read.name, path,
         "Object manifest is empty; keeping its objects until it has content or is deleted",
         base::Status::OK());
    return false;
  }
  if (!decoded.objects.ok()) {
    Fail(read.name, path, "Invalid object manifest, keeping its objects as last read",
         decoded.objects.status());
    return false;
  }
  grace_.Valid(read.name);
  failing_.erase(read.name);
  if (reported_.erase(read.name) > 0) {
    logging::Info("Object manifest is valid again", {{"file", path}});
  }
  for (const std::string& what : decoded.ignored) {
    logging::Warn("Object manifest: ignoring a pod: pods belong in the pod manifest path",
                  {{"file", path}, {"ignored", what}});
  }
  auto& objects = *decoded.objects;
  logging::Debug("Object manifest read", {{"file", path}, {"objects", objects.size()}});
  const bool changed = !file->objects.empty() || !objects.empty();
  KeepUnchanged(file->objects, &objects);
  file->objects = std::move(objects);
  return changed;
}

void LocalObjectStore::KeepUnchanged(
    const std::vector<std::pair<kube::ObjectRef, ObjectRevision>>& old,
    std::vector<std::pair<kube::ObjectRef, ObjectRevision>>* next) {
  if (old.empty()) return;
  std::map<kube::ObjectRef, const ObjectRevision*> by_ref;
  for (const auto& [ref, revision] : old) by_ref.try_emplace(ref, &revision);
  for (auto& [ref, revision] : *next) {
    auto it = by_ref.find(ref);
    if (it == by_ref.end()) continue;
    const ObjectRevision& before = *it->second;
    if (before.digest != revision.digest) continue;
    const bool same =
        revision.config_map != nullptr
            ? before.config_map != nullptr && *before.config_map == *revision.config_map
            : revision.secret != nullptr && before.secret != nullptr &&
                  *before.secret == *revision.secret;
    // The revision already served: the new copy goes at once, and the long-lived objects stay
    // where they are in the heap instead of being replaced by copies on every edit of the file.
    if (same) revision = before;
  }
}

void LocalObjectStore::RebuildView(bool notify) {
  std::map<kube::ObjectRef, Served> next;
  for (const auto& [name, file] : files_) {
    for (const auto& [ref, revision] : file.objects) {
      auto [it, inserted] = next.try_emplace(ref, Served{revision, name});
      if (!inserted && logged_duplicates_.insert({ref, name}).second) {
        logging::Warn("Object is defined in two manifests; serving the one from the first",
                      {{"object", logging::KRef(ref)},
                       {"file", logging::Value::Path(options_.dir, it->second.file)},
                       {"alsoIn", logging::Value::Path(options_.dir, name)}});
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
      // Compared by digest: what volumes read from the object (a metadata edit changes none).
      if (a->second.revision.digest != b->second.revision.digest) {
        changed.emplace_back(a->first, "updated");
      }
      ++a;
      ++b;
    }
  }
  view_ = std::move(next);
  for (const auto& [ref, what] : changed) {
    const bool referenced = references_.count(ref) > 0;
    logging::Log(referenced ? spdlog::level::info : spdlog::level::debug,
                 referenced ? "Object changed" : "Object changed (not referenced)",
                 {{"object", logging::KRef(ref)}, {"change", what}});
    if (notify && referenced && on_change_) on_change_(ref);
  }
}

base::Result<ObjectRevision> LocalObjectStore::Lookup(const kube::ObjectRef& ref) {
  if (!references_.count(ref)) return NotRegisteredError(ref.namespace_, ref.name);
  auto it = view_.find(ref);
  if (!dir_error_.empty() &&
      (options_.strategy == ChangeDetectionStrategy::kGet || it == view_.end())) {
    return base::Status::Error("failed to read object manifests in " + options_.dir + ": " +
                               dir_error_);
  }
  std::optional<ObjectRevision> current;
  if (it != view_.end()) current = it->second.revision;
  if (options_.strategy != ChangeDetectionStrategy::kCache)
    return current.value_or(ObjectRevision{});
  // Cache: the answer last fetched, while it is younger than the TTL and no new reference came.
  const Clock::time_point now = Now();
  auto [f, inserted] = fetched_.try_emplace(ref, Fetched{current, now});
  if (!inserted && (invalidated_.erase(ref) > 0 || f->second.at + options_.cache_ttl <= now)) {
    f->second = Fetched{current, now};
  }
  invalidated_.erase(ref);
  return f->second.revision.value_or(ObjectRevision{});
}

base::Result<ObjectRevision> LocalObjectStore::GetRevision(const kube::ObjectRef& ref) {
  return Lookup(ref);
}

base::Result<std::shared_ptr<const kube::ConfigMap>> LocalObjectStore::GetConfigMap(
    const std::string& ns, const std::string& name) {
  base::Result<ObjectRevision> found = Lookup({kube::ObjectKind::kConfigMap, ns, name});
  if (!found.ok()) return found.status();
  return found->config_map;
}

base::Result<std::shared_ptr<const kube::Secret>> LocalObjectStore::GetSecret(
    const std::string& ns, const std::string& name) {
  base::Result<ObjectRevision> found = Lookup({kube::ObjectKind::kSecret, ns, name});
  if (!found.ok()) return found.status();
  return found->secret;
}

void LocalObjectStore::RegisterPod(const std::string& pod_uid,
                                   const std::vector<kube::ObjectRef>& refs) {
  std::set<kube::ObjectRef> next(refs.begin(), refs.end());
  std::set<kube::ObjectRef> old;
  if (auto it = pods_.find(pod_uid); it != pods_.end()) {
    for (const kube::ObjectRef* ref : it->second) old.insert(*ref);
  }
  std::vector<const kube::ObjectRef*> held;
  held.reserve(next.size());
  for (const kube::ObjectRef& ref : next) {
    auto entry = references_.try_emplace(ref, 0).first;
    held.push_back(&entry->first);
    if (old.count(ref)) continue;
    ++entry->second;
    if (options_.strategy == ChangeDetectionStrategy::kCache) invalidated_.insert(ref);
  }
  for (const kube::ObjectRef& ref : old) {
    if (next.count(ref)) continue;
    auto entry = references_.find(ref);
    if (entry != references_.end() && --entry->second <= 0) {
      references_.erase(entry);
      invalidated_.erase(ref);
      fetched_.erase(ref);
    }
  }
  if (next.empty()) {
    pods_.erase(pod_uid);
  } else {
    pods_[pod_uid] = std::move(held);
  }
}

void LocalObjectStore::UnregisterPod(const std::string& pod_uid) { RegisterPod(pod_uid, {}); }

void LocalObjectStore::SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) {
  on_change_ = std::move(handler);
}

}  // namespace cache
