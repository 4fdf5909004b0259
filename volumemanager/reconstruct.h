// Reconstruction at start (spec §6.6): the scan of <root>/pods/*/volumes/<plugin>/* that finds
// the volume dirs an earlier run (of this daemon or the kubelet) left, for the plugins the daemon
// knows. Found volumes enter the actual state as uncertain: the reconciler verifies those still
// desired (no new version when the bytes match) and tears the others down once every pod source
// has been seen. Blocking; runs on the thread pool.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONSTRUCT_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONSTRUCT_H_

#include <set>
#include <string>
#include <vector>

namespace volumemanager {

struct FoundVolume {
  std::string pod_uid;
  std::string plugin_dir;  // escaped plugin name
  std::string volume_name;
};

struct ScanResult {
  std::vector<FoundVolume> volumes;
  std::vector<std::string> pod_uids;  // every pod dir, with or without volumes
};

// Only real directories count (no symlinks are followed); unknown plugin dirs are skipped.
ScanResult ScanPodVolumes(const std::string& root_dir, const std::set<std::string>& plugin_dirs);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONSTRUCT_H_
