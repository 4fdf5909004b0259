// ObservingDisk: the reconciler's filesystem side in observe mode (--observe): reads only. A
// set-up compares the payload with the volume's live version and records what a normal run
// would change; a teardown records that it would remove the volume. Nothing is created, written,
// mounted, renamed or removed, and the ownership journal is only read.
//
// The comparison walks the live version as the daemon's writes do: the volume dir opened beneath
// the root dir one component at a time following no link (OpenVolumeDir), `..data` read as a
// link that must name a version dir of the volume, and every entry below it looked at with
// AT_SYMLINK_NOFOLLOW (a link inside the version counts as a changed file, never followed).
// Paths are named (added, removed, changed; modes and owners apart), never bytes.
//
// A write would publish exactly when bytes differ, a payload path is missing or the live version
// holds a path the payload does not (the atomic writer compares neither modes nor owners: a
// volume whose only difference is a mode is reported as differing in modes, and a normal run
// leaves it as it is).
//
// Thread safety: the VolumeDisk calls run on pool threads; Observations() and the counts from any
// thread.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_DISK_OBSERVING_DISK_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_DISK_OBSERVING_DISK_H_

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "volumemanager/disk/volume_disk.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

// What a normal run would do with one volume, as last observed.
struct VolumeObservation {
  // Why it differs: "" (current: a normal run writes nothing), "not_set_up" (the volume dir or
  // its ..data is missing: a normal run creates it, or beside the kubelet fails it), "content"
  // (a normal run publishes a new version), "modes" (only modes or owners differ: a normal run
  // leaves them) or "tear_down" (a normal run removes the volume).
  std::string reason;
  std::vector<std::string> added;    // in the payload, not in the live version
  std::vector<std::string> removed;  // in the live version, not in the payload
  std::vector<std::string> changed;  // other bytes, or not a regular file
  std::vector<std::string> modes;    // same bytes, other mode or owner ("path: 0644 -> 0600")
  std::string live_version;          // what ..data points at ("" when none)
  std::string pod;                   // namespace/name
  std::chrono::system_clock::time_point at{};

  bool differs() const { return !reason.empty(); }
  // A normal run would write (create, publish or remove) this volume.
  bool would_write() const { return !reason.empty() && reason != "modes"; }
  bool operator==(const VolumeObservation& o) const {
    return reason == o.reason && added == o.added && removed == o.removed && changed == o.changed &&
           modes == o.modes;
  }
};

// Compares `payload` (paths as the volume spec names them) with the live version of the volume
// at `location`. Blocking; read only. An error when the volume's path cannot be walked safely
// (a link or a file where a directory should be), as a write would fail.
base::Result<VolumeObservation> ObserveVolume(atomicwriter::Env& env,
                                              const VolumeLocation& location,
                                              const atomicwriter::Payload& payload);

class ObservingDisk final : public VolumeDisk {
 public:
  // Every system call through `env` (null: atomicwriter::PosixEnv()), which must outlive it; the
  // read-only calls (KubeletHasSetUp, DataLinkTarget, LiveVersion) go to RealVolumeDisk(env).
  explicit ObservingDisk(atomicwriter::Env* env = nullptr);

  base::Result<bool> KubeletHasSetUp(const VolumeLocation& location) override;
  // Compares and records; returns published=false with the live version as ts_dir.
  base::Result<atomicwriter::WriteResult> SetUp(const SetUpRequest& request) override;
  // A volume the journal lists and that is on disk: recorded as "tear_down", kRemoved (the
  // reconciler forgets it). Anything else: the observation dropped, kNotOwned.
  base::Result<TearDownOutcome> TearDown(const VolumeLocation& location,
                                         OwnershipJournal* journal) override;
  base::Result<std::optional<std::string>> DataLinkTarget(const VolumeLocation& location) override;
  std::unique_ptr<plugins::LiveContent> LiveVersion(const VolumeLocation& location) override;
  // No copy: the bound files stay as they are.
  std::vector<SubPathCopy> UpdateSubPaths(const SubPathUpdateRequest& request) override;

  // The last observation of each volume looked at.
  std::map<VolumeKey, VolumeObservation> Observations() const;

 private:
  // Keeps `o` as `key`'s observation and logs it at info when it differs from the last one.
  void Record(const VolumeKey& key, VolumeObservation o);

  atomicwriter::Env& env_;
  std::shared_ptr<VolumeDisk> real_;
  mutable std::mutex mu_;
  std::map<VolumeKey, VolumeObservation> observations_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_DISK_OBSERVING_DISK_H_
