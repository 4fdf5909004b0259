#include "volumemanager/reconstruct.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "atomicwriter/open_beneath.h"
#include "base/unique_fd.h"

namespace volumemanager {
namespace {

// "pods/<uid>/volumes/<plugin>/<name>" -> its three names; false for any other shape.
bool SplitVolumePath(const std::string& path, FoundVolume* out) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string::npos ? slash : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 5 || parts[0] != "pods" || parts[2] != "volumes") return false;
  *out = FoundVolume{parts[1], parts[3], parts[4]};
  return true;
}

}  // namespace

ReconstructResult ReconstructOwnedVolumes(const std::string& root_dir, OwnershipJournal& journal,
                                          const std::set<std::string>& plugin_dirs) {
  ReconstructResult out;
  std::vector<OwnedPath> gone;
  std::set<std::string> pods;
  auto root = atomicwriter::OpenRootDir(root_dir);
  if (!root.ok()) {
    // Nothing can be checked: nothing is adopted, and nothing released.
    out.problems.push_back(root.status().message());
    return out;
  }
  const base::UniqueFd root_fd(*root);
  for (const OwnedPath& entry : journal.Entries()) {
    const std::string full = root_dir + "/" + entry.path;
    // lstat of the entry, its parents opened beneath the root without following a link: a link
    // planted above an owned dir is a problem to report, never a path to follow.
    struct stat st {};
    std::string name;
    const base::UniqueFd parent(atomicwriter::OpenParentBeneath(root_fd.get(), entry.path, &name));
    bool present = parent.valid();
    if (present) present = ::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!present && errno != ENOENT) {
      out.problems.push_back(atomicwriter::OpenBeneathError(full, errno).message() +
                             "; kept in the ownership journal, not adopted");
      continue;
    }
    if (!present || !S_ISDIR(st.st_mode)) {
      // Removed, or replaced by something the daemon did not make: no longer its own.
      gone.push_back(entry);
      continue;
    }
    if (entry.kind == OwnedKind::kDir) {
      // The pod of any owned dir, not only of an owned pod dir: a pod dir the kubelet made may
      // hold a volumes or plugin dir the daemon made, left empty by a stop between a teardown
      // and the removal of its dirs.
      const size_t end = entry.path.find('/', 5);
      pods.insert(entry.path.substr(5, end == std::string::npos ? end : end - 5));
      continue;
    }
    FoundVolume v;
    if (!SplitVolumePath(entry.path, &v)) {
      out.problems.push_back(full + ": not a volume path; left alone");
      continue;
    }
    if (plugin_dirs.count(v.plugin_dir) == 0) continue;
    out.volumes.push_back(std::move(v));
  }
  if (!gone.empty()) {
    base::Status s = journal.Remove(gone);
    if (!s.ok()) out.problems.push_back(s.message());
    out.released = static_cast<int>(gone.size());
  }
  out.pod_uids.assign(pods.begin(), pods.end());
  return out;
}

}  // namespace volumemanager
