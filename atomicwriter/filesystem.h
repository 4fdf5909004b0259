// Filesystem: the narrow set of directory-fd-relative system calls the atomic writer (and the
// ownership pass run as its permission callback) makes. Production code uses PosixFilesystem();
// tests wrap it to fail a chosen call with a chosen errno (see FaultInjectionFilesystem).
//
// Every method has POSIX semantics: it returns what the system call returns (-1 on failure) and
// leaves the reason in errno. Paths are single names or relative paths resolved against `dirfd`;
// callers pass O_NOFOLLOW / AT_SYMLINK_NOFOLLOW where a symlink must not be followed. A path (or
// link target) holding a NUL byte is refused with -1 and errno EINVAL, as Go refuses it, never
// passed on cut at the NUL.
// Implementations must be safe to call from several threads at once.
#ifndef VOLUMEMANAGER_ATOMICWRITER_FILESYSTEM_H_
#define VOLUMEMANAGER_ATOMICWRITER_FILESYSTEM_H_

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace atomicwriter {

// One directory entry as readdir reports it.
struct DirEntry {
  std::string name;
  // DT_REG, DT_DIR, DT_LNK, ... or DT_UNKNOWN when the filesystem does not say (then lstat).
  unsigned char type = 0;
  // The inode number readdir reports (0 when unknown).
  ino_t ino = 0;
};

class Filesystem {
 public:
  virtual ~Filesystem() = default;

  virtual int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) = 0;
  virtual int Close(int fd) = 0;
  // Writes all `n` bytes (looping over short writes); -1 on the first failure.
  virtual ssize_t WriteAll(int fd, const void* buf, size_t n) = 0;
  // One read(2): up to `n` bytes; 0 at end of file.
  virtual ssize_t Read(int fd, void* buf, size_t n) = 0;
  virtual int Fsync(int fd) = 0;
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
  // The id of the mount holding the open `fd` (atomicwriter::MountIdOf): a bind mount of the same
  // filesystem has another id than its source, where st_dev is the same.
  virtual int MountId(int fd, uint64_t* mount_id) = 0;
};

// The real system calls. A process-wide singleton; never deleted.
Filesystem* PosixFilesystem();

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_FILESYSTEM_H_
