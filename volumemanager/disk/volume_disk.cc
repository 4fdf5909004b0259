#include "volumemanager/disk/volume_disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
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
  explicit LiveFiles(VolumeLocation location) : location_(std::move(location)) {}

  base::Result<std::string> Read(const std::string& path) override {
    const std::string full = location_.dir() + "/" + atomicwriter::kDataDirName + "/" + path;
    if (!vol_.valid()) {
      auto vol = OpenVolumeDir(location_);
      if (!vol.ok()) return vol.status();
      vol_ = std::move(vol).value();
    }
    char target[256];
    const ssize_t len =
        ::readlinkat(vol_.get(), atomicwriter::kDataDirName, target, sizeof(target));
    if (len < 0) return base::ErrnoError("readlink", location_.dir() + "/..data", errno);
    const std::string version(target, static_cast<size_t>(len));
    if (!version.starts_with("..") || version.find('/') != std::string::npos || version == "..") {
      return base::Status::Error(location_.dir() + "/..data: points at " + version +
                                 ", not a version dir of the volume");
    }
    const int fd = atomicwriter::OpenBeneath(
        vol_.get(), version + "/" + atomicwriter::CleanPath(path), O_RDONLY);
    if (fd < 0) return atomicwriter::OpenBeneathError(base::ShowNul(full), errno);
    std::string out;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        return base::ErrnoError("read", full, err);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

 private:
  VolumeLocation location_;
  base::UniqueFd vol_;
};

// The daemon's VolumeDisk: volume_setup.h.
class RealDisk final : public VolumeDisk {
 public:
  base::Result<bool> KubeletHasSetUp(const VolumeLocation& location) override {
    return volumemanager::KubeletHasSetUp(location);
  }
  base::Result<atomicwriter::WriteResult> SetUp(const SetUpRequest& request) override {
    return SetUpVolume(request);
  }
  base::Result<TearDownOutcome> TearDown(const VolumeLocation& location,
                                         OwnershipJournal* journal) override {
    return TearDownVolume(location, *journal);
  }
  base::Result<std::optional<std::string>> DataLinkTarget(const VolumeLocation& location) override {
    auto vol = OpenVolumeDir(location);
    if (!vol.ok()) {
      // Gone (torn down by the kubelet): not set up. A link or file on its path: an error.
      if (vol.status().sys_errno() == ENOENT) return std::optional<std::string>();
      return vol.status();
    }
    char buf[PATH_MAX];
    const ssize_t n = ::readlinkat(vol->get(), atomicwriter::kDataDirName, buf, sizeof(buf));
    if (n < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
      return base::ErrnoError("readlink", location.dir() + "/" + atomicwriter::kDataDirName, errno);
    }
    return std::optional<std::string>(std::string(buf, static_cast<size_t>(n)));
  }
  std::unique_ptr<plugins::LiveContent> LiveVersion(const VolumeLocation& location) override {
    return std::make_unique<LiveFiles>(location);
  }
  std::vector<SubPathCopy> UpdateSubPaths(const SubPathUpdateRequest& request) override {
    return volumemanager::UpdateSubPaths(request);
  }
};

}  // namespace

std::shared_ptr<VolumeDisk> RealVolumeDisk() { return std::make_shared<RealDisk>(); }

}  // namespace volumemanager
