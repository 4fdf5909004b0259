// TreeStamp: what "unchanged" means for an unpublished entry of a volume dir (a version dir, a
// staging link) under the grace rule (UnpublishedLedger, RemovalQueue). Another writer's version
// in progress changes only the dir it writes in: an item "a/b/c" written into a nested subdir
// moves a/b's ctime and mtime, never the version dir's own. So an entry is unchanged only when
// nothing in its tree changed: the stamp hashes the inode and ctime of the entry and of every dir,
// file and link below it (a create, write, chmod, rename or removal anywhere in it moves some
// ctime), combined so that the order the dirs are read in does not matter.
//
// The walk follows no link and enters no other filesystem (a mount below the entry is stamped
// as its mount point only). It is bounded: an entry with more than kMaxEntries entries in its tree,
// or deeper than kMaxDepth, or one that cannot be read, has no stamp (nullopt), and the grace rule
// then never finds it unchanged: it is kept (the daemon's and the kubelet's versions are a few
// dozen files; what is that big is left for whoever made it). A change within the filesystem's
// timestamp granularity of the stamp (on kernels whose timestamps are that coarse) shows at the
// next stamp, a grace period later.
//
// Blocking: one open, one read of each dir and one lstat per entry. Run it where blocking is
// allowed (the removal queue's thread, a writer's pool thread), never on the loop.
#ifndef VOLUMEMANAGER_ATOMICWRITER_TREE_STAMP_H_
#define VOLUMEMANAGER_ATOMICWRITER_TREE_STAMP_H_

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

#include "atomicwriter/env.h"

namespace atomicwriter {

inline constexpr int kTreeStampMaxEntries = 10000;
inline constexpr int kTreeStampMaxDepth = 32;

// The stamp of entry `name` of the dir open as `dir_fd`, whose lstat is `st`; nullopt when it
// cannot be judged (too big, too deep, unreadable, or changed type while read).
std::optional<uint64_t> TreeStamp(Env& fs, int dir_fd, const std::string& name,
                                  const struct stat& st);

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_TREE_STAMP_H_
