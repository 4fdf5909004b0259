#include "cache/local_object_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "base/sha256.h"
#include "kube/manifest_decoder.h"
#include "logging/structured_log.h"

namespace cache {

LocalObjectStore::LocalObjectStore() = default;

LocalObjectStore::~LocalObjectStore() { Stop(); }

LocalObjectStore::Clock::time_point LocalObjectStore::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

// Pool thread: uses only its arguments.
void LocalObjectStore::AddObjects(std::vector<kube::ManifestObject>* decoded, uint32_t document,
                                  const FileObjects* previous, FileObjects* out) {
  for (kube::ManifestObject& object : *decoded) {
    ObjectRevision revision;
    kube::ObjectRef ref;
    if (auto* cm = std::get_if<kube::ConfigMap>(&object)) {
      ref = {kube::ObjectKind::kConfigMap, cm->metadata.namespace_, cm->metadata.name};
      revision.digest = ContentDigest(*cm);
    } else if (auto* secret = std::get_if<kube::Secret>(&object)) {
      ref = {kube::ObjectKind::kSecret, secret->metadata.namespace_, secret->metadata.name};
      revision.digest = ContentDigest(*secret);
    } else {
      out->ignored.emplace_back(
          document, std::string(kube::KindOf(object)) + " " + kube::MetadataOf(object).name);
      continue;
    }
    // The revision already served, when it is equal: the new copy goes at once, and the
    // long-lived objects stay where they are in the heap. Looked for where it was in the file
    // first: an edit seldom moves the objects around it.
    const ObjectRevision* before = nullptr;
    if (previous != nullptr) {
      const size_t at = out->objects.size();
      auto same_ref = [&](const std::pair<kube::ObjectRef, ObjectRevision>& o) {
        return o.first == ref;
      };
      if (at < previous->objects.size() && same_ref(previous->objects[at])) {
        before = &previous->objects[at].second;
      } else if (auto it =
                     std::find_if(previous->objects.begin(), previous->objects.end(), same_ref);
                 it != previous->objects.end()) {
        before = &it->second;
      }
    }
    if (before != nullptr && before->digest == revision.digest &&
        (ref.kind == kube::ObjectKind::kConfigMap
             ? before->config_map != nullptr &&
                   *before->config_map == std::get<kube::ConfigMap>(object)
             : before->secret != nullptr && *before->secret == std::get<kube::Secret>(object))) {
      revision = *before;
    } else if (auto* cm = std::get_if<kube::ConfigMap>(&object)) {
      revision.config_map = std::make_shared<const kube::ConfigMap>(std::move(*cm));
    } else {
      revision.secret =
          std::make_shared<const kube::Secret>(std::move(std::get<kube::Secret>(object)));
    }
    out->objects.emplace_back(std::move(ref), std::move(revision));
  }
}

// Pool thread.
LocalObjectStore::DecodedFile LocalObjectStore::DecodeWhole(const std::string& path,
                                                            const std::string& bytes,
                                                            const FileObjects* previous,
                                                            DecodeMemo* memo) {
  ++memo->decodes;
  DecodedFile out;
  base::Result<std::vector<kube::ManifestObject>> decoded = kube::DecodeManifest(bytes, path);
  if (!decoded.ok()) {
    out.status = decoded.status();
    return out;
  }
  auto objects = std::make_shared<FileObjects>();
  AddObjects(&*decoded, 0, previous, objects.get());
  out.objects = std::move(objects);
  return out;
}

// Pool thread.
std::shared_ptr<const LocalObjectStore::FileObjects> LocalObjectStore::DecodeDocuments(
    const std::string& path, const std::vector<std::string_view>& pieces,
    const FileObjects* previous, DecodeMemo* memo) {
  auto next = std::make_shared<FileObjects>();
  next->documents.reserve(pieces.size());
  kube::YamlCost total;
  // The previous documents by text, made only when an edit moved them.
  std::map<std::array<char, 16>, size_t> moved;
  for (size_t i = 0; i < pieces.size(); ++i) {
    FileObjects::Document document;
    // A piece reads alike as the stream's last and before another only when it is whole: the
    // two are told apart.
    const bool followed = i + 1 < pieces.size();
    const std::string digest = base::Sha256()
                                   .AddNumber(followed ? 1 : 0)
                                   .AddField(kube::WithoutBareMarker(pieces[i]))
                                   .Finish();
    std::copy_n(digest.begin(), document.text_digest.size(), document.text_digest.begin());
    size_t same = 0;  // the previous document with the same text; none when past the end
    if (previous != nullptr && !previous->documents.empty()) {
      const auto& docs = previous->documents;
      if (i < docs.size() && docs[i].text_digest == document.text_digest) {
        same = i;
      } else {
        if (moved.empty()) {
          for (size_t d = 0; d < docs.size(); ++d) moved.try_emplace(docs[d].text_digest, d);
        }
        auto it = moved.find(document.text_digest);
        same = it == moved.end() ? docs.size() : it->second;
      }
    }
    if (previous != nullptr && same < previous->documents.size()) {
      const auto& docs = previous->documents;
      const size_t begin = same == 0 ? 0 : docs[same - 1].objects_end;
      next->objects.insert(next->objects.end(), previous->objects.begin() + begin,
                           previous->objects.begin() + docs[same].objects_end);
      for (const auto& [d, what] : previous->ignored) {
        if (d == same) next->ignored.emplace_back(static_cast<uint32_t>(i), what);
      }
      document.cost = docs[same].cost;
    } else {
      ++memo->decodes;
      base::Result<std::vector<kube::ManifestObject>> decoded =
          kube::DecodeManifestPiece(pieces[i], followed, path, &document.cost);
      if (!decoded.ok()) return nullptr;
      AddObjects(&*decoded, static_cast<uint32_t>(i), previous, next.get());
    }
    // The limits hold for the whole stream: beyond them the whole file fails, as it should.
    total.nodes += document.cost.nodes;
    total.scalar_bytes += document.cost.scalar_bytes;
    if (total.nodes > kube::kMaxNodes || total.scalar_bytes > kube::kMaxScalarBytes) {
      return nullptr;
    }
    document.objects_end = static_cast<uint32_t>(next->objects.size());
    next->documents.push_back(document);
  }
  return next;
}

// Pool thread: uses only its arguments (the memo is the decodes' own).
LocalObjectStore::DecodedFile LocalObjectStore::Decode(const std::string& path,
                                                       const std::string& bytes, DecodeMemo* memo) {
  if (bytes.empty()) {
    DecodedFile out;
    out.empty = true;
    return out;
  }
  std::shared_ptr<const FileObjects> previous;
  if (auto it = memo->files.find(path); it != memo->files.end()) previous = it->second.lock();
  DecodedFile out;
  const std::vector<std::string_view> pieces = kube::SplitManifestDocuments(bytes);
  if (!pieces.empty()) out.objects = DecodeDocuments(path, pieces, previous.get(), memo);
  // Not cut into documents (JSON, a directive), or a document failed: what is wrong, and where
  // in the file, is the whole file's to say.
  if (!out.objects) out = DecodeWhole(path, bytes, previous.get(), memo);
  if (out.objects) memo->files[path] = out.objects;
  // Entries of files the loop no longer holds go when the map has doubled since the last sweep:
  // a start-up read of 1,000 files is not 1,000 walks of it.
  if (memo->files.size() >= memo->sweep_at) {
    std::erase_if(memo->files, [](const auto& entry) { return entry.second.expired(); });
    memo->sweep_at = std::max<size_t>(64, 2 * memo->files.size());
  }
  return out;
}

base::Status LocalObjectStore::Start(uv_loop_t* loop, LocalObjectStoreOptions options) {
  if (started_) return base::Status::Error("object store: already started");
  if (options.dir.empty()) return base::Status::Error("object store: empty object manifest path");
  options_ = std::move(options);
  started_ = true;
  memo_ = std::make_shared<DecodeMemo>();
  scanner_ =
      std::make_unique<Scanner>(manifestdir::ManifestDirOptions{options_.dir},
                                [memo = memo_](const std::string& path, const std::string& bytes) {
                                  return Decode(path, bytes, memo.get());
                                });
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

  bool everything = false;            // a file with objects went away, or a file's documents moved
  std::vector<kube::ObjectRef> refs;  // else: the objects whose served revision may change
  for (const std::string& name : outcome.removed) {
    // Most likely the first half of an unlink and create (a checkout): the objects stay until
    // the settle time passes without the file coming back, so no volume sees them deleted.
    if (grace_.Gone(name)) continue;
    everything |= Remove(name);
  }
  for (Scanner::File& read : outcome.files) {
    grace_.Present(read.name);
    TakeRead(read, &files_[read.name], &refs, &everything);
  }
  // Each object named is looked for in every file: past a few, one pass over all is cheaper.
  constexpr size_t kMaxObjectsUpdated = 64;
  if (everything || refs.size() > kMaxObjectsUpdated) {
    RebuildView(notify);
  } else if (!refs.empty()) {
    UpdateView(std::move(refs), notify);
  }
}

bool LocalObjectStore::Remove(const std::string& name) {
  failing_.erase(name);
  reported_.erase(name);
  auto it = files_.find(name);
  if (it == files_.end()) return false;
  const bool had_objects = it->second.size() > 0;
  if (had_objects) {
    logging::Info(
        "Object manifest removed: its objects are gone",
        {{"file", logging::Value::Path(options_.dir, name)}, {"objects", it->second.size()}});
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
  const size_t objects = file == files_.end() ? 0 : file->second.size();
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

void LocalObjectStore::TakeRead(Scanner::File& read, ManifestFile* file,
                                std::vector<kube::ObjectRef>* refs, bool* everything) {
  const std::string& path = read.path;
  if (!read.status.ok()) {
    // kUnavailable marks a failed read (as against an invalid or emptied file): see below.
    Fail(read.name, path, "Cannot read object manifest; keeping its objects as last read",
         read.status.WithCode(base::StatusCode::kUnavailable));
    return;
  }
  if (!read.decoded) {
    // The same bytes as the last good read: a failed read in between is over.
    if (auto f = failing_.find(read.name);
        f != failing_.end() && f->second.error.code() == base::StatusCode::kUnavailable) {
      grace_.Valid(read.name);
      failing_.erase(f);
      reported_.erase(read.name);
    }
    return;
  }
  DecodedFile& decoded = *read.decoded;
  const bool first_read = !file->read;
  file->read = true;
  // An in-place rewrite truncates before it writes: an empty file that had objects keeps them.
  if (decoded.empty && !first_read && file->size() > 0) {
    Fail(read.name, path,
         "Object manifest is empty; keeping its objects until it has content or is deleted",
         base::Status::OK());
    return;
  }
  if (!decoded.status.ok()) {
    Fail(read.name, path, "Invalid object manifest, keeping its objects as last read",
         decoded.status);
    return;
  }
  grace_.Valid(read.name);
  failing_.erase(read.name);
  if (reported_.erase(read.name) > 0) {
    logging::Info("Object manifest is valid again", {{"file", path}});
  }
  std::shared_ptr<const FileObjects> next = std::move(decoded.objects);  // null: emptied
  if (next != nullptr) {
    for (const auto& [document, what] : next->ignored) {
      logging::Warn("Object manifest: ignoring a pod: pods belong in the pod manifest path",
                    {{"file", path}, {"ignored", what}});
    }
  }
  logging::Debug("Object manifest read",
                 {{"file", path}, {"objects", next ? next->objects.size() : 0}});
  std::shared_ptr<const FileObjects> old = std::move(file->objects);
  file->objects = std::move(next);
  const FileObjects* now = file->objects.get();
  if (old == nullptr || now == nullptr || old->documents.empty() ||
      old->documents.size() != now->documents.size()) {
    // Objects came or went, or the documents no longer line up: compare everything.
    *everything |=
        (old != nullptr && !old->objects.empty()) || (now != nullptr && !now->objects.empty());
    return;
  }
  // The documents line up: only those whose text changed can change what is served.
  for (size_t d = 0; d < now->documents.size(); ++d) {
    if (old->documents[d].text_digest == now->documents[d].text_digest) continue;
    for (const FileObjects* f : {old.get(), now}) {
      const size_t begin = d == 0 ? 0 : f->documents[d - 1].objects_end;
      for (size_t o = begin; o < f->documents[d].objects_end; ++o) {
        refs->push_back(f->objects[o].first);
      }
    }
  }
}

void LocalObjectStore::RebuildView(bool notify) {
  std::map<kube::ObjectRef, Served> next;
  for (const auto& [name, file] : files_) {
    if (file.objects == nullptr) continue;
    for (const auto& [ref, revision] : file.objects->objects) {
      auto [it, inserted] = next.try_emplace(ref, Served{revision, name});
      if (!inserted) Duplicate(ref, it->second.file, name);
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
  Announce(changed, notify);
}

void LocalObjectStore::UpdateView(std::vector<kube::ObjectRef> refs, bool notify) {
  std::sort(refs.begin(), refs.end());
  refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
  std::vector<std::pair<kube::ObjectRef, const char*>> changed;  // with what happened
  for (const kube::ObjectRef& ref : refs) {
    // The first definition in file-name order, then document order, as RebuildView serves it.
    const ObjectRevision* first = nullptr;
    const std::string* first_file = nullptr;
    for (const auto& [name, file] : files_) {
      if (file.objects == nullptr) continue;
      for (const auto& [r, revision] : file.objects->objects) {
        if (!(r == ref)) continue;
        if (first == nullptr) {
          first = &revision;
          first_file = &name;
        } else {
          Duplicate(ref, *first_file, name);
        }
      }
    }
    auto it = view_.find(ref);
    if (first == nullptr) {
      if (it == view_.end()) continue;
      view_.erase(it);
      changed.emplace_back(ref, "deleted");
    } else if (it == view_.end()) {
      view_.try_emplace(ref, Served{*first, *first_file});
      changed.emplace_back(ref, "created");
    } else {
      if (it->second.revision.digest != first->digest) changed.emplace_back(ref, "updated");
      it->second.revision = *first;
      if (it->second.file != *first_file) it->second.file = *first_file;
    }
  }
  Announce(changed, notify);
}

void LocalObjectStore::Duplicate(const kube::ObjectRef& ref, const std::string& served_from,
                                 const std::string& also_in) {
  if (!logged_duplicates_.insert({ref, also_in}).second) return;
  logging::Warn("Object is defined in two manifests; serving the one from the first",
                {{"object", logging::KRef(ref)},
                 {"file", logging::Value::Path(options_.dir, served_from)},
                 {"alsoIn", logging::Value::Path(options_.dir, also_in)}});
}

void LocalObjectStore::Announce(const std::vector<std::pair<kube::ObjectRef, const char*>>& changed,
                                bool notify) {
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
