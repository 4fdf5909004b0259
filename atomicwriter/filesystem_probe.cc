#include "atomicwriter/filesystem_probe.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "base/durable_file.h"

namespace atomicwriter {
namespace {

// The kernel's name of block device `dev` ("vda", "dm-0", "loop3"): the last component of the
// /sys/dev/block link. Empty when it cannot be read (no /sys, not a block device).
std::string BlockDeviceName(dev_t dev) {
  char link[64];
  std::snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(dev), minor(dev));
  char target[PATH_MAX];
  const ssize_t n = ::readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return "";
  const std::string path(target, static_cast<size_t>(n));
  return path.substr(path.rfind('/') + 1);
}

bool Ext4DeviceWithoutJournal(dev_t dev) {
  const std::string name = BlockDeviceName(dev);
  if (name.empty() || name == "." || name == "..") return false;
  const base::Result<std::string> options =
      base::ReadWholeFile("/proc/fs/ext4/" + name + "/options");
  return options.ok() && !Ext4OptionsShowJournal(*options);
}

// Ext4 without a journal, by the device's option list; cached per filesystem.
bool Ext4FreedInodesWait(int fd, const struct statfs& sfs) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  // The device and the filesystem's id (from its UUID on ext4): a device made anew (a loop device
  // set up again, mkfs) is another filesystem.
  int fsid[2];
  static_assert(sizeof(fsid) == sizeof(sfs.f_fsid));
  std::memcpy(fsid, &sfs.f_fsid, sizeof(fsid));
  const std::tuple<dev_t, int, int> key{st.st_dev, fsid[0], fsid[1]};
  static std::mutex mu;
  static auto* known = new std::map<std::tuple<dev_t, int, int>, bool>();  // used until exit
  std::lock_guard<std::mutex> lock(mu);
  auto it = known->find(key);
  if (it == known->end()) it = known->emplace(key, Ext4DeviceWithoutJournal(st.st_dev)).first;
  return it->second;
}

}  // namespace

bool Ext4OptionsShowJournal(std::string_view options) {
  while (!options.empty()) {
    const size_t end = options.find('\n');
    const std::string_view line = options.substr(0, end);
    if (line.starts_with("data=")) return true;
    if (end == std::string_view::npos) break;
    options.remove_prefix(end + 1);
  }
  return false;
}

FilesystemTraits ProbeFilesystem(int fd) {
  FilesystemTraits traits;
  struct statfs sfs {};
  if (::fstatfs(fd, &sfs) != 0) return traits;
  switch (sfs.f_type) {
    case EXT4_SUPER_MAGIC:  // ext2 and ext3 too: they share the magic
      traits.creates_keep_mode = true;
      traits.freed_inodes_wait = Ext4FreedInodesWait(fd, sfs);
      break;
    case TMPFS_MAGIC:
      traits.tmpfs = true;
      traits.creates_keep_mode = true;
      break;
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
      traits.creates_keep_mode = true;
      break;
    default:
      break;
  }
  return traits;
}

}  // namespace atomicwriter
