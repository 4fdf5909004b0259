#include "volumemanager/disk/volume_disk.h"

#include <fcntl.h>

#include <cerrno>
#include <utility>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/path_validation.h"
#include "base/errno_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace volumemanager {
namespace {

// The files of a volume's live version, read through its ..data link (pool thread): the volume
// dir opened beneath the root dir, `..data` read as a link that must name a version dir in it,
// and the file opened beneath that version dir; no other link is followed.
class LiveFiles final : public plugins::LiveContent {
 public:
  LiveFiles(atomicwriter::Env& env, VolumeLocation location)
      : env_(env), location_(std::move(location)) {}

  base::Result<std::string> Read(const std::string& path) override {
    const std::string full = location_.dir() + "/" + atomicwriter::kDataDirName + "/" + path;
    if (!vol_.valid()) {
      auto vol = OpenVolumeDir(env_, location_);
      if (!vol.ok()) return vol.status();
      vol_ = std::move(vol).value();
    }
    std::string version;
    if (env_.ReadlinkAt(vol_.get(), atomicwriter::kDataDirName, &version) != 0) {
      return base::ErrnoError("readlink", location_.dir() + "/..data", errno);
    }
    if (!version.starts_with("..") || version.find('/') != std::string::npos || version == "..") {
      return base::Status::Error(location_.dir() + "/..data: points at " + base::ShowNul(version) +
                                 ", not a version dir of the volume");
    }
    const base::UniqueFd fd(atomicwriter::OpenBeneath(
        env_, vol_.get(), version + "/" + atomicwriter::CleanPath(path), O_RDONLY));
    if (!fd.valid()) return atomicwriter::OpenBeneathError(base::ShowNul(full), errno);
    std::string out;
    char buf[8192];
    for (;;) {
      const ssize_t n = env_.Read(fd.get(), buf, sizeof(buf));
      if (n < 0) return base::ErrnoError("read", full, errno);
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  atomicwriter::Env& env_;
  VolumeLocation location_;
  base::UniqueFd vol_;
};

// The daemon's VolumeDisk: volume_setup.h.
class RealDisk final : public VolumeDisk {
 public:
  explicit RealDisk(atomicwriter::Env& env) : env_(env) {}

  base::Result<bool> KubeletHasSetUp(const VolumeLocation& location) override {
    return volumemanager::KubeletHasSetUp(env_, location);
  }
  base::Result<atomicwriter::WriteResult> SetUp(const SetUpRequest& request) override {
    return SetUpVolume(env_, request, &roots_);
  }
  base::Result<TearDownOutcome> TearDown(const VolumeLocation& location,
                                         OwnershipJournal* journal) override {
    return TearDownVolume(env_, location, *journal);
  }
  base::Result<std::optional<std::string>> DataLinkTarget(const VolumeLocation& location) override {
    auto vol = OpenVolumeDir(env_, location);
    if (!vol.ok()) {
      // Gone (torn down by the kubelet): not set up. A link or file on its path: an error.
      if (vol.status().sys_errno() == ENOENT) return std::optional<std::string>();
      return vol.status();
    }
    std::string target;
    if (env_.ReadlinkAt(vol->get(), atomicwriter::kDataDirName, &target) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
      return base::ErrnoError("readlink", location.dir() + "/" + atomicwriter::kDataDirName, errno);
    }
    return std::optional<std::string>(std::move(target));
  }
  std::unique_ptr<plugins::LiveContent> LiveVersion(const VolumeLocation& location) override {
    return std::make_unique<LiveFiles>(env_, location);
  }
  std::vector<SubPathCopy> UpdateSubPaths(const SubPathUpdateRequest& request) override {
    return volumemanager::UpdateSubPaths(env_, request);
  }

 private:
  atomicwriter::Env& env_;
  RootDirCache roots_;  // the root dir's descriptor, kept across set-ups
};

}  // namespace

std::shared_ptr<VolumeDisk> RealVolumeDisk(atomicwriter::Env* env) {
  return std::make_shared<RealDisk>(env != nullptr ? *env : *atomicwriter::PosixEnv());
}

}  // namespace volumemanager
