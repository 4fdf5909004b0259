// VolumeDisk: the filesystem side of the reconciler's operations, one interface, so that the
// reconciler's state machine runs against a fake in its tests and against an observing disk in
// observe mode; RealVolumeDisk() is the daemon's.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_DISK_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_DISK_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "base/status.h"
#include "plugins/volume_plugin.h"
#include "volumemanager/disk/subpath_update.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/journal/ownership_journal.h"

namespace volumemanager {

// The filesystem side of the reconciler's operations: blocking calls, made on a pool thread
// (concurrently for different volumes). Unit tests substitute a fake; observe mode an
// ObservingDisk (observing_disk.h).
class VolumeDisk {
 public:
  virtual ~VolumeDisk() = default;
  virtual base::Result<bool> KubeletHasSetUp(const VolumeLocation& location) = 0;
  virtual base::Result<atomicwriter::WriteResult> SetUp(const SetUpRequest& request) = 0;
  virtual base::Result<TearDownOutcome> TearDown(const VolumeLocation& location,
                                                 OwnershipJournal* journal) = 0;
  // What the volume's ..data link points at; nullopt when the volume dir or the link is gone.
  virtual base::Result<std::optional<std::string>> DataLinkTarget(
      const VolumeLocation& location) = 0;
  // The files of the volume's live version (kubelet ownership: pod-derived files carried over).
  virtual std::unique_ptr<plugins::LiveContent> LiveVersion(const VolumeLocation& location) = 0;
  // The pod's subPath files of the volume brought to the bytes it now publishes
  // (subpath_update.h), right after a successful write: one result per mount.
  virtual std::vector<SubPathCopy> UpdateSubPaths(const SubPathUpdateRequest& request) = 0;
};

// The daemon's: volume_setup.h's set-up and teardown, subpath_update.h's copies, the live
// version's files read through `..data` beneath the volume dir; every system call through `env`
// (null: atomicwriter::PosixEnv()), which must outlive it.
std::shared_ptr<VolumeDisk> RealVolumeDisk(atomicwriter::Env* env = nullptr);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_DISK_H_
