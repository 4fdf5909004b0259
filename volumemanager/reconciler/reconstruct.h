// Reconstruction at start (the kubelet's, after a restart): the volumes an earlier run of this
// daemon set up, as its ownership journal lists them, checked on disk. Only those are adopted:
// a volume dir the journal does not list (a kubelet's, on a real node) never enters the actual
// state from a scan, so it is never torn down. Adopted volumes enter the actual state as
// uncertain: the reconciler verifies those still desired (no new version when the bytes match)
// and tears the others down once every pod source has been seen. Blocking; runs on the thread
// pool; never throws.
//
// First the journal is judged against the root dir's filesystem (RootIdentity, statfs and the
// boot id):
// - no identity recorded (a new or v1 journal), no entries, or the recorded filesystem: the
//   entries are checked as below, and the identity found is recorded;
// - another filesystem, and the recorded one was a tmpfs (or ramfs) of an earlier boot: its
//   content went with the reboot; the entries are checked (and released) as below;
// - any other filesystem: the root's filesystem is not (or not yet) the one the entries were
//   recorded on (the kubelet's disk not mounted yet, a changed mount): nothing is adopted and
//   nothing released, the journal is left as it is, and `waiting_for_filesystem` says why; the
//   caller tries again later and must not reconcile meanwhile (it would tear nothing down it
//   owns, and could set up over the recorded filesystem's mount point).
// A volume entry whose dir is present is adopted only when it is still the dir the daemon made
// (volume_setup.h, CheckOwnedVolumeDir: the recorded inode, or for an entry without one, a v1 or
// v2 journal's, on the pod dir's mount and the root's filesystem, its inode then recorded);
// otherwise it is released and left in place, in `problems` (logged at warning).
// Entries gone from disk in another boot than the recorded one are counted apart
// (`released_after_reboot`: a pod dir the kubelet cleaned up at boot, not an alarm).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONSTRUCT_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONSTRUCT_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "volumemanager/journal/ownership_journal.h"

namespace volumemanager {

struct FoundVolume {
  std::string pod_uid;
  std::string plugin_dir;  // escaped plugin name
  std::string volume_name;
  // On a tmpfs: the memory its live version `tmpfs_version` takes (LiveVersionTmpfsBytes); 0
  // on a disk, or when it could not be measured (its first write measures it then).
  uint64_t tmpfs_bytes = 0;
  std::string tmpfs_version;
};

struct ReconstructResult {
  std::vector<FoundVolume> volumes;   // owned, present, of a known plugin
  std::vector<std::string> pod_uids;  // pods with a directory the daemon owns (at any depth)
  std::vector<std::string> problems;  // owned entries that could not be checked (for the log)
  int released = 0;                   // owned entries gone from disk, dropped from the journal
  int released_after_reboot = 0;      // of those, gone in another boot than the recorded one
  // Owned volume dirs no longer the ones the daemon made (another inode, mount or filesystem:
  // CheckOwnedVolumeDir), dropped from the journal and left in place; each in `problems`.
  int foreign = 0;
  // Not empty: the root's filesystem is not the recorded one (expected and found, for the log);
  // nothing was adopted or released.
  std::string waiting_for_filesystem;
};

// Owned volumes of plugins outside `plugin_dirs` are kept in the journal but not adopted. An
// owned volume that is missing, or is no longer a real directory, is released.
// `boot_id_file` is RootIdentity::Probe's (tests). Every system call goes through `env`.
ReconstructResult ReconstructOwnedVolumes(
    atomicwriter::Env& env, const std::string& root_dir, OwnershipJournal& journal,
    const std::set<std::string>& plugin_dirs,
    const std::string& boot_id_file = RootIdentity::kBootIdFile);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONSTRUCT_H_
