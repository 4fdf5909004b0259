#include "podconfig/file_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "podconfig/static_pod.h"

namespace podconfig {
namespace {

// The kubelet's limit on a manifest (maxConfigLength).
constexpr size_t kMaxManifestBytes = 10 << 20;

bool IsManifestName(std::string_view name) {
  if (name.empty() || name[0] == '.') return false;
  return name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json");
}

// What identifies one version of a file without reading it.
struct FileStamp {
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp StampOf(const struct stat& st) {
  return {st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec};
}

base::Result<std::string> ReadManifest(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return base::Status::Error(path + ": open: " + strerror(errno), errno);
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return base::Status::Error(path + ": read: " + strerror(err), err);
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > kMaxManifestBytes) {
      close(fd);
      return base::Status::Error(path + ": larger than the " + std::to_string(kMaxManifestBytes) +
                                 "-byte manifest limit");
    }
  }
  close(fd);
  return bytes;
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

struct FileSource::Impl {
  struct Entry {
    FileStamp stamp;
    std::string bytes;
    std::optional<kube::Pod> pod;  // empty when the file failed to decode
  };

  uv_loop_t* loop = nullptr;
  FileSourceOptions options;
  Sink sink;
  uv_fs_event_t fs_event{};
  uv_timer_t debounce_timer{};
  uv_timer_t relist_timer{};
  int open_handles = 0;
  bool watching = false;
  dev_t watched_dev = 0;
  ino_t watched_ino = 0;
  std::string watched_dir;
  bool force_read = false;  // an fs event came: read every file, whatever its stamp
  bool missing_logged = false;
  bool delivered = false;                // the sink has the state of `entries`
  std::map<std::string, Entry> entries;  // file path -> last read

  static Impl* From(void* handle) {
    return static_cast<Impl*>(static_cast<uv_handle_t*>(handle)->data);
  }

  void Scan(bool force);
  void Watch(const std::string& dir);
  void OnEvent(const char* filename, int status);
  void Close();
};

void FileSource::Impl::Scan(bool force) {
  const std::string& path = options.path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      spdlog::error("pod manifest path {}: {}; keeping its last pods", path, strerror(errno));
      return;
    }
    if (!missing_logged) spdlog::warn("pod manifest path {} does not exist; no static pods", path);
    missing_logged = true;
    entries.clear();
    delivered = false;  // delivered below, and again at each relist until the path appears
    sink({});
    return;
  }
  missing_logged = false;

  std::string dir;
  std::vector<std::string> files;
  if (S_ISDIR(st.st_mode)) {
    dir = path;
    DIR* d = opendir(path.c_str());
    if (d == nullptr) {
      spdlog::error("pod manifest path {}: {}; keeping its last pods", path, strerror(errno));
      return;
    }
    while (struct dirent* e = readdir(d)) {
      if (IsManifestName(e->d_name)) files.push_back(path + "/" + e->d_name);
    }
    closedir(d);
    std::sort(files.begin(), files.end());
  } else if (S_ISREG(st.st_mode)) {
    dir = DirName(path);
    files.push_back(path);
  } else {
    spdlog::error("pod manifest path {} is neither a directory nor a regular file", path);
    return;
  }

  std::map<std::string, Entry> next;
  std::vector<kube::Pod> pods;
  bool changed = false;  // some file decoded anew
  for (const std::string& file : files) {
    struct stat fst;
    if (stat(file.c_str(), &fst) != 0) continue;  // vanished since the listing
    if (!S_ISREG(fst.st_mode)) {
      spdlog::debug("pod manifest {} is not a regular file; not recursing", file);
      continue;
    }
    Entry entry;
    entry.stamp = StampOf(fst);
    auto old = entries.find(file);
    if (old != entries.end() && !force && old->second.stamp == entry.stamp) {
      entry = std::move(old->second);
    } else {
      base::Result<std::string> bytes = ReadManifest(file);
      if (!bytes.ok()) {
        spdlog::error("pod manifest {}: {}; skipping it", file, bytes.status().message());
        continue;
      }
      entry.bytes = std::move(bytes).value();
      if (old != entries.end() && old->second.bytes == entry.bytes) {
        entry.pod = std::move(old->second.pod);
      } else {
        changed = true;
        base::Result<kube::Pod> pod = DecodeStaticPodFile(entry.bytes, file, options.node_name);
        if (pod.ok()) {
          entry.pod = std::move(pod).value();
          spdlog::debug("pod manifest {}: pod {}/{} (UID {})", file, entry.pod->metadata.namespace_,
                        entry.pod->metadata.name, entry.pod->metadata.uid);
        } else {
          spdlog::error("invalid pod manifest, skipping it: {}", pod.status().message());
        }
      }
    }
    if (entry.pod) pods.push_back(*entry.pod);
    next.emplace(file, std::move(entry));
  }
  // The relist usually finds nothing new: then the sink, which holds this state, is spared.
  changed = changed || !delivered || next.size() != entries.size() ||
            !std::equal(next.begin(), next.end(), entries.begin(),
                        [](const auto& a, const auto& b) { return a.first == b.first; });
  entries = std::move(next);
  Watch(dir);
  if (!changed) return;
  delivered = true;
  sink(std::move(pods));
}

// Arms the fs event on `dir`, again when the directory was replaced since it was armed.
void FileSource::Impl::Watch(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return;
  if (watching && dir == watched_dir && st.st_dev == watched_dev && st.st_ino == watched_ino) {
    return;
  }
  if (watching) uv_fs_event_stop(&fs_event);
  watching = false;
  int rc = uv_fs_event_start(
      &fs_event,
      [](uv_fs_event_t* h, const char* filename, int, int status) {
        From(h)->OnEvent(filename, status);
      },
      dir.c_str(), 0);
  if (rc != 0) {
    spdlog::warn("pod manifest path {}: cannot watch: {}; relying on the periodic relist", dir,
                 uv_strerror(rc));
    return;
  }
  watching = true;
  watched_dir = dir;
  watched_dev = st.st_dev;
  watched_ino = st.st_ino;
}

void FileSource::Impl::OnEvent(const char* filename, int status) {
  if (status < 0) {
    spdlog::warn("pod manifest path {}: watch failed: {}", watched_dir, uv_strerror(status));
    uv_fs_event_stop(&fs_event);
    watching = false;
  } else if (filename != nullptr && !IsManifestName(filename) &&
             filename != BaseName(watched_dir) && !std::string_view(filename).starts_with("..")) {
    // An editor's swap file, a temporary name, ... ("..data" and its kin are let through: the
    // directory may be a projected volume whose files are links through them.)
    return;
  }
  force_read = true;
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&debounce_timer))) {
    uv_timer_start(
        &debounce_timer,
        [](uv_timer_t* t) {
          Impl* impl = From(t);
          impl->force_read = false;
          impl->Scan(true);
        },
        static_cast<uint64_t>(options.debounce.count()), 0);
  }
}

void FileSource::Impl::Close() {
  auto on_closed = [](uv_handle_t* h) {
    Impl* impl = From(h);
    if (--impl->open_handles == 0) delete impl;
  };
  for (uv_handle_t* h :
       {reinterpret_cast<uv_handle_t*>(&fs_event), reinterpret_cast<uv_handle_t*>(&debounce_timer),
        reinterpret_cast<uv_handle_t*>(&relist_timer)}) {
    uv_close(h, on_closed);
  }
}

FileSource::~FileSource() { Stop(); }

base::Status FileSource::Start(uv_loop_t* loop, FileSourceOptions options, Sink sink) {
  if (impl_ != nullptr) return base::Status::Error("file source: already started");
  if (options.path.empty()) return base::Status::Error("file source: empty pod manifest path");
  if (options.node_name.empty()) return base::Status::Error("file source: empty node name");
  auto* impl = new Impl;
  impl->loop = loop;
  impl->options = std::move(options);
  impl->sink = std::move(sink);
  uv_fs_event_init(loop, &impl->fs_event);
  uv_timer_init(loop, &impl->debounce_timer);
  uv_timer_init(loop, &impl->relist_timer);
  impl->open_handles = 3;
  impl->fs_event.data = impl->debounce_timer.data = impl->relist_timer.data = impl;
  impl_ = impl;
  impl->Scan(true);
  const auto interval = static_cast<uint64_t>(impl->options.relist_interval.count());
  uv_timer_start(
      &impl->relist_timer, [](uv_timer_t* t) { Impl::From(t)->Scan(false); }, interval, interval);
  spdlog::info("file pod source watching {} (relist every {} ms)", impl->options.path, interval);
  return base::Status::OK();
}

void FileSource::Stop() {
  if (impl_ == nullptr) return;
  impl_->Close();
  impl_ = nullptr;
}

}  // namespace podconfig
