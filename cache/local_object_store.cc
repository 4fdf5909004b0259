#include "cache/local_object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <utility>

#include "kube/manifest_decoder.h"

namespace cache {
namespace {

// As the pod sources: the kubelet's limit on one manifest.
constexpr size_t kMaxManifestBytes = 10 << 20;

bool IsManifestName(std::string_view name) {
  if (name.empty() || name[0] == '.') return false;
  return name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json");
}

base::Result<std::string> ReadWholeFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return base::Status::Error(std::string("open: ") + strerror(errno), errno);
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return base::Status::Error(std::string("read: ") + strerror(err), err);
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > kMaxManifestBytes) {
      close(fd);
      return base::Status::Error("larger than the " + std::to_string(kMaxManifestBytes) +
                                 "-byte manifest limit");
    }
  }
  close(fd);
  return bytes;
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

template <typename T>
bool SameObject(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  return a == b || (a && b && *a == *b);
}

}  // namespace

struct LocalObjectStore::Watcher {
  LocalObjectStore* store = nullptr;  // null once the store stopped
  uv_loop_t* loop = nullptr;
  uv_fs_event_t fs_event{};
  uv_timer_t debounce_timer{};
  uv_timer_t relist_timer{};
  int open_handles = 0;
  bool watching = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::set<std::string> pending;  // file names events named since the last read
  bool pending_all = false;       // an event named no file, or the directory itself
  bool pending_stat = false;      // a "..name" entry changed: files may be symlinks through it
  bool in_burst = false;
  Clock::time_point burst_start;

  static Watcher* From(void* handle) {
    return static_cast<Watcher*>(static_cast<uv_handle_t*>(handle)->data);
  }

  void Init(LocalObjectStore* s, uv_loop_t* l) {
    store = s;
    loop = l;
    uv_fs_event_init(loop, &fs_event);
    uv_timer_init(loop, &debounce_timer);
    uv_timer_init(loop, &relist_timer);
    fs_event.data = debounce_timer.data = relist_timer.data = this;
    open_handles = 3;
    const auto every = static_cast<uint64_t>(store->options_.relist_interval.count());
    uv_timer_start(
        &relist_timer,
        [](uv_timer_t* t) {
          Watcher* w = From(t);
          w->store->Rescan({}, ScanScope::kStatAll, true);
          w->Arm();
        },
        every, every);
    Arm();
  }

  // Watches the directory; again when it was missing or replaced.
  void Arm() {
    const std::string& dir = store->options_.dir;
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) {
      if (watching) uv_fs_event_stop(&fs_event);
      watching = false;
      return;
    }
    if (watching && st.st_dev == dev && st.st_ino == ino) return;
    if (watching) uv_fs_event_stop(&fs_event);
    watching = false;
    int rc = uv_fs_event_start(
        &fs_event,
        [](uv_fs_event_t* h, const char* filename, int, int status) {
          From(h)->OnEvent(filename, status);
        },
        dir.c_str(), 0);
    if (rc != 0) {
      spdlog::warn("object manifest path {}: cannot watch: {}; relying on the periodic relist", dir,
                   uv_strerror(rc));
      return;
    }
    watching = true;
    dev = st.st_dev;
    ino = st.st_ino;
  }

  void OnEvent(const char* filename, int status) {
    if (status < 0) {
      spdlog::warn("object manifest path {}: watch failed: {}", store->options_.dir,
                   uv_strerror(status));
      uv_fs_event_stop(&fs_event);
      watching = false;
      pending_all = true;
    } else if (filename == nullptr || filename == BaseName(store->options_.dir)) {
      pending_all = true;
    } else if (IsManifestName(filename)) {
      pending.insert(filename);
    } else if (std::string_view(filename).starts_with("..")) {
      // The directory is itself a projected volume (files are links through "..data"): the
      // "..data" swap changes every file without an event naming one.
      pending_stat = true;
    } else {
      return;  // an editor's swap file, a temporary name, ...
    }
    // Trailing-edge coalescing: read once the burst has been quiet for `debounce`, and never
    // later than `max_debounce` after it began.
    const Clock::time_point now = Clock::now();
    if (!in_burst) {
      in_burst = true;
      burst_start = now;
    }
    auto delay = store->options_.debounce;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        burst_start + store->options_.max_debounce - now);
    delay = std::max(std::chrono::milliseconds(0), std::min(delay, left));
    uv_timer_start(
        &debounce_timer,
        [](uv_timer_t* t) {
          Watcher* w = From(t);
          w->in_burst = false;
          std::set<std::string> names = std::move(w->pending);
          w->pending.clear();
          const bool all = w->pending_all;
          const ScanScope scope = all               ? ScanScope::kReadAll
                                  : w->pending_stat ? ScanScope::kStatAll
                                                    : ScanScope::kNamed;
          w->pending_all = w->pending_stat = false;
          w->store->Rescan(names, scope, true);
          if (!w->watching || all) w->Arm();
        },
        static_cast<uint64_t>(delay.count()), 0);
  }

  void Close() {
    store = nullptr;
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&fs_event),
                           reinterpret_cast<uv_handle_t*>(&debounce_timer),
                           reinterpret_cast<uv_handle_t*>(&relist_timer)}) {
      uv_close(h, [](uv_handle_t* handle) {
        Watcher* w = From(handle);
        if (--w->open_handles == 0) delete w;
      });
    }
  }
};

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
  Rescan({}, ScanScope::kReadAll, false);
  if (options_.strategy == ChangeDetectionStrategy::kWatch) {
    watcher_ = new Watcher;
    watcher_->Init(this, loop);
  }
  spdlog::info("object store: {} objects from {} files in {} (strategy {})", view_.size(),
               files_.size(), options_.dir, ChangeDetectionStrategyName(options_.strategy));
  return base::Status::OK();
}

void LocalObjectStore::Stop() {
  if (watcher_ == nullptr) return;
  watcher_->Close();
  watcher_ = nullptr;
}

std::optional<LocalObjectStore::FileStamp> LocalObjectStore::StatFile(const std::string& name,
                                                                      bool* gone) const {
  const std::string path = options_.dir + "/" + name;
  struct stat st;
  *gone = false;
  if (stat(path.c_str(), &st) != 0) {
    *gone = errno == ENOENT || errno == ENOTDIR;  // other failures: keep what was read
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *gone = true;
    return std::nullopt;
  }
  return FileStamp{st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                   st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec};
}

void LocalObjectStore::Rescan(const std::set<std::string>& force, ScanScope scope, bool notify) {
  bool changed = false;  // some file's objects were replaced, or a file with objects went away
  auto drop = [&](std::map<std::string, ManifestFile>::iterator it) {
    if (!it->second.objects.empty()) {
      spdlog::info("object manifest {}/{} removed: its {} objects are gone", options_.dir,
                   it->first, it->second.objects.size());
      changed = true;
    }
    files_.erase(it);
  };

  if (scope == ScanScope::kNamed) {
    // Events name the files that changed: no listing, no stat of the others.
    for (const std::string& name : force) {
      bool gone = false;
      std::optional<FileStamp> stamp = StatFile(name, &gone);
      auto it = files_.find(name);
      if (!stamp) {
        if (gone && it != files_.end()) drop(it);
        continue;
      }
      if (it == files_.end()) it = files_.emplace(name, ManifestFile{}).first;
      changed |= ReadFile(name, *stamp, &it->second);
    }
    if (changed) RebuildView(notify);
    return;
  }

  last_scan_ = Now();
  std::set<std::string> names;
  DIR* d = opendir(options_.dir.c_str());
  if (d == nullptr) {
    if (errno != ENOENT) {
      const std::string err = strerror(errno);
      if (dir_error_ != err) {
        spdlog::error("object manifest path {}: {}; keeping the objects last read", options_.dir,
                      err);
      }
      dir_error_ = err;
      return;
    }
    if (dir_error_.empty() && !files_.empty()) {
      spdlog::warn("object manifest path {} does not exist; no objects", options_.dir);
    }
  } else {
    while (struct dirent* e = readdir(d)) {
      if (IsManifestName(e->d_name)) names.insert(e->d_name);
    }
    closedir(d);
  }
  dir_error_.clear();

  for (auto it = files_.begin(); it != files_.end();) {
    auto next = std::next(it);
    if (!names.count(it->first)) drop(it);
    it = next;
  }
  for (const std::string& name : names) {
    bool gone = false;
    std::optional<FileStamp> stamp = StatFile(name, &gone);
    auto it = files_.find(name);
    if (!stamp) {
      if (gone && it != files_.end()) drop(it);
      continue;
    }
    if (it == files_.end()) it = files_.emplace(name, ManifestFile{}).first;
    ManifestFile& file = it->second;
    if (!file.read || scope == ScanScope::kReadAll || force.count(name) ||
        !(file.stamp == *stamp)) {
      changed |= ReadFile(name, *stamp, &file);
    }
  }
  if (changed) RebuildView(notify);
}

bool LocalObjectStore::ReadFile(const std::string& name, const FileStamp& stamp,
                                ManifestFile* file) {
  const std::string path = options_.dir + "/" + name;
  ++file_reads_;
  file->stamp = stamp;
  file->read_at = Now();
  base::Result<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    spdlog::error("object manifest {}: {}; keeping its {} objects as last read", path,
                  bytes.status().message(), file->objects.size());
    return false;
  }
  if (file->read && *bytes == file->bytes) return false;
  const bool first_read = !file->read;
  file->read = true;
  file->bytes = std::move(bytes).value();
  if (file->bytes.empty() && !first_read && !file->objects.empty()) {
    spdlog::warn(
        "object manifest {} is empty; keeping its {} objects until it has content or "
        "is deleted",
        path, file->objects.size());
    return false;
  }
  base::Result<std::vector<kube::ManifestObject>> decoded = kube::DecodeManifest(file->bytes, path);
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
  if (stale) Rescan(force, ScanScope::kStatAll, false);
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
