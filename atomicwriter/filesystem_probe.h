// What the atomic writer needs to know of the filesystem it writes to (FilesystemTraits), and
// how it finds out (ProbeFilesystem).
//
// Whether a filesystem hands an inode freed a moment ago to the next file it creates: most do. ext4
// without a journal does not: its inode allocator skips an inode whose deletion time lies in an
// earlier second and less than 60 s back (360 s while that inode's table block is still dirty), so
// that a crash cannot leave a recently deleted file's inode reused before the deletion reached the
// disk. Every allocation scans the group's free inodes from the start and looks each such inode up
// in the buffer cache before passing it: with thousands freed in one batch (the versions a grace
// period kept, removed together when it ran out) each create pays for all of them, for minutes. An
// inode freed in the current second is taken at once.
//
// A writer that removes the version it replaced right after publishing the new one (as the
// kubelet's writer does) keeps recycling the same few inodes there; one that defers removals makes
// every later create walk past what it freed. AtomicWriter uses this probe to choose
// (Options::replaced_version), and, in a volume dir it alone writes, to place its versions away
// from the inodes other writers freed (FS_TOPDIR_FL on the volume dir for one mkdir).
//
// Whether a create gives a file exactly the mode it asks for, less the umask (or, under a default
// ACL, less what the ACL withholds): on ext2/3/4, tmpfs, xfs and btrfs, yes. Elsewhere (vfat's
// fmask, FUSE, network filesystems) only a chmod after the create sets a mode for sure.
// AtomicWriter skips that chmod where the create already gave the exact mode.
#ifndef VOLUMEMANAGER_ATOMICWRITER_FILESYSTEM_PROBE_H_
#define VOLUMEMANAGER_ATOMICWRITER_FILESYSTEM_PROBE_H_

#include <string_view>

namespace atomicwriter {

struct FilesystemTraits {
  // The filesystem withholds freed inodes from reuse: an ext4 filesystem (by its statfs magic)
  // whose kernel option list (`/proc/fs/ext4/<device>/options`, the device named as in
  // `/sys/dev/block/<major>:<minor>`) shows no journal. False when it cannot be told (the writer
  // then behaves as on a journaled one).
  bool freed_inodes_wait = false;
  // A create's mode is kept, less the umask or a default ACL's restrictions, and nothing else.
  bool creates_keep_mode = false;
  // A tmpfs (statfs magic): the files' pages are memory, charged to the memory cgroup of the
  // process that writes them (WriteResult::on_tmpfs).
  bool tmpfs = false;
};

// The traits of the filesystem holding the open descriptor `fd`: one fstatfs, plus, on ext4, an
// fstat (the ext4 option list is read once per filesystem, device and statfs id, and kept for
// the process's life). Every doubt answers false. Thread-safe.
FilesystemTraits ProbeFilesystem(int fd);

// Whether an ext4 option list, as `/proc/fs/ext4/<device>/options` prints it (one option per
// line), belongs to a filesystem with a journal: only then does it carry a `data=` mode.
bool Ext4OptionsShowJournal(std::string_view options);

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_FILESYSTEM_PROBE_H_
