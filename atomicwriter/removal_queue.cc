#include "atomicwriter/removal_queue.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/open_beneath.h"
#include "atomicwriter/remove_tree.h"
#include "atomicwriter/tree_stamp.h"
#include "atomicwriter/unpublished_ledger.h"
#include "base/errno_error.h"

namespace atomicwriter {
namespace {

// Entries falling due within this window of the first are removed in one batch: a fan-out's old
// versions fall due within milliseconds of each other, and a burst of writes wakes the worker
// once. Not for an entry due when it is added: it goes as soon as the worker can take it, so that
// the writes running meanwhile reuse the inodes it frees in the same second (filesystem_probe.h).
constexpr auto kBatchWindow = std::chrono::milliseconds(10);

// Volume dirs whose removals are noted for their next write (TookDirFromTo) at most, however
// recent; past it the notes are dropped (those writes read their dir in full).
constexpr size_t kMaxDirChanges = 100000;

// The expired notes are looked for at most this often (a walk of every note).
constexpr auto kDirChangeSweep = std::chrono::seconds(1);

bool SameCtime(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

std::string RemovingName() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(kRemovingPrefix) + hex;
}

bool IsLive(Env& fs, int dir_fd, const std::string& name) {
  std::string live;
  return fs.ReadlinkAt(dir_fd, kDataDirName, &live) == 0 && live == name;
}

}  // namespace

RemovalQueue::RemovalQueue(Env* fs, std::function<Clock::time_point()> now)
    : fs_(fs != nullptr ? fs : PosixEnv()), now_(std::move(now)) {
  if (!now_) now_ = [env = fs_] { return env->SteadyNow(); };
}

RemovalQueue::~RemovalQueue() { Stop(); }

void RemovalQueue::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker_.joinable()) return;
  stopping_ = false;
  stop_requested_ = false;
  worker_ = std::thread([this] { WorkerLoop(); });
}

void RemovalQueue::Stop() {
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    stop_requested_ = true;
    worker = std::move(worker_);
  }
  cv_.notify_all();
  if (worker.joinable()) worker.join();
}

void RemovalQueue::Add(const VolumeDir& volume_dir, const struct stat& dir_st,
                       const std::string& name, const struct stat& st, Clock::time_point due,
                       Clock::duration grace, bool complete) {
  const Clock::time_point now = now_();
  const bool at_once = due <= now;  // due when added: taken without a batch window
  // Made before the lock is taken: during a fan-out the pool's writes add at once.
  Entry e{volume_dir.root, volume_dir.rel, dir_st.st_dev, dir_st.st_ino,
          st.st_dev,       st.st_ino,      st.st_ctim,    due,
          grace,           at_once,        now,           false,
          std::nullopt,    complete};
  Key key{volume_dir.shown, name};
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_progress_.count(key) != 0) return;  // being removed right now
    auto it = entries_.lower_bound(key);
    if (it == entries_.end() || it->first != key) {
      it = entries_.emplace_hint(it, std::move(key), std::move(e));
      ++stats_.added;
    } else {
      Entry& have = it->second;
      Unindex(it->first, have);
      if (have.dir_dev != e.dir_dev || have.dir_ino != e.dir_ino || have.dev != e.dev ||
          have.ino != e.ino || !SameCtime(have.ctime, e.ctime) || have.root != e.root ||
          have.rel != e.rel) {
        have = std::move(e);  // another entry under that name, or changed: the caller's view wins
      } else {
        if (due < have.due) {
          have.due = due;
          have.at_once = at_once;
        }
        // Unchanged since queued: the caller's knowledge that its tree is complete holds.
        if (complete && !have.stamped) have.complete = true;
      }
    }
    Index(it->first, it->second);
    wake = WakeTime(it->second) < worker_wakes_at_;
  }
  if (wake) cv_.notify_all();
}

int RemovalQueue::OpenVolumeDir(const Key& key, const Entry& entry) {
  if (entry.root.empty()) {
    return fs_->OpenAt(AT_FDCWD, key.volume_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  }
  base::Result<int> root = OpenRootDir(*fs_, entry.root);
  if (!root.ok()) {
    errno = root.status().sys_errno() != 0 ? root.status().sys_errno() : EIO;
    return -1;
  }
  const int fd = atomicwriter::OpenBeneath(*fs_, *root, entry.rel, O_RDONLY | O_DIRECTORY);
  const int err = errno;
  fs_->Close(*root);
  errno = err;
  return fd;
}

size_t RemovalQueue::RunDue(Clock::time_point now) {
  StampNew(now);
  std::vector<std::pair<Key, Entry>> batch;
  const Clock::time_point clock_now = now_();  // `now` may be later (RunAll)
  {
    std::lock_guard<std::mutex> lock(mu_);
    DropExpiredDirChanges(clock_now);
    // An entry due by `now` wakes the worker a batch window later at the latest (WakeTime: an
    // unstamped one at its add, before its due time): only those are looked at.
    const Clock::time_point last_wake = now >= Clock::time_point::max() - kBatchWindow
                                            ? Clock::time_point::max()
                                            : now + kBatchWindow;
    std::vector<Key> due;
    for (const auto& [wakes, key] : wakes_) {
      if (wakes > last_wake) break;
      if (entries_.at(*key).due <= now) due.push_back(*key);
    }
    std::sort(due.begin(), due.end());
    batch.reserve(due.size());
    for (Key& key : due) {
      auto it = entries_.find(key);
      Unindex(it->first, it->second);
      batch.emplace_back(std::move(key), std::move(it->second));
      entries_.erase(it);
    }
  }
  // The map's order: by volume dir, then name, so one dir's entries are removed together, through
  // one descriptor of it.
  size_t removed = 0;
  Stats delta;
  std::vector<std::pair<Key, Entry>> again;
  std::string error;
  std::string open_dir;
  int dir_fd = -1;
  int open_errno = 0;
  struct stat dir_st {};
  for (auto& [key, entry] : batch) {
    if (stop_requested_.load(std::memory_order_relaxed)) break;  // the rest stays on disk
    if (permitted_ && !permitted_()) {
      // Not this process's to remove now (its node lock is lost): held, looked at again later,
      // removed only once writes are permitted again.
      ++delta.held;
      entry.due = now_() + kHeldRetry;
      again.emplace_back(key, entry);
      continue;
    }
    if (dir_fd < 0 || key.volume_dir != open_dir) {
      if (dir_fd >= 0) fs_->Close(dir_fd);
      open_dir = key.volume_dir;
      dir_fd = OpenVolumeDir(key, entry);
      open_errno = errno;
      if (dir_fd >= 0 && fs_->FstatAt(dir_fd, ".", &dir_st, AT_SYMLINK_NOFOLLOW) != 0) {
        open_errno = errno;
        fs_->Close(dir_fd);
        dir_fd = -1;
      }
    }
    Outcome outcome;
    Key retry_key = key;
    if (dir_fd < 0) {
      if (!entry.root.empty() && (open_errno == ENOTDIR || open_errno == ELOOP)) {
        // A link or a file on the volume dir's path beneath the root: never followed, and the
        // entry is not removed through it.
        error = OpenBeneathError(open_dir, open_errno).message();
        outcome = Outcome::kRefused;
      } else if (open_errno == ENOENT || open_errno == ENOTDIR || open_errno == ELOOP) {
        outcome = Outcome::kKept;  // torn down
      } else {
        error = base::ErrnoError("open", open_dir, open_errno).message();
        entry.due = now_() + entry.grace;
        outcome = Outcome::kFailed;
      }
    } else if (dir_st.st_dev != entry.dir_dev || dir_st.st_ino != entry.dir_ino) {
      outcome = Outcome::kKept;  // the volume dir was torn down and made again: not our entry
    } else {
      outcome = RemoveOne(dir_fd, retry_key, entry, &error);
      struct stat after {};
      if ((outcome == Outcome::kRemoved || outcome == Outcome::kFailed) &&
          fs_->FstatAt(dir_fd, ".", &after, AT_SYMLINK_NOFOLLOW) == 0) {
        // What this removal did to the volume dir, for its next write (TookDirFromTo).
        const uint64_t from = UnpublishedLedger::DirStateHash(dir_st);
        const uint64_t to = UnpublishedLedger::DirStateHash(after);
        const Clock::time_point noted = now_();
        const Clock::time_point expires = noted + entry.grace;
        std::lock_guard<std::mutex> lock(mu_);
        DropExpiredDirChanges(noted);
        if (dir_changes_.size() >= kMaxDirChanges) {  // a full read, no more
          dir_changes_.clear();
          dir_changes_expire_ = Clock::time_point::max();
        }
        auto [it, inserted] =
            dir_changes_.try_emplace(key.volume_dir, DirChange{from, to, expires});
        if (!inserted) {
          it->second = {it->second.to == from ? it->second.from : from, to, expires};
        }
        dir_changes_expire_ = std::min(dir_changes_expire_, expires);
        dir_st = after;
      }
    }
    switch (outcome) {
      case Outcome::kRemoved:
        ++removed;
        ++delta.removed;
        break;
      case Outcome::kKept:
        ++delta.kept;
        break;
      case Outcome::kRestarted:
        ++delta.restarted;
        again.emplace_back(std::move(retry_key), entry);
        break;
      case Outcome::kFailed:
        ++delta.failed;
        delta.last_error = error;
        again.emplace_back(std::move(retry_key), entry);
        break;
      case Outcome::kRefused:
        ++delta.failed;
        delta.last_error = error;
        break;
    }
  }
  if (dir_fd >= 0) fs_->Close(dir_fd);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.removed += delta.removed;
  stats_.kept += delta.kept;
  stats_.restarted += delta.restarted;
  stats_.failed += delta.failed;
  stats_.held += delta.held;
  if (!delta.last_error.empty()) stats_.last_error = delta.last_error;
  // Due a grace period from now; a newer Add wins.
  for (auto& [key, entry] : again) {
    entry.at_once = false;
    auto [it, inserted] = entries_.try_emplace(std::move(key), entry);
    if (inserted) Index(it->first, it->second);
  }
  return removed;
}

RemovalQueue::Outcome RemovalQueue::RemoveOne(int dir_fd, Key& key, Entry& entry,
                                              std::string* error) {
  Env& fs = *fs_;
  struct stat st {};
  if (fs.FstatAt(dir_fd, key.name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Outcome::kKept;
    *error = base::ErrnoError("lstat", key.volume_dir + "/" + key.name, errno).message();
    entry.due = now_() + entry.grace;
    return Outcome::kFailed;
  }
  if (st.st_dev != entry.dev || st.st_ino != entry.ino || !SameCtime(st.st_ctim, entry.ctime)) {
    // Still being written, or another entry under that name: a full grace period from now.
    entry.dev = st.st_dev;
    entry.ino = st.st_ino;
    entry.ctime = st.st_ctim;
    entry.due = now_() + entry.grace;
    entry.complete = false;  // not what the caller knew
    entry.stamped = !entry.at_once;
    if (entry.stamped) entry.tree = TreeStamp(fs, dir_fd, key.name, st);
    return Outcome::kRestarted;
  }
  if (entry.stamped) {
    // Its own ctime is not enough: a write into a nested subdir moves only that subdir's.
    const std::optional<uint64_t> tree = TreeStamp(fs, dir_fd, key.name, st);
    if (!tree.has_value() || tree != entry.tree) {
      // Changed in its tree, or not judged (too big, unreadable): a full grace period from now.
      entry.tree = tree;
      entry.due = now_() + entry.grace;
      return Outcome::kRestarted;
    }
  }
  if (IsLive(fs, dir_fd, key.name)) return Outcome::kKept;

  // Claimed by a rename: no writer publishes a name of this shape, and whoever finds the old
  // name gone (a write, a second queue) leaves it alone.
  std::string removing;
  for (int attempt = 0; attempt < 100 && removing.empty(); ++attempt) {
    // 64 random bits: a clash needs another removal in progress under the same name, and then
    // the rename fails (a non-empty dir, or a dir onto a link) or replaces an empty dir that was
    // being removed anyway.
    std::string name = RemovingName();
    if (fs.RenameAt(dir_fd, key.name, dir_fd, name) != 0) {
      if (errno == ENOENT) return Outcome::kKept;
      if (errno == ENOTEMPTY || errno == EEXIST || errno == EISDIR || errno == ENOTDIR) continue;
      *error = base::ErrnoError("rename " + key.volume_dir + "/" + key.name + " to", name, errno)
                   .message();
      entry.due = now_() + entry.grace;
      return Outcome::kFailed;
    }
    removing = std::move(name);
  }
  if (removing.empty()) {
    *error = "rename " + key.volume_dir + "/" + key.name + ": no free name";
    entry.due = now_() + entry.grace;
    return Outcome::kFailed;
  }
  if (IsLive(fs, dir_fd, key.name)) {
    // Published between the check and the rename (a writer stalled past the grace period):
    // give it back its name.
    if (fs.RenameAt(dir_fd, removing, dir_fd, key.name) == 0) return Outcome::kKept;
  }
  const Key in_progress{key.volume_dir, removing};
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_progress_.insert(in_progress);
  }
  base::Status s = RemoveTreeAt(fs, dir_fd, removing, key.volume_dir + "/" + removing,
                                S_ISDIR(st.st_mode) ? DT_DIR : DT_UNKNOWN);
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_progress_.erase(in_progress);
  }
  if (!s.ok()) {
    *error = s.message();
    key.name = removing;  // what is left is under its new name
    if (fs.FstatAt(dir_fd, removing, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      entry.dev = st.st_dev;
      entry.ino = st.st_ino;
      entry.ctime = st.st_ctim;
      if (entry.stamped) entry.tree = TreeStamp(fs, dir_fd, removing, st);
    }
    entry.due = now_() + entry.grace;
    return Outcome::kFailed;
  }
  return Outcome::kRemoved;
}

void RemovalQueue::StampNew(Clock::time_point now) {
  // Copies: the entries stay queued (and counted) while they are stamped.
  std::vector<std::pair<Key, Entry>> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Key* key : to_stamp_) {
      const Entry& entry = entries_.at(*key);
      if (entry.due > now) todo.emplace_back(*key, entry);
    }
  }
  if (todo.empty()) return;
  std::string open_dir;
  int dir_fd = -1;
  struct stat dir_st {};
  for (auto& [key, entry] : todo) {
    if (stop_requested_.load(std::memory_order_relaxed)) break;
    if (key.volume_dir != open_dir) {
      if (dir_fd >= 0) fs_->Close(dir_fd);
      open_dir = key.volume_dir;
      dir_fd = OpenVolumeDir(key, entry);
      if (dir_fd >= 0 && fs_->FstatAt(dir_fd, ".", &dir_st, AT_SYMLINK_NOFOLLOW) != 0) {
        fs_->Close(dir_fd);
        dir_fd = -1;
      }
    }
    const Entry seen = entry;
    // Whatever is wrong with the volume dir is judged at the due time; without a stamp (nullopt)
    // the entry then starts a grace period again.
    bool restarted = false;
    if (dir_fd >= 0 && dir_st.st_dev == entry.dir_dev && dir_st.st_ino == entry.dir_ino) {
      restarted = Stamp(dir_fd, key, entry);
    }
    entry.stamped = true;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    // Unless an Add queued the name again meanwhile: its view wins.
    if (it == entries_.end() || it->second.stamped || it->second.added != seen.added ||
        it->second.ino != seen.ino || !SameCtime(it->second.ctime, seen.ctime)) {
      continue;
    }
    if (!restarted) entry.due = it->second.due;  // an Add may have made it due earlier
    entry.at_once = it->second.at_once;
    Unindex(it->first, it->second);
    it->second = entry;
    Index(it->first, it->second);
  }
  if (dir_fd >= 0) fs_->Close(dir_fd);
}

bool RemovalQueue::Stamp(int dir_fd, const Key& key, Entry& entry) {
  struct stat st {};
  if (fs_->FstatAt(dir_fd, key.name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;  // when due
  bool restarted = false;
  if (st.st_dev != entry.dev || st.st_ino != entry.ino || !SameCtime(st.st_ctim, entry.ctime)) {
    restarted = true;
    // Changed since the write saw it: its grace period starts again from this view.
    entry.dev = st.st_dev;
    entry.ino = st.st_ino;
    entry.ctime = st.st_ctim;
    entry.due = now_() + entry.grace;
  }
  entry.tree = TreeStamp(*fs_, dir_fd, key.name, st);
  return restarted;
}

void RemovalQueue::WorkerLoop() {
  // The worker yields to the writes: removing replaced versions can wait while a fan-out's writes
  // (and, on the loop, the reload calls they lead to) want both cores. A nice value 10 above the
  // process's gives it about a tenth of a core's share against one writing thread when the cores
  // are busy, and all of an idle one. Per thread on Linux; an error leaves it as it was.
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);
  if (errno == 0) {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), std::min(nice + 10, 19));
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const Clock::time_point batch_end =
        wakes_.empty() ? Clock::time_point::max() : wakes_.begin()->first;
    if (batch_end == Clock::time_point::max()) {
      worker_wakes_at_ = batch_end;
      cv_.wait(lock);
      continue;
    }
    // Sleeps until a batch window after the first entry falls due, so that entries falling due
    // meanwhile go in the same batch (an Add within the window does not wake the worker).
    const Clock::time_point now = now_();
    if (batch_end > now) {
      worker_wakes_at_ = batch_end;
      cv_.wait_for(lock, batch_end - now);
      if (now_() < worker_wakes_at_) continue;  // woken for an earlier entry, or stopping
    }
    worker_wakes_at_ = Clock::time_point::min();
    lock.unlock();
    RunDue(now_());
    lock.lock();
  }
}

RemovalQueue::Clock::time_point RemovalQueue::WakeTime(const Entry& e) {
  if (!e.at_once && !e.complete && !e.stamped) return e.added + kBatchWindow;
  return e.at_once ? e.due : e.due + kBatchWindow;
}

void RemovalQueue::Index(const Key& key, const Entry& e) {
  wakes_.emplace(WakeTime(e), &key);
  if (NeedsStamp(e)) to_stamp_.insert(&key);
}

void RemovalQueue::Unindex(const Key& key, const Entry& e) {
  wakes_.erase({WakeTime(e), &key});
  to_stamp_.erase(&key);
}

bool RemovalQueue::TookDirFromTo(const std::string& shown, uint64_t from, uint64_t to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = dir_changes_.find(shown);
  if (it == dir_changes_.end()) return false;
  const bool took = it->second.from == from && it->second.to == to;
  dir_changes_.erase(it);
  return took;
}

void RemovalQueue::DropExpiredDirChanges(Clock::time_point now) {
  if (now < dir_changes_expire_) return;
  if (dir_changes_swept_ && now < *dir_changes_swept_ + kDirChangeSweep) return;
  dir_changes_swept_ = now;
  dir_changes_expire_ = Clock::time_point::max();
  for (auto it = dir_changes_.begin(); it != dir_changes_.end();) {
    if (it->second.expires <= now) {
      it = dir_changes_.erase(it);
    } else {
      dir_changes_expire_ = std::min(dir_changes_expire_, it->second.expires);
      ++it;
    }
  }
}

size_t RemovalQueue::noted_dirs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dir_changes_.size();
}

size_t RemovalQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

RemovalQueue::Stats RemovalQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace atomicwriter
