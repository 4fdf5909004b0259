// Env: every system call the daemon's core makes on files, directories and mounts, and its
// clock: the atomic writer, the ownership pass run as its permission callback, volume set-up and
// teardown, the kubelet checks, subPath copies, the ownership journal, reconstruction and the
// volume manager go through one. Production code uses PosixEnv(); tests wrap it to fail a chosen
// call with a chosen errno (FaultInjectionEnv) or to move the clock. Nothing in volumemanager/
// makes such a call itself (tests/env_seam/check_env_seam.py finds any that does).
//
// Every method has POSIX semantics: it returns what the system call returns (-1 on failure) and
// leaves the reason in errno. Paths are single names or relative paths resolved against `dirfd`;
// callers pass O_NOFOLLOW / AT_SYMLINK_NOFOLLOW where a symlink must not be followed. A path (or
// link target) holding a NUL byte is refused with -1 and errno EINVAL, as Go refuses it, never
// passed on cut at the NUL. The methods that say they loop on EINTR never return it; any other
// may, as the system call would on a filesystem that lets a signal interrupt it (FUSE, NFS).
// Implementations must be safe to call from several threads at once.
#ifndef VOLUMEMANAGER_ATOMICWRITER_ENV_H_
#define VOLUMEMANAGER_ATOMICWRITER_ENV_H_

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace atomicwriter {

// One directory entry as readdir reports it.
struct DirEntry {
  std::string name;
  // DT_REG, DT_DIR, DT_LNK, ... or DT_UNKNOWN when the filesystem does not say (then lstat).
  unsigned char type = 0;
  // The inode number readdir reports (0 when unknown).
  ino_t ino = 0;
};

// A mount as /proc/self/mountinfo lists it, its octal escapes (`\040` for a space...) decoded.
struct MountInfo {
  // "/" for a whole filesystem, the source dir or file for a bind of part of one; a root that was
  // removed since (a bind of a file whose dir is gone) ends in "//deleted".
  std::string root;
  std::string mount_point;  // where it is mounted, in this process's mount namespace
  std::string device;       // "major:minor" of its filesystem (st_dev)
  std::string fs_type;      // e.g. "tmpfs", "ext4"
  std::string source;       // e.g. "tmpfs", "/dev/sda1"
};

class Env {
 public:
  virtual ~Env() = default;

  virtual int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) = 0;
  virtual int Close(int fd) = 0;
  // Writes all `n` bytes (looping over short writes); -1 on the first failure.
  virtual ssize_t WriteAll(int fd, const void* buf, size_t n) = 0;
  // One read(2): up to `n` bytes; 0 at end of file.
  virtual ssize_t Read(int fd, void* buf, size_t n) = 0;
  virtual int Fsync(int fd) = 0;
  virtual int Fdatasync(int fd) = 0;
  virtual int Fchmod(int fd, mode_t mode) = 0;
  virtual int Fchown(int fd, uid_t uid, gid_t gid) = 0;
  virtual int FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) = 0;
  virtual int FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid, int flags) = 0;
  virtual int FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) = 0;
  virtual int MkdirAt(int dirfd, const std::string& path, mode_t mode) = 0;
  virtual int SymlinkAt(const std::string& target, int dirfd, const std::string& linkpath) = 0;
  // Stores the link target in `out`; -1 on failure (EINVAL when `path` is not a symlink).
  virtual int ReadlinkAt(int dirfd, const std::string& path, std::string* out) = 0;
  virtual int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
                       const std::string& newpath) = 0;
  virtual int UnlinkAt(int dirfd, const std::string& path, int flags) = 0;
  // Lists the entries of the open directory `dirfd` (without "." and ".."), reading from its
  // start: the descriptor's offset is rewound first and left at the end.
  virtual int ReadDir(int dirfd, std::vector<DirEntry>* entries) = 0;
  // The inode flags of the open `fd` (FS_IOC_GETFLAGS / FS_IOC_SETFLAGS: the attributes chattr
  // sets, FS_*_FL from <linux/fs.h>).
  virtual int GetInodeFlags(int fd, int* flags) = 0;
  virtual int SetInodeFlags(int fd, int flags) = 0;
  // The id of the mount holding the open `fd` (statx STATX_MNT_ID, Linux 5.8; else the `mnt_id`
  // line of /proc/self/fdinfo/<fd>, Linux 3.15): a bind mount of the same filesystem has another
  // id than its source, where st_dev is the same.
  virtual int MountId(int fd, uint64_t* mount_id) = 0;
  // FstatAt of `path` (same `flags`) and the id of the mount it is on, in one call where the
  // kernel has statx STATX_MNT_ID (PosixEnv); the default is FstatAt, then an O_PATH open of the
  // path for MountId. Sets `*mount_id` to 0 when the kernel cannot tell.
  virtual int StatMount(int dirfd, const std::string& path, int flags, struct stat* st,
                        uint64_t* mount_id);

  // A second descriptor of `fd` (close-on-exec).
  virtual int Dup(int fd) = 0;
  virtual int Fstat(int fd, struct stat* st) = 0;
  virtual int Fstatfs(int fd, struct statfs* st) = 0;
  // Writes all `n` bytes at `offset` (looping over short writes and EINTR); -1 on the first
  // failure.
  virtual ssize_t PwriteAll(int fd, const void* buf, size_t n, off_t offset) = 0;
  virtual int Ftruncate(int fd, off_t length) = 0;
  // One pread(2) (looping on EINTR): up to `n` bytes at `offset`; 0 at end of file.
  virtual ssize_t Pread(int fd, void* buf, size_t n, off_t offset) = 0;

  // openat2 of `rel` beneath `dirfd` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  // RESOLVE_NO_MAGICLINKS, `flags | O_NOFOLLOW | O_CLOEXEC`: -1 with ENOSYS where the kernel (or
  // a seccomp profile) does not offer it. Callers use OpenBeneath (open_beneath.h), which walks
  // one component at a time through OpenAt where this fails so.
  virtual int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) = 0;

  // The mount `mount_id` as /proc/self/mountinfo lists it (MountInfo); false when no such mount
  // is listed, or the table could not be read (errno says which: ENOENT for "not listed").
  virtual bool FindMount(uint64_t mount_id, MountInfo* out) = 0;
  // mount(2) of `source` (type `fs_type`, `flags`, `data`) onto the directory the open `fd`
  // names, and umount2(2) of the mount at the directory `fd` names: by descriptor
  // (/proc/self/fd/<fd>), so no path is resolved again between the check and the call.
  virtual int Mount(const std::string& source, int fd, const std::string& fs_type,
                    unsigned long flags, const std::string& data) = 0;
  virtual int Unmount(int fd, int flags) = 0;
  // inotify_add_watch(2) of `path` (a path as given, or FdPath of an open descriptor).
  virtual int InotifyAddWatch(int inotify_fd, const std::string& path, uint32_t mask) = 0;

  // The clocks: monotonic time for deadlines and backoff, wall time for what is shown.
  virtual std::chrono::steady_clock::time_point SteadyNow() = 0;
  virtual std::chrono::system_clock::time_point WallNow() = 0;
};

// An Env that forwards every call to another: derive from it to change some calls and keep the
// rest (as LevelDB's EnvWrapper).
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
    return target_->OpenAt(dirfd, path, flags, mode);
  }
  int Close(int fd) override { return target_->Close(fd); }
  ssize_t WriteAll(int fd, const void* buf, size_t n) override {
    return target_->WriteAll(fd, buf, n);
  }
  ssize_t Read(int fd, void* buf, size_t n) override { return target_->Read(fd, buf, n); }
  int Fsync(int fd) override { return target_->Fsync(fd); }
  int Fdatasync(int fd) override { return target_->Fdatasync(fd); }
  int Fchmod(int fd, mode_t mode) override { return target_->Fchmod(fd, mode); }
  int Fchown(int fd, uid_t uid, gid_t gid) override { return target_->Fchown(fd, uid, gid); }
  int FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) override {
    return target_->FchmodAt(dirfd, path, mode, flags);
  }
  int FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid, int flags) override {
    return target_->FchownAt(dirfd, path, uid, gid, flags);
  }
  int FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) override {
    return target_->FstatAt(dirfd, path, st, flags);
  }
  int MkdirAt(int dirfd, const std::string& path, mode_t mode) override {
    return target_->MkdirAt(dirfd, path, mode);
  }
  int SymlinkAt(const std::string& link_target, int dirfd, const std::string& linkpath) override {
    return target_->SymlinkAt(link_target, dirfd, linkpath);
  }
  int ReadlinkAt(int dirfd, const std::string& path, std::string* out) override {
    return target_->ReadlinkAt(dirfd, path, out);
  }
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override {
    return target_->RenameAt(olddirfd, oldpath, newdirfd, newpath);
  }
  int UnlinkAt(int dirfd, const std::string& path, int flags) override {
    return target_->UnlinkAt(dirfd, path, flags);
  }
  int ReadDir(int dirfd, std::vector<DirEntry>* entries) override {
    return target_->ReadDir(dirfd, entries);
  }
  int GetInodeFlags(int fd, int* flags) override { return target_->GetInodeFlags(fd, flags); }
  int SetInodeFlags(int fd, int flags) override { return target_->SetInodeFlags(fd, flags); }
  int MountId(int fd, uint64_t* mount_id) override { return target_->MountId(fd, mount_id); }
  int StatMount(int dirfd, const std::string& path, int flags, struct stat* st,
                uint64_t* mount_id) override {
    return target_->StatMount(dirfd, path, flags, st, mount_id);
  }
  int Dup(int fd) override { return target_->Dup(fd); }
  int Fstat(int fd, struct stat* st) override { return target_->Fstat(fd, st); }
  int Fstatfs(int fd, struct statfs* st) override { return target_->Fstatfs(fd, st); }
  ssize_t PwriteAll(int fd, const void* buf, size_t n, off_t offset) override {
    return target_->PwriteAll(fd, buf, n, offset);
  }
  int Ftruncate(int fd, off_t length) override { return target_->Ftruncate(fd, length); }
  ssize_t Pread(int fd, void* buf, size_t n, off_t offset) override {
    return target_->Pread(fd, buf, n, offset);
  }
  int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) override {
    return target_->OpenAt2Beneath(dirfd, rel, flags, mode);
  }
  bool FindMount(uint64_t mount_id, MountInfo* out) override {
    return target_->FindMount(mount_id, out);
  }
  int Mount(const std::string& source, int fd, const std::string& fs_type, unsigned long flags,
            const std::string& data) override {
    return target_->Mount(source, fd, fs_type, flags, data);
  }
  int Unmount(int fd, int flags) override { return target_->Unmount(fd, flags); }
  int InotifyAddWatch(int inotify_fd, const std::string& path, uint32_t mask) override {
    return target_->InotifyAddWatch(inotify_fd, path, mask);
  }
  std::chrono::steady_clock::time_point SteadyNow() override { return target_->SteadyNow(); }
  std::chrono::system_clock::time_point WallNow() override { return target_->WallNow(); }

 private:
  Env* target_;
};

// Why Env::FindMount found no mount for `shown` (a path), from its errno: "its mount is not
// listed in /proc/self/mountinfo" (ENOENT), or the failure to read the table, naming its cause.
base::Status MountLookupError(const std::string& shown, int err);

// Whether the open regular file `fd`, said to be `size` bytes long, holds exactly `data`: every
// byte compared (reads of 64 KiB at a time through `env`, the file offset left alone), and
// nothing past it (a file that grew since its size was taken does not hold `data`).
bool FileHolds(Env& env, int fd, std::string_view data, off_t size);

// "/proc/self/fd/<fd>": a path that resolves to exactly the inode `fd` refers to (a magic link),
// for the calls that take only a path. The calling process's own fd table: use it at once.
std::string FdPath(int fd);

// The real system calls. A process-wide singleton; never deleted.
Env* PosixEnv();

// How many times PosixEnv()'s FindMount has read the whole of /proc/self/mountinfo in this
// process (tests count them).
uint64_t MountTableReadsForTesting();

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_ENV_H_
