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
//   fails, so the elector stops leading.
// Calls complete before they return. Each is a few system calls on the loop thread: open of one
// small file, flock with LOCK_NB (never waits), stat/fstat, and at acquisition and release a
// ftruncate and a pwrite of under 1 KiB with no fsync. On the local file system of the state dir
// these touch only the page and inode caches, and acquisition happens once per leadership term
// (renewals do stat and fstat only), so they stay on the loop instead of adding a pool round trip
// to each attempt. A state dir on a network file system is not supported (flock there is not
// reliable either). The descriptor is close-on-exec, so no child process inherits the lock.
// Not thread-safe.
#ifndef VOLUMEMANAGER_LEADERELECTION_FILE_LOCK_H_
#define VOLUMEMANAGER_LEADERELECTION_FILE_LOCK_H_

#include <string>

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

  // Whether this process holds the flock now.
  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  // Opens the file and takes the flock without waiting. The descriptor, or -1 with `*busy` true
  // when another process holds it (the record it wrote in `*holder`), or an error.
  base::Result<int> TryLock(bool* busy, LeaderElectionRecord* holder) const;
  // Whether the path still names the file behind `fd`.
  bool StillNamed(int fd) const;
  base::Status WriteRecord(const LeaderElectionRecord& record) const;
  void Close();
  base::Status DoUpdate(const LeaderElectionRecord& record);

  std::string path_;
  int fd_ = -1;
  LeaderElectionRecord written_;
};

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_FILE_LOCK_H_
