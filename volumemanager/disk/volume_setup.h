// The filesystem side of mounting and tearing down one volume. These functions block and run on
// the libuv thread pool, never on the loop thread; they touch only the volume dir and the
// directories above it up to the pod dir, and only as the ownership journal allows.
//
// SetUpVolume creates the volume dir when missing (mode 0777, as the kubelet's wrapper does,
// whatever the umask) and writes the payload through the atomic writer. Before it creates
// anything it records, durably, the volume and each missing directory above it in the ownership
// journal: what the journal lists is what the daemon may later remove. A volume dir that already
// exists and is not in the journal (the kubelet's, or an earlier daemon's whose journal was lost)
// gets its content refreshed and nothing else: no tmpfs is mounted on it, and it is never removed;
// and only when it is empty or a volume some writer set up, on its pod dir's mount (below).
// A failure on first mount removes what this call created, so no directory is left; a failure on
// remount leaves the published content as it was (upstream issue 113242).
// In a volume the journal lists (no other writer touches it) the version a write replaces is
// removed at once where the filesystem withholds freed inodes from reuse (ext4 without a
// journal: atomicwriter::ReplacedVersion::kAtOnceWhereFreedInodesWait); every other version dir
// waits out `unpublished_grace`.
//
// Memory-medium volumes (secret, downwardAPI, projected; `tmpfs` set) the daemon owns get a tmpfs
// mounted on a new or empty volume dir, as the kubelet does, so their bytes never reach the node's
// disk. Where mounting is not permitted (an unprivileged run) the volume stays a plain directory
// and a warning is logged once per process.
//
// With `refresh_only` (the kubelet owns the volume's life), SetUpVolume writes only into a volume
// the kubelet has set up (its `..data` link exists, and so does every top-level name of the
// version it points at) and creates, mounts and records nothing else; KubeletHasSetUp tells
// beforehand whether it has.
//
// A volume dir is the one the daemon made: the journal records its inode (on the root's
// filesystem) right after the mkdir, before anything is written in or mounted on it, and every
// later write, teardown and reconstruction first checks, on the dir it is about to use, that
// pods/, the pod dir, volumes/ and the plugin dir are on one mount, the volume dir on the root's
// filesystem, and its inode the recorded one (CheckOwnedVolumeDir). A dir that fails any of
// these (e.g. another dir bound over the plugin dir, holding a dir of the volume's name) is not
// the daemon's: it is released from the journal, left in place as it is, and reported (an error
// naming pod, volume and path; OwnershipJournal::ForeignVolumeDirs for /debug/state). An entry
// with no recorded inode (a v1 or v2 journal's) is checked for the mounts and the filesystem
// only. A volume dir that exists and is not in the journal is refused at set-up, nothing written,
// when it is on another mount than its pod dir, or when it holds anything and no `..data` link
// to a version dir of its own (it is not a volume any writer set up).
//
// TearDownVolume removes a volume only when the journal lists it: it unmounts a tmpfs volume dir
// (only a whole tmpfs, as the daemon mounts it: any other mount there stays, and so does the
// volume), removes it without following any symlink inside and without entering any other mount
// (a bind mount inside the volume stays, and the teardown fails naming it), then the directories
// above it that the journal lists and that became empty. Anything else is left in place. A
// failure to remove those directories fails the teardown too (the volume itself is gone): the
// teardown made again, of a volume the journal no longer lists, removes them (kNotOwned).
//
// Every system call goes through the `env` each function is given (atomicwriter::Env): the
// daemon's is PosixEnv(); fault tests pass one that fails a chosen call.
//
// Beneath the root dir, no link is followed: every path below `root_dir` is opened one component
// at a time from a descriptor of the root (atomicwriter::OpenBeneath), and mount, unmount and the
// removal act on descriptors already checked (/proc/self/fd/N). A symlink (or a file) where a
// directory of the volume's path should be (pods/, the pod dir, volumes/, the plugin dir, the
// volume dir) fails that volume with an error saying so, and is never followed nor removed.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_SETUP_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_SETUP_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "volumemanager/journal/ownership_journal.h"

namespace volumemanager {

struct VolumeLocation {
  std::string root_dir;
  std::string pod_uid;
  std::string plugin_dir;  // escaped plugin name
  std::string volume_name;

  std::string dir() const;
  // The volume dir relative to the root dir, "pods/<uid>/volumes/<plugin>/<name>" (also its path
  // in the ownership journal).
  std::string rel() const;
};

struct SetUpRequest {
  VolumeLocation location;
  atomicwriter::Payload payload;
  atomicwriter::PermissionCallback set_permissions;  // may be null
  bool durable = false;
  bool tmpfs = false;                   // mount a tmpfs on the volume dir (memory medium)
  OwnershipJournal* journal = nullptr;  // required
  // The volume's ledger of unpublished version dirs, kept across its writes (may be null: then
  // only this write's sightings count) and their grace period.
  atomicwriter::UnpublishedLedger* ledger = nullptr;
  std::chrono::milliseconds unpublished_grace = atomicwriter::kDefaultUnpublishedGrace;
  // Where the write hands the versions it replaced and other unpublished entries for removal
  // (atomicwriter::Options::removals); null: the write removes them itself once due.
  atomicwriter::RemovalQueue* removals = nullptr;
  // The kubelet owns the volume: refresh the content of a volume it has set up, nothing more.
  bool refresh_only = false;
  // The pod's namespace/name, for log lines (observe mode); may be empty.
  std::string pod{};
  // With refresh_only: the caller has just seen KubeletHasSetUp true for this dir on this thread,
  // so the set-up is not checked again (about eight system calls per write).
  bool kubelet_set_up_checked = false;
};

// True when the volume dir holds a `..data` link (the kubelet, or another writer, has set it up)
// and every top-level name of the version it points at; false when it does not, or does not
// exist. An error when the volume's path cannot be walked safely (a symlink or a file where a
// directory should be), or when `..data` names anything but a version dir beside it (an absolute
// path, `../x`, `..`, or a version name that is itself a link): `..data` is read as a link and
// its version opened beneath the volume dir, never followed out of it. That is no set-up to wait
// for but a volume to fail, saying why.
base::Result<bool> KubeletHasSetUp(atomicwriter::Env& env, const VolumeLocation& location);

// The volume dir, opened beneath the root dir without following any link (O_RDONLY |
// O_DIRECTORY); the error says when a link or a file stands on its path.
base::Result<base::UniqueFd> OpenVolumeDir(atomicwriter::Env& env, const VolumeLocation& location);

// The memory a volume's live version takes on a tmpfs: its regular files' sizes, each rounded up
// to whole pages as atomicwriter::TmpfsPageBytes counts a payload, and the version's name. Zero
// bytes when the volume dir is not on a tmpfs or nothing is published in it. Paths are opened
// beneath the root dir and no link is followed. Blocking (a walk of one version).
struct LiveTmpfsBytes {
  uint64_t bytes = 0;
  std::string version;
};
base::Result<LiveTmpfsBytes> LiveVersionTmpfsBytes(atomicwriter::Env& env,
                                                   const VolumeLocation& location);

enum class TearDownOutcome {
  kRemoved,   // the daemon's own volume: unmounted and removed
  kNotOwned,  // not in the ownership journal: left in place, untouched
};

// True when `dir` is a mount point: another mount than its parent's (a bind mount of the same
// filesystem too). `dir` is opened as given (a path the caller trusts: tests).
bool IsMountPoint(atomicwriter::Env& env, const std::string& dir);

// The root dir's descriptor kept across set-ups (RealVolumeDisk keeps one) instead of an open, an
// fstat and a close per write. Opened as atomicwriter::OpenRootDir opens it (the path followed:
// the administrator's choice), with its stat and mount id; reused while one statx of the path
// (followed the same way) finds the same directory on the same mount: device, inode, ctime and
// mount id equal. A root replaced, renamed, changed (its ctime), or mounted over since (a bind
// mount of itself too) is opened again; so is any root when the stat fails or the kernel does not
// tell mount ids. Thread-safe: set-ups of different volumes run concurrently; a descriptor in use
// stays open until its last user is done.
class RootDirCache {
 public:
  struct Root {
    base::UniqueFd fd;
    struct stat st {};
    uint64_t mount_id = 0;
  };
  base::Result<std::shared_ptr<const Root>> Get(atomicwriter::Env& env, const std::string& path);
  // How many times Get opened the root dir (tests).
  uint64_t OpensForTesting() const;

 private:
  mutable std::mutex mu_;
  std::string path_;
  std::shared_ptr<const Root> root_;
  uint64_t opens_ = 0;
};

// `roots`: where the root dir's descriptor is kept across calls (may be null: opened per call).
base::Result<atomicwriter::WriteResult> SetUpVolume(atomicwriter::Env& env,
                                                    const SetUpRequest& request,
                                                    RootDirCache* roots = nullptr);

// What CheckOwnedVolumeDir found.
struct VolumeDirCheck {
  bool missing = false;  // the volume dir (or a dir above it) does not exist
  bool foreign = false;  // not the dir the daemon made: `reason` says why
  uint64_t inode = 0;    // the volume dir's inode on the root's filesystem (not missing)
  std::string reason;
};

// Checks the volume dir at `location`, its parents opened beneath `root` (a descriptor of the
// root dir) without following any link: pods/, the pod dir, volumes/ and the plugin dir on one
// mount, the plugin dir on the root's filesystem, and, when `recorded_inode` is not 0, the volume
// dir's inode (the dir's own, beneath any tmpfs mounted on it) equal to it. An error only when
// the path cannot be walked (a link or a file on it, or an I/O error).
base::Result<VolumeDirCheck> CheckOwnedVolumeDir(atomicwriter::Env& env, int root,
                                                 const VolumeLocation& location,
                                                 uint64_t recorded_inode);

base::Result<TearDownOutcome> TearDownVolume(atomicwriter::Env& env, const VolumeLocation& location,
                                             OwnershipJournal& journal);

// Removes the directories of a pod that the journal lists (a plugin dir, the volumes dir, the pod
// dir itself), deepest first, with rmdir only: one that still holds anything stays, and so does
// every directory the journal does not list, or that a link or a file stands in place of. An
// error when one could not be removed for another reason (an I/O error): it stays listed, and a
// later call removes it.
base::Status RemoveOwnedEmptyPodDirs(atomicwriter::Env& env, const std::string& root_dir,
                                     const std::string& pod_uid, OwnershipJournal& journal);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_SETUP_H_
