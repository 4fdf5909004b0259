#include "atomicwriter/fault_injection_filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "base/strings.h"

namespace atomicwriter {

void FaultInjectionFilesystem::FailCall(int k, int err) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_ = 0;
  fail_at_ = k;
  err_ = err;
  failed_call_.clear();
}

std::string FaultInjectionFilesystem::failed_call() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_call_;
}

void FaultInjectionFilesystem::FailNext(const std::string& method, int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_method_ = method;
  fail_method_err_ = err;
}

bool FaultInjectionFilesystem::ShouldFail(const char* method) {
  const int n = ++calls_;
  {
    std::lock_guard<std::mutex> lock(mu_);
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

int FaultInjectionFilesystem::OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) {
  if (ShouldFail("openat")) return -1;
  return base_->OpenAt(dirfd, path, flags, mode);
}

int FaultInjectionFilesystem::Close(int fd) {
  if (ShouldFail("close")) {
    const int err = errno;
    base_->Close(fd);
    errno = err;
    return -1;
  }
  return base_->Close(fd);
}

ssize_t FaultInjectionFilesystem::WriteAll(int fd, const void* buf, size_t n) {
  if (ShouldFail("write")) return -1;
  return base_->WriteAll(fd, buf, n);
}

ssize_t FaultInjectionFilesystem::Read(int fd, void* buf, size_t n) {
  if (ShouldFail("read")) return -1;
  return base_->Read(fd, buf, n);
}

int FaultInjectionFilesystem::Fsync(int fd) {
  ++fsyncs_;
  if (ShouldFail("fsync")) return -1;
  return base_->Fsync(fd);
}

int FaultInjectionFilesystem::Fchmod(int fd, mode_t mode) {
  ++fchmods_;
  if (ShouldFail("fchmod")) return -1;
  return base_->Fchmod(fd, mode);
}

void FaultInjectionFilesystem::RedirectChown(gid_t gid) {
  std::lock_guard<std::mutex> lock(mu_);
  redirect_chown_ = gid;
}

std::optional<gid_t> FaultInjectionFilesystem::ChownRequested(const std::string& path) const {
  struct stat st {};
  if (base::HasNul(path) || ::lstat(path.c_str(), &st) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = chown_requested_.find({st.st_dev, st.st_ino});
  if (it == chown_requested_.end()) return std::nullopt;
  return it->second;
}

gid_t FaultInjectionFilesystem::Redirected(int fd, const std::string& path, int flags, gid_t gid) {
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

int FaultInjectionFilesystem::Fchown(int fd, uid_t uid, gid_t gid) {
  if (ShouldFail("fchown")) return -1;
  return base_->Fchown(fd, uid, Redirected(fd, "", 0, gid));
}

int FaultInjectionFilesystem::FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) {
  if (ShouldFail("fchmodat")) return -1;
  return base_->FchmodAt(dirfd, path, mode, flags);
}

int FaultInjectionFilesystem::FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid,
                                       int flags) {
  if (ShouldFail("fchownat")) return -1;
  return base_->FchownAt(dirfd, path, uid, Redirected(dirfd, path, flags, gid), flags);
}

int FaultInjectionFilesystem::FstatAt(int dirfd, const std::string& path, struct stat* st,
                                      int flags) {
  if (ShouldFail("fstatat")) return -1;
  return base_->FstatAt(dirfd, path, st, flags);
}

int FaultInjectionFilesystem::MkdirAt(int dirfd, const std::string& path, mode_t mode) {
  if (ShouldFail("mkdirat")) return -1;
  return base_->MkdirAt(dirfd, path, mode);
}

int FaultInjectionFilesystem::SymlinkAt(const std::string& target, int dirfd,
                                        const std::string& linkpath) {
  if (ShouldFail("symlinkat")) return -1;
  return base_->SymlinkAt(target, dirfd, linkpath);
}

int FaultInjectionFilesystem::ReadlinkAt(int dirfd, const std::string& path, std::string* out) {
  if (ShouldFail("readlinkat")) return -1;
  return base_->ReadlinkAt(dirfd, path, out);
}

int FaultInjectionFilesystem::RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
                                       const std::string& newpath) {
  if (ShouldFail("renameat")) return -1;
  return base_->RenameAt(olddirfd, oldpath, newdirfd, newpath);
}

int FaultInjectionFilesystem::UnlinkAt(int dirfd, const std::string& path, int flags) {
  if (ShouldFail("unlinkat")) return -1;
  return base_->UnlinkAt(dirfd, path, flags);
}

int FaultInjectionFilesystem::ReadDir(int dirfd, std::vector<DirEntry>* entries) {
  ++read_dirs_;
  if (ShouldFail("readdir")) return -1;
  return base_->ReadDir(dirfd, entries);
}

int FaultInjectionFilesystem::GetInodeFlags(int fd, int* flags) {
  if (ShouldFail("getflags")) return -1;
  return base_->GetInodeFlags(fd, flags);
}

int FaultInjectionFilesystem::SetInodeFlags(int fd, int flags) {
  if (ShouldFail("setflags")) return -1;
  return base_->SetInodeFlags(fd, flags);
}

int FaultInjectionFilesystem::MountId(int fd, uint64_t* mount_id) {
  if (ShouldFail("mountid")) return -1;
  return base_->MountId(fd, mount_id);
}

}  // namespace atomicwriter
