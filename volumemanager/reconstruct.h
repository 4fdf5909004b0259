// Reconstruction at start (the kubelet's, after a restart): the volumes an earlier run of this
// daemon set up, as its ownership journal lists them, checked on disk. Only those are adopted:
// a volume dir the journal does not list (a kubelet's, on a real node) never enters the actual
// state from a scan, so it is never torn down. Adopted volumes enter the actual state as
// uncertain: the reconciler verifies those still desired (no new version when the bytes match)
// and tears the others down once every pod source has been seen. Blocking; runs on the thread
// pool; never throws.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONSTRUCT_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONSTRUCT_H_

#include <set>
#include <string>
#include <vector>

#include "volumemanager/ownership_journal.h"

namespace volumemanager {

struct FoundVolume {
  std::string pod_uid;
  std::string plugin_dir;  // escaped plugin name
  std::string volume_name;
};

struct ReconstructResult {
  std::vector<FoundVolume> volumes;   // owned, present, of a known plugin
  std::vector<std::string> pod_uids;  // pods with a directory the daemon owns (at any depth)
  std::vector<std::string> problems;  // owned entries that could not be checked (for the log)
  int released = 0;                   // owned entries gone from disk, dropped from the journal
};

// Owned volumes of plugins outside `plugin_dirs` are kept in the journal but not adopted. An
// owned volume that is missing, or is no longer a real directory, is released.
ReconstructResult ReconstructOwnedVolumes(const std::string& root_dir, OwnershipJournal& journal,
                                          const std::set<std::string>& plugin_dirs);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONSTRUCT_H_
