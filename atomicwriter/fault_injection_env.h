// FaultInjectionEnv: an Env that forwards to another one and can make the k-th call (counting
// every method but the clocks) fail with a chosen errno, for fault-injection tests of anything
// that works through atomicwriter::Env; it can also record the calls made, by name, and move its
// clocks forward. A failed Close still releases the descriptor, as on Linux; any other failed call
// does nothing. Thread-safe.
#ifndef VOLUMEMANAGER_ATOMICWRITER_FAULT_INJECTION_ENV_H_
#define VOLUMEMANAGER_ATOMICWRITER_FAULT_INJECTION_ENV_H_

#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atomicwriter/env.h"

namespace atomicwriter {

class FaultInjectionEnv : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // Makes the k-th call from now (1-based) fail with `err`, once; k = 0 disarms. Resets the count.
  void FailCall(int k, int err);
  // Makes the next call of `method` (as failed_call() names it, e.g. "renameat") fail with `err`,
  // once.
  void FailNext(const std::string& method, int err);
  // From now on (true), records the name of every call (as failed_call() names it), in order;
  // false stops. Either clears what was recorded.
  void RecordCalls(bool on);
  std::vector<std::string> recorded() const;
  // Moves both clocks `by` forward from now on (on top of earlier moves).
  void AdvanceClock(std::chrono::nanoseconds by);
  // Calls made since the last FailCall (or construction).
  int calls() const { return calls_.load(); }
  // The method name of the call that was failed, or "" if none was.
  std::string failed_call() const;
  // Counts of selected methods since construction.
  int fsync_calls() const { return fsyncs_.load(); }
  int read_dir_calls() const { return read_dirs_.load(); }
  int fchmod_calls() const { return fchmods_.load(); }

  // Lets an unprivileged test run code that chowns to any group: from now on every Fchown and
  // FchownAt changes the group to `gid` (one the caller may use, e.g. getegid()) instead of the
  // group asked for, and the group asked for is remembered for the file's inode.
  void RedirectChown(gid_t gid);
  // The group last asked for `path` (not followed) while redirecting; nullopt when none was.
  std::optional<gid_t> ChownRequested(const std::string& path) const;

  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override;
  int Close(int fd) override;
  ssize_t WriteAll(int fd, const void* buf, size_t n) override;
  ssize_t Read(int fd, void* buf, size_t n) override;
  int Fsync(int fd) override;
  int Fdatasync(int fd) override;
  int Fchmod(int fd, mode_t mode) override;
  int Fchown(int fd, uid_t uid, gid_t gid) override;
  int FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) override;
  int FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid, int flags) override;
  int FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) override;
  int MkdirAt(int dirfd, const std::string& path, mode_t mode) override;
  int SymlinkAt(const std::string& target, int dirfd, const std::string& linkpath) override;
  int ReadlinkAt(int dirfd, const std::string& path, std::string* out) override;
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override;
  int UnlinkAt(int dirfd, const std::string& path, int flags) override;
  int ReadDir(int dirfd, std::vector<DirEntry>* entries) override;
  int GetInodeFlags(int fd, int* flags) override;
  int SetInodeFlags(int fd, int flags) override;
  int MountId(int fd, uint64_t* mount_id) override;
  int StatMount(int dirfd, const std::string& path, int flags, struct stat* st,
                uint64_t* mount_id) override;
  int Dup(int fd) override;
  int Fstat(int fd, struct stat* st) override;
  int Fstatfs(int fd, struct statfs* st) override;
  ssize_t PwriteAll(int fd, const void* buf, size_t n, off_t offset) override;
  int Ftruncate(int fd, off_t length) override;
  ssize_t Pread(int fd, void* buf, size_t n, off_t offset) override;
  int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) override;
  bool FindMount(uint64_t mount_id, MountInfo* out) override;
  int Mount(const std::string& source, int fd, const std::string& fs_type, unsigned long flags,
            const std::string& data) override;
  int Unmount(int fd, int flags) override;
  int InotifyAddWatch(int inotify_fd, const std::string& path, uint32_t mask) override;
  std::chrono::steady_clock::time_point SteadyNow() override;
  std::chrono::system_clock::time_point WallNow() override;

 private:
  // Counts the call; true (with errno set) when this call must fail.
  bool ShouldFail(const char* method);

  Env* base_;
  std::atomic<int> calls_{0};
  std::atomic<int> fail_at_{0};
  std::atomic<int> err_{0};
  std::atomic<int> fsyncs_{0};
  std::atomic<int> read_dirs_{0};
  std::atomic<int> fchmods_{0};
  std::atomic<int64_t> clock_offset_{0};  // nanoseconds
  // Records the group asked for the inode that `fd` (and `path` relative to it, unless empty)
  // names, and returns the group to pass on.
  gid_t Redirected(int fd, const std::string& path, int flags, gid_t gid);

  mutable std::mutex mu_;
  std::string failed_call_;
  std::optional<gid_t> redirect_chown_;
  std::map<std::pair<dev_t, ino_t>, gid_t> chown_requested_;
  std::string fail_method_;  // FailNext's method, "" when unarmed
  int fail_method_err_ = 0;
  bool recording_ = false;
  std::vector<std::string> recorded_;
};

// One run of FailEachCallInTurn: call `index` (1-based) of the operation, `call` by name, failed
// with `err`; `reached` says whether the run got to it (and so failed it).
struct FaultRun {
  int index = 0;
  std::string call;
  int err = 0;
  bool reached = false;
  std::string Describe() const;  // "call 7 (renameat) failed with EIO"
};

// LevelDB's way of testing every failure: `reset` brings the world to the operation's start,
// `run` performs it through `env`. One run with the calls recorded learns its N calls; then for
// each call i = 1..N and each errno of `errnos`, `reset`, call i failed with that errno, `run`,
// and `check` (which asserts the invariants). EINTR is only injected where a caller can see it:
// not into the calls whose Env contract loops on it (write, read, pwrite, pread, readdir).
// Returns the calls of the recorded run.
std::vector<std::string> FailEachCallInTurn(FaultInjectionEnv& env,
                                            const std::function<void()>& reset,
                                            const std::function<void()>& run,
                                            const std::function<void(const FaultRun&)>& check,
                                            const std::vector<int>& errnos = {EIO, ENOSPC, EINTR});

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_FAULT_INJECTION_ENV_H_
