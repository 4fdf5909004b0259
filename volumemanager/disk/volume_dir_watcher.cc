#include "volumemanager/disk/volume_dir_watcher.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "atomicwriter/open_beneath.h"
#include "base/catch_all.h"
#include "base/errno_error.h"
#include "base/unique_fd.h"
#include "volumemanager/disk/volume_setup.h"

namespace volumemanager {
namespace {

// IN_UNMOUNT and IN_IGNORED are always delivered. IN_ONLYDIR and IN_DONT_FOLLOW: a volume dir
// is a real directory; a link planted at its path is refused (ENOTDIR), never followed.
constexpr uint32_t kWatchMask =
    IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr uint32_t kGoneMask = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED;
constexpr std::string_view kDataLink = "..data";

// One read takes up to 64 KiB (about 2,000 events); one burst at most 16 reads, which drains the
// default queue (16,384 events) and bounds the loop's time when events keep coming: the poll
// handle is level-triggered, so the rest is read on the next iteration.
constexpr size_t kReadBufferSize = 64 * 1024;
constexpr int kMaxReadsPerBurst = 16;

}  // namespace

struct VolumeDirWatcher::Impl {
  struct Id {
    std::string dir;
    State state = State::kUnarmed;
    int wd = -1;    // while kArmed
    dev_t dev = 0;  // the inode watched, while kArmed
    ino_t ino = 0;
    uint64_t generation = 0;  // unique per arming: stale reports are dropped
    uint64_t swapped_burst = 0;
    // The mount table's generation (mount_generation) when the id was armed or last found
    // watching; 0: never.
    uint64_t mounts_seen = 0;
  };
  struct Report {
    VolumeKey id;
    uint64_t generation;
  };

  uv_poll_t poll{};
  // /proc/self/mountinfo, polled for a change of this mount namespace's table (the kernel wakes
  // its pollers with POLLPRI at every mount and unmount, propagated ones too); -1 when it cannot
  // be, and then WatchHolds always walks.
  int mounts_fd = -1;
  uv_poll_t mounts_poll{};
  uint64_t mount_generation = 1;  // counts the changes read, from 1
  bool mounts_polled = false;     // mount_generation follows the table
  int open_handles = 0;           // the poll handles not yet closed; the last close frees this
  int fd = -1;
  bool closing = false;
  VolumeDirWatcherHandler handler;
  VolumeDirWatcherOptions options;
  std::map<VolumeKey, Id> ids;
  // wd -> the ids sharing it. An event for a wd not listed belongs to a watch released since
  // (or its IN_IGNORED) and is dropped: the kernel hands out wds cyclically, so a released number
  // comes back only after 2^31 more watches.
  std::map<int, std::vector<VolumeKey>> watches;
  uint64_t next_generation = 1;
  uint64_t burst = 0;
  size_t polled = 0;
  VolumeDirWatcherStats counters;  // the event counters; the sizes are computed in stats()
  std::unique_ptr<char[]> buffer{new char[kReadBufferSize]};

  RootDirCache roots;  // the root dir's descriptor, kept across walks

  // `dir` below the root dir (the daemon's volume dirs), or nullopt for a dir outside it (tests
  // watch plain dirs: a path the caller trusts, given to the kernel whole).
  std::optional<std::string_view> BeneathRoot(const std::string& dir) const {
    const std::string& root = options.root_dir;
    if (root.empty() || dir.size() <= root.size() + 1 || !dir.starts_with(root) ||
        dir[root.size()] != '/') {
      return std::nullopt;
    }
    return std::string_view(dir).substr(root.size() + 1);
  }

  // `rel` opened beneath the root dir, following no link on the way; invalid, with errno, when
  // it cannot be.
  base::UniqueFd OpenBeneathRoot(std::string_view rel, int flags) {
    atomicwriter::Env& env = *options.env;
    auto root = roots.Get(env, options.root_dir);
    if (!root.ok()) {
      errno = root.status().sys_errno();
      return base::UniqueFd();
    }
    return base::UniqueFd(atomicwriter::OpenBeneath(env, (*root)->fd.get(), rel, flags));
  }

  // Watches `dir` and puts the identity of the inode watched in `st`.
  int AddWatch(const std::string& dir, struct stat* st) {
    atomicwriter::Env& env = *options.env;
    if (const auto rel = BeneathRoot(dir)) {
      const base::UniqueFd dir_fd = OpenBeneathRoot(*rel, O_RDONLY | O_DIRECTORY);
      if (!dir_fd.valid() || env.Fstat(dir_fd.get(), st) != 0) return -1;
      // The magic link must be followed to reach the checked dir: no IN_DONT_FOLLOW here.
      const std::string path = atomicwriter::FdPath(dir_fd.get());
      return env.InotifyAddWatch(fd, path, kWatchMask & ~IN_DONT_FOLLOW);
    }
    // Another dir at the path between the two calls makes a later StillWatching say no: the
    // caller then verifies and re-arms.
    if (env.FstatAt(AT_FDCWD, dir, st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    return env.InotifyAddWatch(fd, dir, kWatchMask);
  }

  // Takes `key` off its kernel watch, removing the watch when no other id shares it.
  void Detach(const VolumeKey& key, Id& id) {
    if (id.state == State::kPolled) --polled;
    if (id.state == State::kArmed) {
      auto w = watches.find(id.wd);
      if (w != watches.end()) {
        std::erase(w->second, key);
        if (w->second.empty()) {
          // EINVAL when the kernel dropped it already (its IN_IGNORED lost to an overflow).
          ::inotify_rm_watch(fd, id.wd);
          watches.erase(w);
        }
      }
    }
    id.state = State::kUnarmed;
    id.wd = -1;
  }

  // Starts polling the mount table; a failure leaves WatchHolds walking every time.
  void WatchMountTable(uv_loop_t* loop) {
    mounts_fd = options.env->OpenAt(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY, 0);
    if (mounts_fd < 0) {
      spdlog::debug("volume dir watcher: open /proc/self/mountinfo: {}; every resync walks",
                    std::strerror(errno));
      return;
    }
    if (int rc = uv_poll_init(loop, &mounts_poll, mounts_fd); rc != 0) {
      spdlog::debug("volume dir watcher: poll /proc/self/mountinfo: {}; every resync walks",
                    uv_strerror(rc));
      options.env->Close(mounts_fd);
      mounts_fd = -1;
      return;
    }
    ++open_handles;
    mounts_poll.data = this;
    const int rc = uv_poll_start(&mounts_poll, UV_PRIORITIZED, [](uv_poll_t* p, int status, int) {
      auto* self = static_cast<Impl*>(p->data);
      if (self->closing) return;
      // Any wake-up counts as a change (one too many only costs walks); a failed poll, stopped
      // by libuv, leaves every later WatchHolds walking.
      ++self->mount_generation;
      ++self->counters.mount_table_changes;
      if (status < 0) {
        // Nothing for a user to do: the checks cost a walk each again, as before this poll.
        spdlog::info(
            "volume dir watcher: poll of /proc/self/mountinfo: {}; each volume's watch is "
            "checked by a walk at every resync from now on",
            uv_strerror(status));
        self->mounts_polled = false;
      }
      if (self->handler.mount_table_changed) {
        self->Call("mount table changed", [&] { self->handler.mount_table_changed(); });
      }
    });
    if (rc != 0) {
      spdlog::debug("volume dir watcher: poll /proc/self/mountinfo: {}; every resync walks",
                    uv_strerror(rc));
      return;  // the handle is closed with the other at Stop
    }
    mounts_polled = true;
  }

  // StillWatching, without the walk when no change of the mount table was read since the id was
  // armed or last found watching.
  bool WatchHolds(Id& id) {
    if (id.state != State::kArmed) return false;
    if (mounts_polled && id.mounts_seen == mount_generation) {
      ++counters.checks_without_walk;
      return true;
    }
    const uint64_t generation = mount_generation;
    if (!StillWatching(id)) return false;
    id.mounts_seen = generation;
    return true;
  }

  // The dir walked to as AddWatch walks to it, and its identity compared with the watched one.
  bool StillWatching(const Id& id) {
    if (id.state != State::kArmed) return false;
    struct stat st {};
    if (const auto rel = BeneathRoot(id.dir)) {
      const base::UniqueFd dir_fd = OpenBeneathRoot(*rel, O_PATH | O_DIRECTORY);
      if (!dir_fd.valid() || options.env->Fstat(dir_fd.get(), &st) != 0) return false;
    } else if (options.env->FstatAt(AT_FDCWD, id.dir, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return false;
    }
    return st.st_dev == id.dev && st.st_ino == id.ino;
  }

  base::Result<Arming> Arm(const VolumeKey& key, Id& id) {
    id.generation = next_generation++;
    id.mounts_seen = mount_generation;
    // Added before the old watch is released: when it is the same inode the kernel returns the
    // same wd, which must not be removed in between.
    struct stat st {};
    const int wd = AddWatch(id.dir, &st);
    const int err = errno;
    if (wd >= 0) {
      id.dev = st.st_dev;
      id.ino = st.st_ino;
    }
    if (wd >= 0 && id.state == State::kArmed && id.wd == wd) return Arming::kArmed;
    const bool was_polled = id.state == State::kPolled;
    Detach(key, id);
    if (wd >= 0) {
      id.state = State::kArmed;
      id.wd = wd;
      watches[wd].push_back(key);
      return Arming::kArmed;
    }
    if (err == ENOSPC) {
      id.state = State::kPolled;
      if (++polled == 1 && !was_polled) {
        spdlog::warn(
            "volume dir watcher: watch {}: the inotify watch limit (fs.inotify.max_user_watches, "
            "per user) is reached, this daemon holding {} watches; this volume and any other "
            "refused are verified at each resync instead",
            id.dir, watches.size());
      }
      return Arming::kPolled;
    }
    return base::ErrnoError("watch volume dir", id.dir + " for ..data swaps", err);
  }

  void OnReadable() {
    ++burst;
    bool overflow = false;
    std::vector<Report> swapped;
    std::vector<Report> lost;
    base::Status s = base::CatchAll("volume dir watcher", [&] {
      for (int reads = 0; reads < kMaxReadsPerBurst; ++reads) {
        const ssize_t n = options.env->Read(fd, buffer.get(), kReadBufferSize);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
          spdlog::error("volume dir watcher: read of the inotify fd: {}",
                        n < 0 ? std::strerror(errno) : "end of file");
          overflow = true;
          break;
        }
        for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
          inotify_event event;
          std::memcpy(&event, buffer.get() + at, sizeof event);
          const char* name = buffer.get() + at + sizeof event;
          at += static_cast<ssize_t>(sizeof event + event.len);
          ++counters.events_read;
          if (event.mask & IN_Q_OVERFLOW) {
            ++counters.overflows;
            overflow = true;
            continue;
          }
          OnEvent(event, event.len > 0 ? std::string_view(name) : std::string_view(), swapped,
                  lost);
        }
      }
    });
    if (!s.ok()) {
      spdlog::error("{}; reported as a queue overflow", s.message());
      overflow = true;
    }
    Deliver(overflow, swapped, lost);
  }

  void OnEvent(const inotify_event& event, std::string_view name, std::vector<Report>& swapped,
               std::vector<Report>& lost) {
    auto w = watches.find(event.wd);
    if (w == watches.end()) return;  // a watch released since (its IN_IGNORED, older events)
    if (event.mask & kGoneMask) {
      // IN_DELETE_SELF and IN_UNMOUNT are followed by IN_IGNORED, the kernel having dropped the
      // watch; a renamed dir keeps it, watching a dir that is no longer at the path.
      if ((event.mask & IN_MOVE_SELF) && !(event.mask & IN_IGNORED)) {
        ::inotify_rm_watch(fd, event.wd);
      }
      for (const VolumeKey& key : w->second) {
        Id& id = ids.at(key);
        id.state = State::kUnarmed;
        id.wd = -1;
        lost.push_back({key, id.generation});
      }
      watches.erase(w);
      return;
    }
    if (!(event.mask & (IN_MOVED_TO | IN_CREATE)) || name != kDataLink) return;
    for (const VolumeKey& key : w->second) {
      Id& id = ids.at(key);
      if (id.swapped_burst == burst) continue;
      id.swapped_burst = burst;
      swapped.push_back({key, id.generation});
    }
  }

  // Whether the report is about the id's current arming (it was not re-armed or unwatched since).
  bool Current(const Report& r, State state) const {
    auto it = ids.find(r.id);
    return it != ids.end() && it->second.generation == r.generation && it->second.state == state;
  }

  void Deliver(bool overflow, const std::vector<Report>& swapped, const std::vector<Report>& lost) {
    if (overflow && !closing) Call("overflow", [&] { handler.overflow(); });
    for (const Report& r : lost) {
      if (closing) return;
      if (!Current(r, State::kUnarmed)) continue;
      ++counters.losses_reported;
      Call("lost", [&] { handler.lost(r.id); });
    }
    for (const Report& r : swapped) {
      if (closing) return;
      if (!Current(r, State::kArmed)) continue;
      ++counters.swaps_reported;
      Call("swapped", [&] { handler.swapped(r.id); });
    }
  }

  template <typename F>
  void Call(std::string_view what, F&& body) {
    if (base::Status s = base::CatchAll(what, std::forward<F>(body)); !s.ok()) {
      spdlog::error("volume dir watcher: handler {}", s.message());
    }
  }
};

VolumeDirWatcher::~VolumeDirWatcher() { Stop(); }

base::Status VolumeDirWatcher::Start(uv_loop_t* loop, VolumeDirWatcherHandler handler,
                                     VolumeDirWatcherOptions options) {
  if (impl_ != nullptr) return base::Status::Error("volume dir watcher: already started");
  if (!handler.swapped || !handler.lost || !handler.overflow) {
    return base::Status::Error("volume dir watcher: a handler function is missing");
  }
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return base::Status::Error(
        std::string("volume dir watcher: inotify_init1: ") + std::strerror(err) +
            (err == EMFILE ? " (fs.inotify.max_user_instances or the open file limit)" : ""),
        err);
  }
  auto impl = std::make_unique<Impl>();
  impl->fd = fd;
  impl->handler = std::move(handler);
  impl->options = std::move(options);
  if (impl->options.env == nullptr) impl->options.env = atomicwriter::PosixEnv();
  if (int rc = uv_poll_init(loop, &impl->poll, fd); rc != 0) {
    ::close(fd);
    return base::Status::Error(std::string("volume dir watcher: uv_poll_init: ") + uv_strerror(rc));
  }
  impl->poll.data = impl.get();
  const int rc = uv_poll_start(&impl->poll, UV_READABLE, [](uv_poll_t* p, int status, int) {
    auto* self = static_cast<Impl*>(p->data);
    if (self->closing) return;
    if (status < 0) {
      // Not expected for an inotify fd. libuv has stopped the handle: nothing more is read, and
      // the caller's resync is all that is left.
      spdlog::error("volume dir watcher: poll of the inotify fd: {}; swaps are no longer reported",
                    uv_strerror(status));
      self->Deliver(true, {}, {});
      return;
    }
    self->OnReadable();
  });
  impl_ = impl.release();
  ++impl_->open_handles;
  if (rc == 0) impl_->WatchMountTable(loop);
  if (rc != 0) {
    Stop();
    return base::Status::Error(std::string("volume dir watcher: uv_poll_start: ") +
                               uv_strerror(rc));
  }
  return base::Status::OK();
}

void VolumeDirWatcher::Stop() {
  if (impl_ == nullptr) return;
  impl_->closing = true;
  const auto closed = [](uv_handle_t* h) {
    auto* self = static_cast<Impl*>(h->data);
    if (--self->open_handles > 0) return;
    ::close(self->fd);  // drops every kernel watch with it
    if (self->mounts_fd >= 0) self->options.env->Close(self->mounts_fd);
    delete self;
  };
  if (impl_->mounts_fd >= 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&impl_->mounts_poll), closed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&impl_->poll), closed);
  impl_ = nullptr;
}

base::Result<VolumeDirWatcher::Arming> VolumeDirWatcher::Watch(const VolumeKey& id,
                                                               const std::string& dir) {
  if (impl_ == nullptr) return base::Status::Error("volume dir watcher: not running");
  Impl::Id& entry = impl_->ids[id];
  entry.dir = dir;
  return impl_->Arm(id, entry);
}

base::Result<VolumeDirWatcher::Arming> VolumeDirWatcher::Rearm(const VolumeKey& id) {
  if (impl_ == nullptr) return base::Status::Error("volume dir watcher: not running");
  auto it = impl_->ids.find(id);
  if (it == impl_->ids.end()) {
    return base::Status::Error("volume dir watcher: rearm of pod " + id.pod_uid.str() + " volume " +
                               id.volume_name + ", which is not watched");
  }
  return impl_->Arm(id, it->second);
}

bool VolumeDirWatcher::StillWatching(const VolumeKey& id) const {
  if (impl_ == nullptr) return false;
  auto it = impl_->ids.find(id);
  return it != impl_->ids.end() && impl_->StillWatching(it->second);
}

bool VolumeDirWatcher::WatchHolds(const VolumeKey& id) {
  if (impl_ == nullptr) return false;
  auto it = impl_->ids.find(id);
  return it != impl_->ids.end() && impl_->WatchHolds(it->second);
}

bool VolumeDirWatcher::FollowsMountTable() const {
  return impl_ != nullptr && impl_->mounts_polled && !impl_->closing;
}

void VolumeDirWatcher::Unwatch(const VolumeKey& id) {
  if (impl_ == nullptr) return;
  auto it = impl_->ids.find(id);
  if (it == impl_->ids.end()) return;
  impl_->Detach(id, it->second);
  impl_->ids.erase(it);
}

VolumeDirWatcher::State VolumeDirWatcher::state(const VolumeKey& id) const {
  if (impl_ == nullptr) return State::kUnknown;
  auto it = impl_->ids.find(id);
  return it == impl_->ids.end() ? State::kUnknown : it->second.state;
}

VolumeDirWatcherStats VolumeDirWatcher::stats() const {
  if (impl_ == nullptr) return {};
  VolumeDirWatcherStats s = impl_->counters;
  s.kernel_watches = impl_->watches.size();
  s.polled = impl_->polled;
  for (const auto& [key, id] : impl_->ids) {
    if (id.state == State::kArmed) ++s.armed;
    if (id.state == State::kUnarmed) ++s.unarmed;
  }
  return s;
}

}  // namespace volumemanager
