#include "volumemanager/disk/subpath_update.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <variant>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/removal_queue.h"
#include "base/errno_error.h"
#include "base/unique_fd.h"
#include "volumemanager/disk/write_gate.h"
#include "volumemanager/state/volume_paths.h"

namespace volumemanager {
namespace {

using atomicwriter::Env;
using base::UniqueFd;

constexpr std::string_view kDataPrefix = "..data/";
constexpr std::string_view kDeletedSuffix = "//deleted";

// Why `sub_path` cannot be kept current ("" when it can): it must be plain names separated by
// single '/', none "." or "..", no NUL, and name a file of the version (not `..data` itself nor
// another of the writer's `..` entries).
std::string SubPathRefusal(const std::string& sub_path) {
  if (sub_path.find('\0') != std::string::npos) return "holds a NUL byte";
  if (sub_path.starts_with('/')) return "is not a relative path";
  size_t start = 0;
  while (start <= sub_path.size()) {
    size_t slash = sub_path.find('/', start);
    if (slash == std::string::npos) slash = sub_path.size();
    const std::string_view part(sub_path.data() + start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      return "is not a plain relative path (an empty, \".\" or \"..\" element)";
    }
    start = slash + 1;
  }
  std::string_view in_version = sub_path;
  if (in_version.starts_with(kDataPrefix)) in_version.remove_prefix(kDataPrefix.size());
  if (sub_path == "..data" || in_version.starts_with("..")) {
    return "names the volume's own entries (..data or a version dir): a directory, which cannot "
           "be updated in place";
  }
  return "";
}

// The file's path inside a version dir: the subPath without a leading "..data/" (the kubelet
// resolves both to the same file).
std::string PathInVersion(const std::string& sub_path) {
  return sub_path.starts_with(kDataPrefix) ? sub_path.substr(kDataPrefix.size()) : sub_path;
}

// A version dir's name as a bind's root shows it: a timestamp dir, or one the removal queue has
// claimed (renamed to `..volumemanager_removing.*` just before removing it; the root follows).
bool IsVersionName(std::string_view name) {
  const std::string_view removing = atomicwriter::kRemovingPrefix;
  return atomicwriter::IsTimestampDirName(name) ||
         (name.starts_with(removing) && name.size() > removing.size() &&
          name.find('/') == std::string_view::npos);
}

// What the checks need of the volume dir, read once per request.
struct VolumeView {
  UniqueFd root;
  UniqueFd dir;
  std::string device;  // its filesystem, "major:minor"
  std::string prefix;  // its path within its filesystem, with a trailing '/'
};

base::Result<VolumeView> ViewVolume(Env& env, const VolumeLocation& location) {
  VolumeView v;
  auto root = atomicwriter::OpenRootDir(env, location.root_dir);
  if (!root.ok()) return root.status();
  v.root = UniqueFd(*root);
  auto dir = OpenVolumeDir(env, location);
  if (!dir.ok()) return dir.status();
  v.dir = std::move(dir).value();
  const std::string shown = location.dir();
  uint64_t mount_id = 0;
  atomicwriter::MountInfo info;
  if (env.MountId(v.dir.get(), &mount_id) != 0) {
    return base::ErrnoError("read the mount of", shown, errno);
  }
  if (!env.FindMount(mount_id, &info)) return atomicwriter::MountLookupError(shown, errno);
  // As mountinfo shows it (the superblock's device: a btrfs subvolume's files show another
  // st_dev), to compare with the bind's.
  v.device = info.device;
  // The volume dir's path in this mount namespace, then within its filesystem: the mount's root
  // followed by the path below the mount point.
  std::string here;
  if (env.ReadlinkAt(AT_FDCWD, atomicwriter::FdPath(v.dir.get()), &here) != 0) {
    return base::ErrnoError("read the path of", shown, errno);
  }
  std::string below;
  if (info.mount_point == "/") {
    below = here;
  } else if (here == info.mount_point || here.starts_with(info.mount_point + "/")) {
    below = here.substr(info.mount_point.size());
  } else {
    return base::Status::Error(shown + ": its path (" + here + ") is not below its mount point (" +
                               info.mount_point + ")");
  }
  std::string in_fs = (info.root == "/" ? "" : info.root) + below;
  if (in_fs == "/") in_fs.clear();
  v.prefix = in_fs + "/";
  return v;
}

// The whole content at offset 0, then the length, then fsync: a reader never sees an empty file.
base::Status WriteInPlace(Env& env, int fd, const std::string& data, const std::string& shown) {
  if (env.PwriteAll(fd, data.data(), data.size(), 0) < 0) {
    return base::ErrnoError("write", shown, errno);
  }
  if (env.Ftruncate(fd, static_cast<off_t>(data.size())) != 0) {
    return base::ErrnoError("truncate", shown, errno);
  }
  if (env.Fsync(fd) != 0) return base::ErrnoError("fsync", shown, errno);
  return base::Status::OK();
}

void Refuse(SubPathCopy& c, std::string reason, bool binds_invisible = false) {
  c.result = SubPathResult::kRefused;
  c.reason = std::move(reason);
  c.binds_invisible = binds_invisible;
}

void Fail(SubPathCopy& c, const base::Status& s) {
  c.result = SubPathResult::kFailed;
  c.reason = s.message();
}

void UpdateOne(Env& env, const SubPathUpdateRequest& request, const VolumeView& v,
               const SubPathMount& m, SubPathCopy& c) {
  const std::string rel_in_version = PathInVersion(m.sub_path);
  const std::string rel =
      SubPathBindRel(request.location.pod_uid, request.location.volume_name, m.container, m.index);
  const std::string shown = request.location.root_dir + "/" + rel;
  if (request.pause_for_testing) request.pause_for_testing(SubPathStage::kViewed);
  const UniqueFd bound(atomicwriter::OpenBeneath(env, v.root.get(), rel, O_PATH | O_NOFOLLOW));
  if (!bound.valid()) {
    const int err = errno;
    if (err == ENOENT) {
      // The kubelet binds the file when the container starts: nothing is stale, nothing failed.
      c.result = SubPathResult::kNotBound;
      c.reason = shown +
                 ": not bound yet: the container has not started (the kubelet binds the file "
                 "at its start, to the version live then)";
      return;
    }
    if (err == ELOOP || err == ENOTDIR || err == EINVAL) {
      return Refuse(c, atomicwriter::OpenBeneathError(shown, err).message());
    }
    return Fail(c, base::ErrnoError("open", shown, err));
  }
  // Something is bound: is there a file of the volume to bring it to?
  const auto file = request.payload->find(rel_in_version);
  if (file == request.payload->end()) {
    const auto next = request.payload->lower_bound(rel_in_version + "/");
    if (next != request.payload->end() && next->first.starts_with(rel_in_version + "/")) {
      return Refuse(c,
                    "names a directory of the volume: a bound directory cannot be updated in "
                    "place (removing its old version empties it)");
    }
    return Refuse(c,
                  "no longer in the volume (its key was removed): the bound file keeps the "
                  "bytes it had");
  }
  const std::string& data = file->second.data;

  struct stat st {};
  if (env.Fstat(bound.get(), &st) != 0) return Fail(c, base::ErrnoError("stat", shown, errno));
  if (S_ISLNK(st.st_mode)) {
    return Refuse(c, shown + ": a symlink, not the kubelet's bind; not followed");
  }
  if (S_ISDIR(st.st_mode)) {
    return Refuse(c, shown + ": a directory is bound there, where the kubelet binds the file \"" +
                         m.sub_path + "\"; a directory cannot be updated in place");
  }
  if (!S_ISREG(st.st_mode)) return Refuse(c, shown + ": not a regular file");

  // A mount point: another mount than the dir holding it.
  const size_t slash = rel.rfind('/');
  const UniqueFd parent(
      atomicwriter::OpenBeneath(env, v.root.get(), rel.substr(0, slash), O_PATH | O_DIRECTORY));
  if (!parent.valid()) return Fail(c, base::ErrnoError("open the dir of", shown, errno));
  uint64_t bound_mount = 0;
  uint64_t parent_mount = 0;
  if (env.MountId(bound.get(), &bound_mount) != 0 ||
      env.MountId(parent.get(), &parent_mount) != 0) {
    return Fail(c, base::ErrnoError("read the mount of", shown, errno));
  }
  if (bound_mount == parent_mount) {
    return Refuse(c,
                  shown +
                      ": not a mount point, so not the kubelet's bind as this process sees "
                      "it (an empty placeholder: the daemon's pods dir needs "
                      "mountPropagation HostToContainer to see the kubelet's binds)",
                  /*binds_invisible=*/true);
  }
  atomicwriter::MountInfo info;
  if (!env.FindMount(bound_mount, &info)) {
    return Fail(c, atomicwriter::MountLookupError(shown, errno));
  }
  // The bind's root: "<volume dir in its filesystem>/<version>/<file>", "//deleted" once the
  // version dir is gone; on the volume's filesystem.
  std::string root = info.root;
  if (root.ends_with(kDeletedSuffix)) root.resize(root.size() - kDeletedSuffix.size());
  const std::string not_ours = shown + ": bound to " + info.root + " (device " + info.device +
                               "), not to the file \"" + m.sub_path + "\" of this volume";
  if (info.device != v.device || !root.starts_with(v.prefix)) return Refuse(c, not_ours);
  const std::string_view rest = std::string_view(root).substr(v.prefix.size());
  const size_t end_of_version = rest.find('/');
  if (end_of_version == std::string_view::npos || !IsVersionName(rest.substr(0, end_of_version)) ||
      rest.substr(end_of_version + 1) != rel_in_version) {
    return Refuse(c, not_ours);
  }
  c.bound_version = std::string(rest.substr(0, end_of_version));

  // Reopened for writing through the checked descriptor (the magic link names exactly its
  // inode), and checked again to be that inode.
  const UniqueFd rw(env.OpenAt(AT_FDCWD, atomicwriter::FdPath(bound.get()), O_RDWR | O_NOCTTY, 0));
  if (!rw.valid()) return Fail(c, base::ErrnoError("open for writing", shown, errno));
  struct stat rw_st {};
  if (env.Fstat(rw.get(), &rw_st) != 0) return Fail(c, base::ErrnoError("stat", shown, errno));
  if (rw_st.st_dev != st.st_dev || rw_st.st_ino != st.st_ino || !S_ISREG(rw_st.st_mode)) {
    return Refuse(c, shown + ": changed while it was checked");
  }
  if (request.pause_for_testing) request.pause_for_testing(SubPathStage::kOpened);
  // One writer per node: the copy is a write like any other, made only while the node's lock is
  // held (the gate of the operation running it), asked right before the decision to write.
  if (const WriteGate* gate = WriteGate::Current(); gate != nullptr && !gate->Open()) {
    return Refuse(c, shown + ": not written: this process no longer holds the node's lock (" +
                         gate->writer() + ")");
  }

  // Decided on the descriptor that is written, with `..data` read after it was opened: a file of
  // the version `..data` names now is published content (the container started after the last
  // swap, or the kubelet re-bound it meanwhile), current and never written in place. A file of any
  // other version may be written: a version once unpublished is never published again, so the
  // answer cannot go stale before the write.
  std::string live_now;
  if (env.ReadlinkAt(v.dir.get(), atomicwriter::kDataDirName, &live_now) != 0) {
    return Fail(c, base::ErrnoError("readlink", request.location.dir() + "/..data", errno));
  }
  if (!atomicwriter::IsTimestampDirName(live_now)) {
    return Fail(c, base::Status::Error(request.location.dir() +
                                       "/..data: does not point to a version dir"));
  }
  const UniqueFd live(atomicwriter::OpenBeneath(env, v.dir.get(), live_now + "/" + rel_in_version,
                                                O_PATH | O_NOFOLLOW));
  struct stat live_st {};
  if (live.valid() && env.Fstat(live.get(), &live_st) == 0 && live_st.st_dev == rw_st.st_dev &&
      live_st.st_ino == rw_st.st_ino) {
    c.result = SubPathResult::kCurrent;
    c.version = live_now;
    return;
  }
  if (atomicwriter::FileHolds(env, rw.get(), data, rw_st.st_size)) {
    c.result = SubPathResult::kCurrent;
    c.version = request.version;
    return;
  }
  if (base::Status s = WriteInPlace(env, rw.get(), data, shown); !s.ok()) return Fail(c, s);
  c.result = SubPathResult::kUpdated;
  c.version = request.version;
}

}  // namespace

const char* SubPathResultName(SubPathResult result) {
  switch (result) {
    case SubPathResult::kUpdated:
      return "updated";
    case SubPathResult::kCurrent:
      return "current";
    case SubPathResult::kNotBound:
      return "not_bound";
    case SubPathResult::kRefused:
      return "refused";
    case SubPathResult::kFailed:
      return "failed";
  }
  return "failed";
}

std::string SubPathBindRel(const std::string& pod_uid, const std::string& volume,
                           const std::string& container, size_t index) {
  return "pods/" + pod_uid + "/volume-subpaths/" + volume + "/" + container + "/" +
         std::to_string(index);
}

SubPathPlan PlanSubPathUpdates(const kube::Pod& pod, const std::string& volume) {
  SubPathPlan plan;
  const auto it = pod.metadata.annotations.find(kUpdateSubPathsAnnotation);
  if (it == pod.metadata.annotations.end() || it->second == "false") return plan;
  // Only the four kinds the daemon writes (read-only in every container: the kubelet mounts
  // them so), never another volume a container could write.
  const auto vol = std::find_if(pod.spec.volumes.begin(), pod.spec.volumes.end(),
                                [&](const kube::Volume& v) { return v.name == volume; });
  if (vol == pod.spec.volumes.end() ||
      std::holds_alternative<kube::UnsupportedVolumeSource>(vol->source)) {
    return plan;
  }
  if (it->second != "true") {
    plan.annotation_error = "pod " + pod.metadata.NamespacedName() + ": annotation " +
                            kUpdateSubPathsAnnotation + ": \"" + it->second +
                            "\" is neither \"true\" nor \"false\"; no subPath mount is updated";
    return plan;
  }
  for (const auto* containers : {&pod.spec.init_containers, &pod.spec.containers}) {
    for (const kube::Container& container : *containers) {
      for (size_t i = 0; i < container.volume_mounts.size(); ++i) {
        const kube::VolumeMount& mount = container.volume_mounts[i];
        if (mount.name != volume || (mount.sub_path.empty() && mount.sub_path_expr.empty())) {
          continue;
        }
        SubPathMount m;
        m.container = container.name;
        m.index = i;
        m.sub_path = mount.sub_path.empty() ? mount.sub_path_expr : mount.sub_path;
        if (base::Status s = CheckPathComponent(container.name, "container name"); !s.ok()) {
          m.refusal = s.message();
        } else if (!mount.sub_path_expr.empty()) {
          m.refusal =
              "subPathExpr is not updated: it expands the container's environment, which the "
              "daemon does not know";
        } else if (std::string why = SubPathRefusal(mount.sub_path); !why.empty()) {
          m.refusal = "subPath \"" + mount.sub_path + "\" " + why;
        }
        plan.mounts.push_back(std::move(m));
      }
    }
  }
  return plan;
}

std::vector<SubPathCopy> UpdateSubPaths(Env& env, const SubPathUpdateRequest& request) {
  std::vector<SubPathCopy> copies;
  copies.reserve(request.mounts.size());
  for (const SubPathMount& m : request.mounts) {
    SubPathCopy& c = copies.emplace_back();
    c.container = m.container;
    c.index = m.index;
    c.sub_path = m.sub_path;
    if (!m.refusal.empty()) Refuse(c, m.refusal);
  }
  bool any = false;
  for (const SubPathCopy& c : copies) any = any || c.reason.empty();
  if (!any) return copies;
  base::Result<VolumeView> view = ViewVolume(env, request.location);
  for (size_t i = 0; i < copies.size(); ++i) {
    SubPathCopy& c = copies[i];
    if (!c.reason.empty()) continue;  // refused by the plan
    if (!view.ok()) {
      Fail(c, view.status());
    } else if (request.payload == nullptr) {
      Fail(c, base::Status::Error("no payload"));
    } else {
      UpdateOne(env, request, *view, request.mounts[i], c);
    }
  }
  return copies;
}

}  // namespace volumemanager
