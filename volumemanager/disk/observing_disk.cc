#include "volumemanager/disk/observing_disk.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <utility>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/path_validation.h"
#include "base/errno_error.h"
#include "base/unique_fd.h"
#include "logging/structured_log.h"

namespace volumemanager {
namespace {

std::string Octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Walks the version dir `dirfd` (below `prefix`), comparing each entry with `expected` (cleaned
// path -> file); what it matched is erased from `expected`. No link is followed.
base::Status Walk(atomicwriter::Env& env, int dirfd, const std::string& prefix,
                  const std::string& shown,
                  std::map<std::string, const atomicwriter::FileProjection*>& expected,
                  VolumeObservation& out) {
  std::vector<atomicwriter::DirEntry> entries;
  if (env.ReadDir(dirfd, &entries) != 0) return base::ErrnoError("list", shown, errno);
  std::vector<std::string> names;
  names.reserve(entries.size());
  for (atomicwriter::DirEntry& e : entries) names.push_back(std::move(e.name));
  for (const std::string& name : names) {
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    struct stat st {};
    if (env.FstatAt(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile (another writer)
      return base::ErrnoError("stat", shown + "/" + name, errno);
    }
    if (S_ISDIR(st.st_mode)) {
      base::UniqueFd sub(env.OpenAt(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
      if (!sub.valid()) return base::ErrnoError("open", shown + "/" + name, errno);
      base::Status s = Walk(env, sub.get(), rel, shown + "/" + name, expected, out);
      if (!s.ok()) return s;
      continue;
    }
    auto it = expected.find(rel);
    if (it == expected.end()) {
      out.removed.push_back(rel);
      continue;
    }
    const atomicwriter::FileProjection& want = *it->second;
    expected.erase(it);
    if (!S_ISREG(st.st_mode)) {
      out.changed.push_back(rel);  // a link or a special file where the payload has a file
      continue;
    }
    base::UniqueFd file(env.OpenAt(dirfd, name, O_RDONLY | O_NOFOLLOW, 0));
    if (!file.valid()) return base::ErrnoError("open", shown + "/" + name, errno);
    if (!atomicwriter::FileHolds(env, file.get(), want.data, st.st_size)) {
      out.changed.push_back(rel);
      continue;
    }
    std::string what;
    if ((st.st_mode & 07777) != (want.mode & 07777)) {
      what = "mode " + Octal(st.st_mode) + " -> " + Octal(want.mode);
    }
    if (want.fs_user && st.st_uid != *want.fs_user) {
      what += std::string(what.empty() ? "" : ", ") + "owner " + std::to_string(st.st_uid) +
              " -> " + std::to_string(*want.fs_user);
    }
    if (!what.empty()) out.modes.push_back(rel + ": " + what);
  }
  return base::Status::OK();
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

base::Result<VolumeObservation> ObserveVolume(atomicwriter::Env& env,
                                              const VolumeLocation& location,
                                              const atomicwriter::Payload& payload) {
  VolumeObservation out;
  out.at = env.WallNow();
  std::map<std::string, const atomicwriter::FileProjection*> expected;
  for (const auto& [path, file] : payload) expected[atomicwriter::CleanPath(path)] = &file;
  auto added = [&] {
    for (const auto& [path, file] : expected) out.added.push_back(path);
  };
  auto vol = OpenVolumeDir(env, location);
  if (!vol.ok()) {
    if (vol.status().sys_errno() != ENOENT) return vol.status();
    out.reason = "not_set_up";
    added();
    return out;
  }
  std::string version;
  if (env.ReadlinkAt(vol->get(), atomicwriter::kDataDirName, &version) != 0) {
    if (errno != ENOENT && errno != EINVAL) {
      return base::ErrnoError("readlink", location.dir() + "/" + atomicwriter::kDataDirName, errno);
    }
    out.reason = "not_set_up";  // a dir without ..data (or ..data not a link): a write sets it up
    added();
    return out;
  }
  if (!version.starts_with("..") || version.find('/') != std::string::npos || version == "..") {
    return base::Status::Error(location.dir() + "/..data: points at " + version +
                               ", not a version dir of the volume");
  }
  out.live_version = version;
  base::UniqueFd live(atomicwriter::OpenBeneath(env, vol->get(), version, O_RDONLY | O_DIRECTORY));
  if (!live.valid()) {
    if (errno != ENOENT) {
      return atomicwriter::OpenBeneathError(location.dir() + "/" + version, errno);
    }
    out.reason = "not_set_up";  // ..data dangles: a write publishes a version
    added();
    return out;
  }
  base::Status s = Walk(env, live.get(), "", location.dir() + "/" + version, expected, out);
  if (!s.ok()) return s;
  added();
  if (!out.added.empty() || !out.removed.empty() || !out.changed.empty()) {
    out.reason = "content";
  } else if (!out.modes.empty()) {
    out.reason = "modes";
  }
  return out;
}

ObservingDisk::ObservingDisk(atomicwriter::Env* env)
    : env_(env != nullptr ? *env : *atomicwriter::PosixEnv()), real_(RealVolumeDisk(&env_)) {}

base::Result<bool> ObservingDisk::KubeletHasSetUp(const VolumeLocation& location) {
  return real_->KubeletHasSetUp(location);
}

base::Result<atomicwriter::WriteResult> ObservingDisk::SetUp(const SetUpRequest& request) {
  base::Result<VolumeObservation> o = ObserveVolume(env_, request.location, request.payload);
  if (!o.ok()) return o.status();
  atomicwriter::WriteResult result;
  result.published = false;
  result.ts_dir = o->live_version;
  o->pod = request.pod;
  Record(VolumeKey{request.location.pod_uid, request.location.volume_name}, std::move(o).value());
  return result;
}

base::Result<TearDownOutcome> ObservingDisk::TearDown(const VolumeLocation& location,
                                                      OwnershipJournal* journal) {
  const VolumeKey key{location.pod_uid, location.volume_name};
  bool on_disk = false;
  if (journal != nullptr && journal->Owns(OwnedKind::kVolume, location.rel())) {
    auto vol = OpenVolumeDir(env_, location);
    if (!vol.ok() && vol.status().sys_errno() != ENOENT) return vol.status();
    on_disk = vol.ok();
  }
  if (!on_disk) {
    // A normal run would leave it (not the daemon's) or find nothing to remove.
    std::lock_guard<std::mutex> lock(mu_);
    observations_.erase(key);
    return TearDownOutcome::kNotOwned;
  }
  VolumeObservation o;
  o.reason = "tear_down";
  o.at = env_.WallNow();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = observations_.find(key); it != observations_.end()) o.pod = it->second.pod;
  }
  if (auto target = real_->DataLinkTarget(location); target.ok() && *target) {
    o.live_version = **target;
  }
  Record(key, std::move(o));
  return TearDownOutcome::kRemoved;
}

base::Result<std::optional<std::string>> ObservingDisk::DataLinkTarget(
    const VolumeLocation& location) {
  return real_->DataLinkTarget(location);
}

std::unique_ptr<plugins::LiveContent> ObservingDisk::LiveVersion(const VolumeLocation& location) {
  return real_->LiveVersion(location);
}

std::vector<SubPathCopy> ObservingDisk::UpdateSubPaths(const SubPathUpdateRequest& request) {
  (void)request;
  return {};
}

std::map<VolumeKey, VolumeObservation> ObservingDisk::Observations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observations_;
}

void ObservingDisk::Record(const VolumeKey& key, VolumeObservation o) {
  std::optional<VolumeObservation> before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = observations_.find(key);
    if (it != observations_.end()) before = it->second;
    observations_[key] = o;
  }
  if (before && *before == o) return;  // said already
  const logging::Value pod = logging::Value::IfSet(o.pod);
  if (!o.differs()) {
    if (before && before->differs()) {
      logging::Info("Observe: volume now current", {{"pod", pod},
                                                    {"podUID", key.pod_uid.str()},
                                                    {"volume", key.volume_name},
                                                    {"version", o.live_version}});
    } else {
      logging::Debug("Observe: volume current", {{"pod", pod},
                                                 {"podUID", key.pod_uid.str()},
                                                 {"volume", key.volume_name},
                                                 {"version", o.live_version}});
    }
    return;
  }
  const char* msg = o.reason == "not_set_up" ? "Observe: would set up the volume"
                    : o.reason == "content"  ? "Observe: would update the volume"
                    : o.reason == "modes"
                        ? "Observe: modes or owners differ (a normal run leaves them: it writes "
                          "only for content)"
                        : "Observe: would tear down the volume";
  // Names only, never bytes (Secrets).
  logging::Info(msg, {{"pod", pod},
                      {"podUID", key.pod_uid.str()},
                      {"volume", key.volume_name},
                      {"reason", o.reason},
                      {"version", logging::Value::IfSet(o.live_version)},
                      {"added", logging::Value::IfSet(Join(o.added))},
                      {"removed", logging::Value::IfSet(Join(o.removed))},
                      {"changed", logging::Value::IfSet(Join(o.changed))},
                      {"modes", logging::Value::IfSet(Join(o.modes))}});
}

}  // namespace volumemanager
