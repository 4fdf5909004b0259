#include "atomicwriter/fault_injection_env.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "base/strings.h"

namespace atomicwriter {

void FaultInjectionEnv::FailCall(int k, int err) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_ = 0;
  fail_at_ = k;
  err_ = err;
  failed_call_.clear();
}

std::string FaultInjectionEnv::failed_call() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_call_;
}

void FaultInjectionEnv::FailNext(const std::string& method, int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_method_ = method;
  fail_method_err_ = err;
}

void FaultInjectionEnv::RecordCalls(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  recording_ = on;
  recorded_.clear();
}

std::vector<std::string> FaultInjectionEnv::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

void FaultInjectionEnv::AdvanceClock(std::chrono::nanoseconds by) { clock_offset_ += by.count(); }

bool FaultInjectionEnv::ShouldFail(const char* method) {
  const int n = ++calls_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recording_) recorded_.emplace_back(method);
    if (!fail_method_.empty() && fail_method_ == method) {
      fail_method_.clear();
      failed_call_ = method;
      errno = fail_method_err_;
      return true;
    }
  }
  if (fail_at_ == 0 || n != fail_at_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  failed_call_ = method;
  errno = err_;
  return true;
}

int FaultInjectionEnv::OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) {
  if (ShouldFail("openat")) return -1;
  return base_->OpenAt(dirfd, path, flags, mode);
}

int FaultInjectionEnv::Close(int fd) {
  if (ShouldFail("close")) {
    const int err = errno;
    base_->Close(fd);
    errno = err;
    return -1;
  }
  return base_->Close(fd);
}

ssize_t FaultInjectionEnv::WriteAll(int fd, const void* buf, size_t n) {
  if (ShouldFail("write")) return -1;
  return base_->WriteAll(fd, buf, n);
}

ssize_t FaultInjectionEnv::Read(int fd, void* buf, size_t n) {
  if (ShouldFail("read")) return -1;
  return base_->Read(fd, buf, n);
}

int FaultInjectionEnv::Fsync(int fd) {
  ++fsyncs_;
  if (ShouldFail("fsync")) return -1;
  return base_->Fsync(fd);
}

int FaultInjectionEnv::Fdatasync(int fd) {
  ++fsyncs_;
  if (ShouldFail("fdatasync")) return -1;
  return base_->Fdatasync(fd);
}

int FaultInjectionEnv::Fchmod(int fd, mode_t mode) {
  ++fchmods_;
  if (ShouldFail("fchmod")) return -1;
  return base_->Fchmod(fd, mode);
}

void FaultInjectionEnv::RedirectChown(gid_t gid) {
  std::lock_guard<std::mutex> lock(mu_);
  redirect_chown_ = gid;
}

std::optional<gid_t> FaultInjectionEnv::ChownRequested(const std::string& path) const {
  struct stat st {};
  if (base::HasNul(path) || ::lstat(path.c_str(), &st) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = chown_requested_.find({st.st_dev, st.st_ino});
  if (it == chown_requested_.end()) return std::nullopt;
  return it->second;
}

gid_t FaultInjectionEnv::Redirected(int fd, const std::string& path, int flags, gid_t gid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!redirect_chown_) return gid;
  struct stat st {};
  // A name with a NUL is not looked up (the call it comes with fails with EINVAL in base_).
  const int rc = path.empty()         ? ::fstat(fd, &st)
                 : base::HasNul(path) ? -1
                                      : ::fstatat(fd, path.c_str(), &st, flags);
  if (rc == 0) chown_requested_[{st.st_dev, st.st_ino}] = gid;
  return *redirect_chown_;
}

int FaultInjectionEnv::Fchown(int fd, uid_t uid, gid_t gid) {
  if (ShouldFail("fchown")) return -1;
  return base_->Fchown(fd, uid, Redirected(fd, "", 0, gid));
}

int FaultInjectionEnv::FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) {
  if (ShouldFail("fchmodat")) return -1;
  return base_->FchmodAt(dirfd, path, mode, flags);
}

int FaultInjectionEnv::FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid,
                                int flags) {
  if (ShouldFail("fchownat")) return -1;
  return base_->FchownAt(dirfd, path, uid, Redirected(dirfd, path, flags, gid), flags);
}

int FaultInjectionEnv::FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) {
  if (ShouldFail("fstatat")) return -1;
  return base_->FstatAt(dirfd, path, st, flags);
}

int FaultInjectionEnv::MkdirAt(int dirfd, const std::string& path, mode_t mode) {
  if (ShouldFail("mkdirat")) return -1;
  return base_->MkdirAt(dirfd, path, mode);
}

int FaultInjectionEnv::SymlinkAt(const std::string& target, int dirfd,
                                 const std::string& linkpath) {
  if (ShouldFail("symlinkat")) return -1;
  return base_->SymlinkAt(target, dirfd, linkpath);
}

int FaultInjectionEnv::ReadlinkAt(int dirfd, const std::string& path, std::string* out) {
  if (ShouldFail("readlinkat")) return -1;
  return base_->ReadlinkAt(dirfd, path, out);
}

int FaultInjectionEnv::RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
                                const std::string& newpath) {
  if (ShouldFail("renameat")) return -1;
  return base_->RenameAt(olddirfd, oldpath, newdirfd, newpath);
}

int FaultInjectionEnv::UnlinkAt(int dirfd, const std::string& path, int flags) {
  if (ShouldFail("unlinkat")) return -1;
  return base_->UnlinkAt(dirfd, path, flags);
}

int FaultInjectionEnv::ReadDir(int dirfd, std::vector<DirEntry>* entries) {
  ++read_dirs_;
  if (ShouldFail("readdir")) return -1;
  return base_->ReadDir(dirfd, entries);
}

int FaultInjectionEnv::GetInodeFlags(int fd, int* flags) {
  if (ShouldFail("getflags")) return -1;
  return base_->GetInodeFlags(fd, flags);
}

int FaultInjectionEnv::SetInodeFlags(int fd, int flags) {
  if (ShouldFail("setflags")) return -1;
  return base_->SetInodeFlags(fd, flags);
}

int FaultInjectionEnv::MountId(int fd, uint64_t* mount_id) {
  if (ShouldFail("mountid")) return -1;
  return base_->MountId(fd, mount_id);
}

int FaultInjectionEnv::StatMount(int dirfd, const std::string& path, int flags, struct stat* st,
                                 uint64_t* mount_id) {
  if (ShouldFail("statmount")) return -1;
  return base_->StatMount(dirfd, path, flags, st, mount_id);
}

int FaultInjectionEnv::Dup(int fd) {
  if (ShouldFail("dup")) return -1;
  return base_->Dup(fd);
}

int FaultInjectionEnv::Fstat(int fd, struct stat* st) {
  if (ShouldFail("fstat")) return -1;
  return base_->Fstat(fd, st);
}

int FaultInjectionEnv::Fstatfs(int fd, struct statfs* st) {
  if (ShouldFail("fstatfs")) return -1;
  return base_->Fstatfs(fd, st);
}

ssize_t FaultInjectionEnv::PwriteAll(int fd, const void* buf, size_t n, off_t offset) {
  if (ShouldFail("pwrite")) return -1;
  return base_->PwriteAll(fd, buf, n, offset);
}

int FaultInjectionEnv::Ftruncate(int fd, off_t length) {
  if (ShouldFail("ftruncate")) return -1;
  return base_->Ftruncate(fd, length);
}

ssize_t FaultInjectionEnv::Pread(int fd, void* buf, size_t n, off_t offset) {
  if (ShouldFail("pread")) return -1;
  return base_->Pread(fd, buf, n, offset);
}

int FaultInjectionEnv::OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) {
  if (ShouldFail("openat2")) return -1;
  return base_->OpenAt2Beneath(dirfd, rel, flags, mode);
}

bool FaultInjectionEnv::FindMount(uint64_t mount_id, MountInfo* out) {
  if (ShouldFail("mountinfo")) return false;
  return base_->FindMount(mount_id, out);
}

int FaultInjectionEnv::Mount(const std::string& source, int fd, const std::string& fs_type,
                             unsigned long flags, const std::string& data) {
  if (ShouldFail("mount")) return -1;
  return base_->Mount(source, fd, fs_type, flags, data);
}

int FaultInjectionEnv::Unmount(int fd, int flags) {
  if (ShouldFail("umount")) return -1;
  return base_->Unmount(fd, flags);
}

int FaultInjectionEnv::InotifyAddWatch(int inotify_fd, const std::string& path, uint32_t mask) {
  if (ShouldFail("inotify_add_watch")) return -1;
  return base_->InotifyAddWatch(inotify_fd, path, mask);
}

std::chrono::steady_clock::time_point FaultInjectionEnv::SteadyNow() {
  return base_->SteadyNow() + std::chrono::nanoseconds(clock_offset_.load());
}

std::chrono::system_clock::time_point FaultInjectionEnv::WallNow() {
  return base_->WallNow() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                std::chrono::nanoseconds(clock_offset_.load()));
}

std::string FaultRun::Describe() const {
  const char* name = ::strerrorname_np(err);
  return "call " + std::to_string(index) + " (" + call + ") failed with " +
         (name != nullptr ? name : std::to_string(err));
}

std::vector<std::string> FailEachCallInTurn(FaultInjectionEnv& env,
                                            const std::function<void()>& reset,
                                            const std::function<void()>& run,
                                            const std::function<void(const FaultRun&)>& check,
                                            const std::vector<int>& errnos) {
  static const std::set<std::string> kLoopsOnEintr = {"write", "read", "pwrite", "pread",
                                                      "readdir"};
  reset();
  env.FailCall(0, 0);
  env.RecordCalls(true);
  run();
  const std::vector<std::string> calls = env.recorded();
  env.RecordCalls(false);
  for (size_t i = 1; i <= calls.size(); ++i) {
    for (const int err : errnos) {
      if (err == EINTR && kLoopsOnEintr.count(calls[i - 1]) != 0) continue;
      reset();
      env.FailCall(static_cast<int>(i), err);
      run();
      // The i-th call of this run was failed (its name may differ from the recorded run's where
      // the order of a directory's entries does: a removal walks them as readdir lists them).
      const std::string failed = env.failed_call();
      FaultRun r{static_cast<int>(i), failed.empty() ? calls[i - 1] : failed, err, !failed.empty()};
      env.FailCall(0, 0);
      check(r);
    }
  }
  return calls;
}

}  // namespace atomicwriter
