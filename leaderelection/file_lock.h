// FileLock: the leader-election lock as a kernel file lock (flock(2), exclusive, non-blocking) on
// one file, e.g. <state-dir>/leader.lock. For contenders on one host (two daemons on a node during
// a rolling update): the kernel gives the exclusion, releases the lock the moment the holder dies
// (kill -9 included), and the API server carries no load.
//
// Mapping onto ResourceLock:
// * Get: while this lock holds the flock (and the path still names the locked file), the record
//   it last wrote. Otherwise it tries the flock once and lets it go again: free -> a record with
//   no holder; taken -> the record the holder wrote into the file (holder "<unknown>" when the
//   file says nothing). The file's text is for humans and logs only, never trusted for exclusion.
// * Create, Update: take the flock if not held (failing when another process has it), then write
//   the record into the file when the holder or its acquire time changed (a renewal only checks
//   that the flock is still ours). A record with no holder releases: the file is emptied and the
//   flock dropped.
// * The path must be a regular file (or missing: it is created). A symlink there (never followed)
//   or a FIFO, directory or device is an error of every call, which the elector logs once and
//   shows (LeaderElector::last_error) until the path is fixed.
// * A holder whose file was removed or replaced (st_dev/st_ino of the path differ from those of
//   the locked file) has lost the lock: a new file could be locked by someone else. Update then
//   fails, so the elector stops leading. Noticed without a system call per renewal: an inotify
//   watch on the locked file (IN_ATTRIB: its link count changed, e.g. unlinked or renamed over;
//   IN_MOVE_SELF, IN_DELETE_SELF) and one on each dir above it up to / (IN_MOVE_SELF,
//   IN_DELETE_SELF), read by a uv_poll on the elector's loop (SetLoop), mark the lock suspect;
//   only then does the next call compare the path with the locked file (stat, fstat). An event
//   that changed nothing (a chmod) costs that one comparison. Without a loop the inotify queue is
//   read at each call instead (one read), and where the watches cannot be added (fs.inotify
//   limits) every call compares, as before. Not noticed: a file system mounted over the file or a
//   dir above it (no inotify event says so).
// With a loop and every watch added, the hold needs no renewal (HeldUntilSuspect): an event runs
// the elector's suspect callback from the uv_poll, and the elector renews then (a comparison).
// Calls complete before they return. Each is a few system calls on the loop thread: open of one
// small file, flock with LOCK_NB (never waits), stat/fstat, and at acquisition and release a
// ftruncate and a pwrite of under 1 KiB with no fsync, and the inotify watches' adds and removes.
// On the local file system of the state dir these touch only the page and inode caches, and
// acquisition happens once per leadership term (a renewal makes no system call unless an event
// came), so they stay on the loop instead of adding a pool round trip to each attempt. A state dir
// on a network file system is not supported (flock there is not reliable either, nor inotify).
// The descriptors are close-on-exec, so no child process inherits the lock. Not thread-safe.
#ifndef VOLUMEMANAGER_LEADERELECTION_FILE_LOCK_H_
#define VOLUMEMANAGER_LEADERELECTION_FILE_LOCK_H_

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "leaderelection/resource_lock.h"

namespace leaderelection {

inline constexpr char kUnknownFileLockHolder[] = "<unknown>";

class FileLock : public ResourceLock {
 public:
  // The file is created (mode 0644) when missing; its directory must exist.
  explicit FileLock(std::string path);
  // Closes the descriptor, which drops the flock (no release record is written).
  ~FileLock() override;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  void Get(std::function<void(GetResult)> done) override;
  void Create(const LeaderElectionRecord& record, std::function<void(base::Status)> done) override;
  void Update(const LeaderElectionRecord& record, std::function<void(base::Status)> done) override;
  void CancelPending() override {}
  std::string Describe() const override { return "file " + path_; }
  // Reads the inotify watches from a uv_poll on `loop` (before the first call).
  void SetLoop(uv_loop_t* loop) override { loop_ = loop; }
  // Held, and every watch added with a loop to read them: only an event can mean the hold is gone.
  bool HeldUntilSuspect() const override { return fd_ >= 0 && watching_ && poll_ != nullptr; }
  void SetOnSuspect(std::function<void()> suspect) override { on_suspect_ = std::move(suspect); }

  // Whether this process holds the flock now.
  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // How often the path was compared with the locked file (stat and fstat), for tests.
  uint64_t identity_checks() const { return identity_checks_; }

 private:
  // Opens the file and takes the flock without waiting. The descriptor, or -1 with `*busy` true
  // when another process holds it (the record it wrote in `*holder`), or an error.
  base::Result<int> TryLock(bool* busy, LeaderElectionRecord* holder);
  // Whether the path still names the file behind `fd` (stat and fstat).
  bool StillNamed(int fd);
  // Whether the path still names the locked file: false only after an inotify event (or, without
  // watches, at every call) and a comparison that failed.
  bool StillHeld();
  // Adds the inotify watches on the locked file and the dirs above it; false when they cannot
  // all be added.
  bool Watch();
  // Reads every queued inotify event (non-blocking); any marks the lock suspect.
  void ReadEvents();
  base::Status WriteRecord(const LeaderElectionRecord& record) const;
  void Close();
  base::Status DoUpdate(const LeaderElectionRecord& record);

  std::string path_;
  int fd_ = -1;
  LeaderElectionRecord written_;
  uv_loop_t* loop_ = nullptr;
  int inotify_fd_ = -1;        // made at the first acquisition, kept for the lock's life
  uv_poll_t* poll_ = nullptr;  // on loop_, reading inotify_fd_; closed by the destructor
  std::vector<int> watches_;   // of the current term: the file's, then each dir's
  bool watching_ = false;      // all of them added for the current term
  bool suspect_ = false;       // an event came since the last comparison
  std::function<void()> on_suspect_;
  uint64_t identity_checks_ = 0;
};

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_FILE_LOCK_H_
