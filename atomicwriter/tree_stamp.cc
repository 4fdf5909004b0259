#include "atomicwriter/tree_stamp.h"

#include <fcntl.h>

#include <vector>

namespace atomicwriter {
namespace {

// splitmix64's finalizer: one entry's identity and ctime, spread over 64 bits.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t EntryHash(const struct stat& st) {
  uint64_t h = Mix(static_cast<uint64_t>(st.st_ino));
  h = Mix(h ^ static_cast<uint64_t>(st.st_ctim.tv_sec));
  h = Mix(h ^ static_cast<uint64_t>(st.st_ctim.tv_nsec));
  return Mix(h ^ static_cast<uint64_t>(st.st_mode));
}

struct TreeWalk {
  Env& fs;
  dev_t dev;
  uint64_t sum = 0;
  int entries = 0;

  // Adds the entries below the dir open as `fd`; false when the tree cannot be judged.
  bool Dir(int fd, int depth) {
    if (depth > kTreeStampMaxDepth) return false;
    std::vector<DirEntry> children;
    if (fs.ReadDir(fd, &children) != 0) return false;
    for (const DirEntry& child : children) {
      if (++entries > kTreeStampMaxEntries) return false;
      struct stat st {};
      if (fs.FstatAt(fd, child.name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
      sum += EntryHash(st);  // a sum: the order of readdir does not matter
      if (!S_ISDIR(st.st_mode) || st.st_dev != dev) continue;
      const int sub = fs.OpenAt(fd, child.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
      if (sub < 0) return false;
      const bool ok = Dir(sub, depth + 1);
      fs.Close(sub);
      if (!ok) return false;
    }
    return true;
  }
};

}  // namespace

std::optional<uint64_t> TreeStamp(Env& fs, int dir_fd, const std::string& name,
                                  const struct stat& st) {
  TreeWalk walk{fs, st.st_dev};
  walk.sum = EntryHash(st);
  if (!S_ISDIR(st.st_mode)) return walk.sum;
  const int fd = fs.OpenAt(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  if (fd < 0) return std::nullopt;
  struct stat opened {};
  bool ok = fs.FstatAt(fd, ".", &opened, AT_SYMLINK_NOFOLLOW) == 0 && opened.st_dev == st.st_dev &&
            opened.st_ino == st.st_ino;
  if (ok) ok = walk.Dir(fd, 1);
  fs.Close(fd);
  if (!ok) return std::nullopt;
  return walk.sum;
}

}  // namespace atomicwriter
