#include "manifestdir/manifest_dir_watcher.h"

#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/catch_all.h"

namespace manifestdir {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

struct ManifestDirWatcher::Handles {
  using Clock = std::chrono::steady_clock;

  // The directory's events, as inotify tells them: libuv's fs events hide which event it was,
  // and a file renamed into place or closed after writing is complete at once, without waiting
  // out the debounce.
  static constexpr uint32_t kDirEvents = IN_ATTRIB | IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE |
                                         IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_MOVED_FROM |
                                         IN_MOVED_TO | IN_ONLYDIR;

  ManifestDirWatcherOptions options;
  Handler handler;
  bool closing = false;  // Stop was called: no more handler calls
  int inotify_fd = -1;
  int wd = -1;  // the directory's watch on inotify_fd
  uv_poll_t dir_poll{};
  // Manifest names created or modified since they were last closed after writing (or moved,
  // or removed): a writer may still be writing them. While any is, a burst ends by the
  // debounce; once none is, a burst that completed a file ends at once.
  std::set<std::string> being_written;
  // While the path is missing: a watch on its parent directory for the path's name, so that a
  // directory removed and created again (or renamed into place) is followed at once, not at the
  // next relist.
  uv_fs_event_t parent_event{};
  bool watching_parent = false;
  std::string watched_parent;
  uv_timer_t debounce_timer{};
  uv_timer_t relist_timer{};
  int open_handles = 0;
  bool watching = false;
  std::string watched_dir;
  dev_t dev = 0;
  ino_t ino = 0;
  std::set<std::string> pending;  // manifest names events named since the last call
  bool pending_all = false;       // an event named no file, or the directory itself
  bool pending_stat = false;      // a "..name" entry changed: files may be links through it
  bool in_burst = false;
  Clock::time_point burst_start;

  static Handles* From(void* handle) {
    return static_cast<Handles*>(static_cast<uv_handle_t*>(handle)->data);
  }

  void Unwatch() {
    if (watching && wd >= 0) inotify_rm_watch(inotify_fd, wd);
    wd = -1;
    watching = false;
    being_written.clear();
  }

  void UnwatchParent() {
    if (watching_parent) uv_fs_event_stop(&parent_event);
    watching_parent = false;
  }

  // The path is missing: watch its parent for the path's name (when the parent exists; else the
  // relist finds it).
  void WatchParent() {
    const std::string parent = DirName(options.path);
    if (watching_parent && parent == watched_parent) return;
    UnwatchParent();
    int rc = uv_fs_event_start(
        &parent_event,
        [](uv_fs_event_t* h, const char* filename, int, int status) {
          Handles* self = From(h);
          if (base::Status s =
                  base::CatchAll("fs event", [&] { self->OnParentEvent(filename, status); });
              !s.ok()) {
            spdlog::error("{} {}: {}", self->options.what, self->options.path, s.message());
          }
        },
        parent.c_str(), 0);
    if (rc != 0) return;  // e.g. the parent is missing too: the relist finds the path
    watching_parent = true;
    watched_parent = parent;
  }

  void OnParentEvent(const char* filename, int status) {
    if (closing) return;
    // Only the path's own name matters (or an event naming nothing, or a failed watch).
    if (status >= 0 && filename != nullptr && filename != BaseName(options.path)) return;
    if (status < 0) UnwatchParent();
    pending_all = true;  // the path appeared (or the parent changed): read everything
    if (!in_burst) {
      in_burst = true;
      burst_start = Clock::now();
    }
    uv_timer_start(
        &debounce_timer, [](uv_timer_t* t) { From(t)->EndBurst(); },
        static_cast<uint64_t>(options.debounce.count()), 0);
  }

  // Watches the directory; again when it appeared, was replaced or its watch failed. Returns
  // whether it started a new watch (after Start, the caller then reads everything again: files
  // may have been written before the watch was armed).
  bool Arm() {
    struct stat st;
    if (stat(options.path.c_str(), &st) != 0) {
      Unwatch();
      WatchParent();
      return false;
    }
    UnwatchParent();
    std::string dir = options.path;
    if (S_ISREG(st.st_mode) && options.allow_single_file) {
      dir = DirName(options.path);
      if (stat(dir.c_str(), &st) != 0) {
        Unwatch();
        return false;
      }
    } else if (!S_ISDIR(st.st_mode)) {
      Unwatch();  // nothing to list: the relist reports it and finds it fixed
      return false;
    }
    if (watching && dir == watched_dir && st.st_dev == dev && st.st_ino == ino) return false;
    Unwatch();
    if (inotify_fd < 0) return false;  // Start could not make one: the relist alone
    const int new_wd = inotify_add_watch(inotify_fd, dir.c_str(), kDirEvents);
    if (new_wd < 0) {
      spdlog::warn("{} {}: cannot watch: {}; relying on the periodic relist", options.what, dir,
                   std::strerror(errno));
      return false;
    }
    wd = new_wd;
    watching = true;
    watched_dir = dir;
    dev = st.st_dev;
    ino = st.st_ino;
    return true;
  }

  // Reads every queued event of the directory's watch, then ends the burst at once when it
  // completed a file and no manifest is being written, or else arms the debounce.
  void OnReadable(int status) {
    if (closing) return;
    bool relevant = false;
    bool completed = false;
    if (status < 0) {
      spdlog::warn("{} {}: watch failed: {}", options.what, watched_dir, uv_strerror(status));
      Unwatch();
      pending_all = relevant = true;
    }
    alignas(inotify_event) char buf[16 * 1024];
    while (status >= 0) {
      const ssize_t n = read(inotify_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) {
        spdlog::warn("{} {}: watch failed: {}", options.what, watched_dir, std::strerror(errno));
        Unwatch();
        pending_all = relevant = true;
      }
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
        at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if (ev->mask & IN_Q_OVERFLOW) {
          pending_all = relevant = true;  // events were lost: read everything
          being_written.clear();
          continue;
        }
        if (ev->wd != wd) continue;  // a watch removed since
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
          // The directory itself went (or moved): everything, and the watch is armed again.
          pending_all = relevant = true;
          continue;
        }
        const std::string_view name = ev->len > 0 ? std::string_view(ev->name) : "";
        if (name.empty()) {
          pending_all = relevant = true;
        } else if (IsManifestFileName(name)) {
          pending.emplace(name);
          relevant = true;
          if (ev->mask & IN_MODIFY) {
            being_written.emplace(name);
          } else if (ev->mask & IN_CREATE) {
            // A regular file created is written next; a link (a projected volume's file
            // through "..data") or a dir is complete as it is.
            struct stat st;
            const std::string path = watched_dir + "/" + std::string(name);
            if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
              being_written.emplace(name);
            } else {
              being_written.erase(std::string(name));
            }
          } else if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)) {
            being_written.erase(std::string(name));
            if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) completed = true;
          }
        } else if (name.starts_with("..")) {
          pending_stat = relevant = true;
          // The "..data" link of a projected volume swapped: its files are complete.
          if (ev->mask & IN_MOVED_TO) completed = true;
        }
        // Other names: an editor's swap file, a temporary name, ...
      }
    }
    if (!relevant) return;
    const Clock::time_point now = Clock::now();
    if (!in_burst) {
      in_burst = true;
      burst_start = now;
    }
    auto delay = std::chrono::milliseconds(0);
    if (!completed || !being_written.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          burst_start + options.max_debounce - now);
      delay = std::max(std::chrono::milliseconds(0), std::min(options.debounce, left));
    }
    uv_timer_start(
        &debounce_timer, [](uv_timer_t* t) { From(t)->EndBurst(); },
        static_cast<uint64_t>(delay.count()), 0);
  }

  void EndBurst() {
    in_burst = false;
    std::set<std::string> named = std::move(pending);
    pending.clear();
    const ManifestScanScope scope = pending_all    ? ManifestScanScope::kReadAll
                                    : pending_stat ? ManifestScanScope::kStatAll
                                                   : ManifestScanScope::kNamed;
    pending_all = pending_stat = false;
    Call(scope, named);
  }

  // Called from libuv callbacks only.
  void Call(ManifestScanScope scope, const std::set<std::string>& named) {
    if (base::Status s = base::CatchAll("manifest handler", [&] { handler(scope, named); });
        !s.ok()) {
      spdlog::error("{} {}: {}", options.what, options.path, s.message());
    }
    if (closing) return;  // the handler stopped the watcher
    bool rearmed = false;
    if (base::Status s = base::CatchAll("watch", [&] { rearmed = Arm(); }); !s.ok()) {
      spdlog::error("{} {}: {}", options.what, options.path, s.message());
    }
    // A directory that appeared (or was replaced) since the scan just requested may have been
    // filled before its watch was armed, and that scan may already have listed it: one more read
    // of everything, now that events are coming, misses nothing. Events already received (the
    // parent's "it appeared" among them) are older than that read, which covers them: the burst
    // they opened ends here, so the next write is named on its own.
    if (rearmed) {
      uv_timer_stop(&debounce_timer);
      in_burst = false;
      pending.clear();
      pending_all = pending_stat = false;
      if (base::Status s =
              base::CatchAll("manifest handler", [&] { handler(ManifestScanScope::kReadAll, {}); });
          !s.ok()) {
        spdlog::error("{} {}: {}", options.what, options.path, s.message());
      }
    }
  }

  void Close() {
    closing = true;
    for (uv_handle_t* h :
         {reinterpret_cast<uv_handle_t*>(&dir_poll), reinterpret_cast<uv_handle_t*>(&parent_event),
          reinterpret_cast<uv_handle_t*>(&debounce_timer),
          reinterpret_cast<uv_handle_t*>(&relist_timer)}) {
      if (h == reinterpret_cast<uv_handle_t*>(&dir_poll) && inotify_fd < 0) continue;
      ++open_handles;
      uv_close(h, [](uv_handle_t* handle) {
        Handles* self = From(handle);
        if (--self->open_handles == 0) delete self;
      });
    }
  }

  ~Handles() {
    if (inotify_fd >= 0) close(inotify_fd);  // after its poll handle closed
  }
};

ManifestDirWatcher::~ManifestDirWatcher() { Stop(); }

base::Status ManifestDirWatcher::Start(uv_loop_t* loop, ManifestDirWatcherOptions options,
                                       Handler handler) {
  if (handles_ != nullptr) return base::Status::Error("manifest watcher: already started");
  if (options.path.empty()) return base::Status::Error("manifest watcher: empty path");
  auto* h = new Handles;
  h->options = std::move(options);
  h->handler = std::move(handler);
  uv_fs_event_init(loop, &h->parent_event);
  uv_timer_init(loop, &h->debounce_timer);
  uv_timer_init(loop, &h->relist_timer);
  h->dir_poll.data = h->parent_event.data = h->debounce_timer.data = h->relist_timer.data = h;
  h->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (h->inotify_fd < 0) {
    spdlog::warn("{} {}: cannot watch: inotify: {}; relying on the periodic relist",
                 h->options.what, h->options.path, std::strerror(errno));
  } else if (int rc = uv_poll_init(loop, &h->dir_poll, h->inotify_fd); rc != 0) {
    spdlog::warn("{} {}: cannot watch: {}; relying on the periodic relist", h->options.what,
                 h->options.path, uv_strerror(rc));
    close(h->inotify_fd);
    h->inotify_fd = -1;
  } else {
    uv_poll_start(&h->dir_poll, UV_READABLE, [](uv_poll_t* p, int status, int) {
      Handles* self = Handles::From(p);
      if (base::Status s = base::CatchAll("fs event", [&] { self->OnReadable(status); }); !s.ok()) {
        spdlog::error("{} {}: {}; reading every file", self->options.what, self->watched_dir,
                      s.message());
        self->pending_all = true;  // the burst's end reads everything
        uv_timer_start(
            &self->debounce_timer, [](uv_timer_t* t) { Handles::From(t)->EndBurst(); },
            static_cast<uint64_t>(self->options.debounce.count()), 0);
      }
    });
  }
  handles_ = h;
  const auto every = static_cast<uint64_t>(h->options.relist_interval.count());
  uv_timer_start(
      &h->relist_timer,
      [](uv_timer_t* t) { Handles::From(t)->Call(ManifestScanScope::kStatAll, {}); }, every, every);
  h->Arm();
  return base::Status::OK();
}

void ManifestDirWatcher::Stop() {
  if (handles_ == nullptr) return;
  handles_->Close();
  handles_ = nullptr;
}

}  // namespace manifestdir
