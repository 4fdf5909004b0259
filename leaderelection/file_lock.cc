#include "leaderelection/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/errno_error.h"

namespace leaderelection {
namespace {

// The record a holder wrote; holder kUnknownFileLockHolder when the text says nothing usable.
LeaderElectionRecord ReadRecord(int fd) {
  char buf[1024];
  const ssize_t n = pread(fd, buf, sizeof(buf), 0);
  LeaderElectionRecord record;
  if (n > 0) {
    auto json = nlohmann::json::parse(std::string(buf, static_cast<size_t>(n)), nullptr, false);
    if (!json.is_discarded()) record = RecordFromLeaseSpec(json);
  }
  if (record.holder_identity.empty()) record.holder_identity = kUnknownFileLockHolder;
  return record;
}

}  // namespace

FileLock::FileLock(std::string path) : path_(std::move(path)) {}

FileLock::~FileLock() {
  Close();
  if (poll_ != nullptr) {
    // uv_close stops the poll at once (the descriptor leaves epoll), so it may be closed now.
    uv_close(reinterpret_cast<uv_handle_t*>(poll_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
  }
  if (inotify_fd_ >= 0) close(inotify_fd_);
}

void FileLock::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  written_ = {};
  for (int wd : watches_) inotify_rm_watch(inotify_fd_, wd);
  watches_.clear();
  watching_ = false;
  // The IN_IGNORED events the removals queued, and whatever came before, are about the term
  // that ends here: none may cast doubt on the next one.
  if (inotify_fd_ >= 0) ReadEvents();
  suspect_ = false;
}

bool FileLock::StillNamed(int fd) {
  ++identity_checks_;
  struct stat by_fd {};
  struct stat by_path {};
  if (fstat(fd, &by_fd) != 0 || stat(path_.c_str(), &by_path) != 0) return false;
  return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

bool FileLock::Watch() {
  if (inotify_fd_ < 0) {
    inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd_ < 0) return false;
  }
  if (loop_ != nullptr && poll_ == nullptr) {
    auto* poll = new uv_poll_t;
    if (uv_poll_init(loop_, poll, inotify_fd_) != 0) {
      delete poll;
      return false;
    }
    poll->data = this;
    poll_ = poll;
    uv_poll_start(poll_, UV_READABLE, [](uv_poll_t* h, int, int) {
      auto* self = static_cast<FileLock*>(h->data);
      self->ReadEvents();
      if (self->suspect_ && self->fd_ >= 0 && self->on_suspect_) self->on_suspect_();
    });
    uv_unref(reinterpret_cast<uv_handle_t*>(poll_));  // never what keeps the loop running
  }
  // The locked file itself, through its descriptor (never another file now at the path): a
  // change of its link count (unlinked, renamed over) is IN_ATTRIB; it cannot be deleted while
  // open, but the flag costs nothing.
  const std::string by_fd = "/proc/self/fd/" + std::to_string(fd_);
  const int file_wd =
      inotify_add_watch(inotify_fd_, by_fd.c_str(), IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF);
  if (file_wd < 0) return false;
  watches_.push_back(file_wd);
  // Each dir above it: renamed or removed, the path names something else. A dir replaced between
  // these adds and the comparison after them is seen by that comparison.
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(path_, ec).parent_path();
  if (ec) return false;
  while (true) {
    const int wd =
        inotify_add_watch(inotify_fd_, dir.c_str(), IN_MOVE_SELF | IN_DELETE_SELF | IN_ONLYDIR);
    if (wd < 0) return false;
    watches_.push_back(wd);
    if (dir == dir.root_path() || !dir.has_relative_path()) break;
    dir = dir.parent_path();
  }
  return true;
}

void FileLock::ReadEvents() {
  alignas(struct inotify_event) char buf[4096];
  while (true) {
    const ssize_t n = read(inotify_fd_, buf, sizeof(buf));
    if (n > 0) {
      // Any event, IN_Q_OVERFLOW and a removed watch's IN_IGNORED included: compare once.
      suspect_ = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN: the queue is empty
  }
}

bool FileLock::StillHeld() {
  if (!watching_) return StillNamed(fd_);
  if (poll_ == nullptr) ReadEvents();  // no loop: one read, EAGAIN when nothing happened
  if (!suspect_) return true;
  suspect_ = false;
  return StillNamed(fd_);
}

base::Result<int> FileLock::TryLock(bool* busy, LeaderElectionRecord* holder) {
  *busy = false;
  // O_NOFOLLOW: a symlink planted at the path (pointing anywhere, e.g. at another daemon's lock or
  // a file to be truncated) is refused, not followed. O_NONBLOCK: a FIFO cannot hold up the open.
  const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (err == ELOOP && lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      return base::Status::Error(path_ +
                                     " is a symlink, not a regular file: refusing to lock "
                                     "through it (remove it; the daemon creates the file)",
                                 err);
    }
    return base::ErrnoError("open", path_, err);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return base::ErrnoError("stat", path_, err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return base::Status::Error(path_ +
                               " is not a regular file: refusing to lock it (remove it; "
                               "the daemon creates the file)");
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      *busy = true;
      *holder = ReadRecord(fd);
      close(fd);
      return -1;
    }
    close(fd);
    return base::ErrnoError("flock", path_, err);
  }
  if (!StillNamed(fd)) {  // removed or replaced between open and flock: that lock means nothing
    close(fd);
    return base::Status::Error("flock " + path_ + ": the file was replaced while locking it");
  }
  return fd;
}

void FileLock::Get(std::function<void(GetResult)> done) {
  GetResult result;
  if (fd_ >= 0 && StillHeld()) {
    result.record = written_;
    done(std::move(result));
    return;
  }
  Close();
  bool busy = false;
  LeaderElectionRecord holder;
  auto fd = TryLock(&busy, &holder);
  if (!fd.ok()) {
    result.status = fd.status();
  } else if (busy) {
    result.record = std::move(holder);
  } else {
    close(*fd);  // free: a record with no holder; Update takes it for real
  }
  done(std::move(result));
}

void FileLock::Create(const LeaderElectionRecord& record, std::function<void(base::Status)> done) {
  done(DoUpdate(record));
}

void FileLock::Update(const LeaderElectionRecord& record, std::function<void(base::Status)> done) {
  done(DoUpdate(record));
}

base::Status FileLock::DoUpdate(const LeaderElectionRecord& record) {
  if (record.holder_identity.empty()) {  // release
    if (fd_ < 0) return base::Status::OK();
    // The text is for humans only: if emptying it fails, the flock goes with the descriptor all
    // the same.
    (void)!ftruncate(fd_, 0);
    Close();
    return base::Status::OK();
  }
  if (fd_ >= 0 && !StillHeld()) {
    Close();
    return base::Status::Error(path_ + " was removed or replaced while locked: lock lost");
  }
  if (fd_ < 0) {
    bool busy = false;
    LeaderElectionRecord holder;
    auto fd = TryLock(&busy, &holder);
    if (!fd.ok()) return fd.status();
    if (busy) {
      return base::Status::Error(path_ + " is locked by another process (holder " +
                                 holder.holder_identity + ")");
    }
    fd_ = *fd;
    // Watched from now on; where the watches cannot be added, every call compares instead. The
    // comparison after the adds covers a replacement between TryLock's and them.
    watching_ = Watch();
    if (!watching_) {
      for (int wd : watches_) inotify_rm_watch(inotify_fd_, wd);
      watches_.clear();
    }
    if (!StillNamed(fd_)) {
      Close();
      return base::Status::Error("flock " + path_ + ": the file was replaced while locking it");
    }
  }
  if (record.holder_identity != written_.holder_identity ||
      record.acquire_time != written_.acquire_time) {
    base::Status s = WriteRecord(record);
    if (!s.ok()) {
      Close();  // do not hold a lock whose file names someone else
      return s;
    }
  }
  written_ = record;
  return base::Status::OK();
}

base::Status FileLock::WriteRecord(const LeaderElectionRecord& record) const {
  nlohmann::json text = LeaseSpecFromRecord(record);
  text["pid"] = static_cast<long>(getpid());
  const std::string bytes = text.dump() + "\n";
  if (ftruncate(fd_, 0) != 0) return base::ErrnoError("truncate", path_, errno);
  const ssize_t n = pwrite(fd_, bytes.data(), bytes.size(), 0);
  if (n < 0) return base::ErrnoError("write", path_, errno);
  if (static_cast<size_t>(n) != bytes.size()) {
    return base::Status::Error("write " + path_ + ": short write");
  }
  return base::Status::OK();
}

}  // namespace leaderelection
