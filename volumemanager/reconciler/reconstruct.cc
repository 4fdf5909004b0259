#include "volumemanager/reconciler/reconstruct.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "atomicwriter/open_beneath.h"
#include "base/unique_fd.h"
#include "volumemanager/disk/volume_setup.h"

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
  *out = FoundVolume{parts[1], parts[3], parts[4], 0, ""};
  return true;
}

}  // namespace

ReconstructResult ReconstructOwnedVolumes(atomicwriter::Env& env, const std::string& root_dir,
                                          OwnershipJournal& journal,
                                          const std::set<std::string>& plugin_dirs,
                                          const std::string& boot_id_file) {
  ReconstructResult out;
  std::vector<OwnedPath> gone;
  std::vector<OwnedPath> foreign;  // present, but not the volume dirs the daemon made
  std::set<std::string> pods;
  auto root = atomicwriter::OpenRootDir(env, root_dir);
  if (!root.ok()) {
    // Nothing can be checked: nothing is adopted, and nothing released.
    out.problems.push_back(root.status().message());
    return out;
  }
  const base::UniqueFd root_fd(*root);
  base::Result<RootIdentity> found = RootIdentity::Probe(env, root_dir, boot_id_file);
  if (!found.ok()) {
    out.problems.push_back(found.status().message());
    return out;
  }
  const RootIdentity recorded = journal.identity();
  const std::vector<OwnedPath> entries = journal.Entries();
  const bool other_boot = recorded.known() && !recorded.boot_id.empty() &&
                          !found->boot_id.empty() && recorded.boot_id != found->boot_id;
  if (recorded.known() && !entries.empty() && !recorded.SameFilesystem(*found) &&
      !(other_boot && recorded.Volatile())) {
    out.waiting_for_filesystem = "the root dir " + root_dir + " is on " + found->ToString() +
                                 "; the ownership journal's " + std::to_string(entries.size()) +
                                 " entries were recorded on " + recorded.ToString();
    return out;
  }
  for (const OwnedPath& entry : entries) {
    const std::string full = root_dir + "/" + entry.path;
    // lstat of the entry, its parents opened beneath the root without following a link: a link
    // planted above an owned dir is a problem to report, never a path to follow.
    struct stat st {};
    std::string name;
    const base::UniqueFd parent(
        atomicwriter::OpenParentBeneath(env, root_fd.get(), entry.path, &name));
    bool present = parent.valid();
    if (present) present = env.FstatAt(parent.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0;
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
    // Still the dir the daemon made: its recorded inode, or (none recorded: a v1 or v2 entry) on
    // its pod dir's mount and the root's filesystem, its inode recorded now.
    const uint64_t recorded_inode = journal.VolumeInode(entry.path);
    auto check = CheckOwnedVolumeDir(
        env, root_fd.get(), VolumeLocation{root_dir, v.pod_uid, v.plugin_dir, v.volume_name},
        recorded_inode);
    if (!check.ok()) {
      out.problems.push_back(check.status().message() +
                             "; kept in the ownership journal, not adopted");
      continue;
    }
    if (check->missing) {
      gone.push_back(entry);
      continue;
    }
    if (check->foreign) {
      foreign.push_back(entry);
      journal.NoteForeignVolumeDir(entry.path, check->reason);
      out.problems.push_back(full + ": not the volume dir volumemanager set up (" + check->reason +
                             "); released from its ownership and left in place, never removed");
      continue;
    }
    if (recorded_inode == 0) {
      if (base::Status s = journal.SetVolumeInode(entry.path, check->inode); !s.ok()) {
        out.problems.push_back(s.message());
      }
    }
    // What the daemon holds of it in memory (a tmpfs of its own), for the tmpfs bytes it reports.
    if (auto held = LiveVersionTmpfsBytes(
            env, VolumeLocation{root_dir, v.pod_uid, v.plugin_dir, v.volume_name});
        held.ok()) {
      v.tmpfs_bytes = held->bytes;
      v.tmpfs_version = std::move(held->version);
    }
    out.volumes.push_back(std::move(v));
  }
  if (!foreign.empty()) {
    if (base::Status s = journal.Remove(foreign); !s.ok()) out.problems.push_back(s.message());
    out.foreign = static_cast<int>(foreign.size());
  }
  if (!gone.empty()) {
    base::Status s = journal.Remove(gone);
    if (!s.ok()) out.problems.push_back(s.message());
    out.released = static_cast<int>(gone.size());
    if (other_boot) out.released_after_reboot = out.released;
  }
  if (!(recorded == *found)) {
    // What the entries now describe. When it cannot be written the old identity stays: the next
    // start judges against it again (and at worst waits, never releases).
    if (base::Status s = journal.SetIdentity(*found); !s.ok()) out.problems.push_back(s.message());
  }
  out.pod_uids.assign(pods.begin(), pods.end());
  return out;
}

}  // namespace volumemanager
