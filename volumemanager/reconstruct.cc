#include "volumemanager/reconstruct.h"

#include <filesystem>

#include "volumemanager/volume_paths.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

bool IsRealDir(const fs::directory_entry& e) {
  std::error_code ec;
  return e.symlink_status(ec).type() == fs::file_type::directory;
}

}  // namespace

ScanResult ScanPodVolumes(const std::string& root_dir, const std::set<std::string>& plugin_dirs) {
  ScanResult out;
  std::error_code ec;
  for (const auto& pod : fs::directory_iterator(PodsDir(root_dir), ec)) {
    if (!IsRealDir(pod)) continue;
    const std::string uid = pod.path().filename().string();
    out.pod_uids.push_back(uid);
    std::error_code pec;
    for (const auto& plugin : fs::directory_iterator(pod.path() / "volumes", pec)) {
      const std::string plugin_dir = plugin.path().filename().string();
      if (!IsRealDir(plugin) || plugin_dirs.count(plugin_dir) == 0) continue;
      std::error_code vec;
      for (const auto& vol : fs::directory_iterator(plugin.path(), vec)) {
        if (!IsRealDir(vol)) continue;
        out.volumes.push_back(FoundVolume{uid, plugin_dir, vol.path().filename().string()});
      }
    }
  }
  return out;
}

}  // namespace volumemanager
