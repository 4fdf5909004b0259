// SubPathReporter: what became of a pod's subPath mounts of a volume after a write of the volume
// (subpath_update.h's copies): counted by result, logged, and each refusal or failure reported
// (FailedSubPathUpdate: e.g. an Event through the reconciler's on_subpath_failure), as is an
// annotation value that is neither "true" nor "false". A copy not bound yet (its container has not
// started) is no failure. Never file content.
//
// Loop-thread only (the reconciler's).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_SUBPATH_REPORT_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_SUBPATH_REPORT_H_

#include <functional>
#include <string>
#include <vector>

#include "logging/structured_log.h"
#include "volumemanager/disk/subpath_update.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

// subPath copies after writes, by result: the file was written, already held the published bytes
// (or is the live file), was not bound yet (its container has not started: no failure), was
// refused (not the kubelet's bind of that file, a key removed, subPathExpr...) or a system call
// failed.
struct SubPathCopyStats {
  long updated = 0;
  long current = 0;
  long not_bound = 0;
  long refused = 0;
  long failed = 0;
};

class SubPathReporter {
 public:
  // After a write of `key`'s volume (`plan` as the write started, `copies` as it left them);
  // `pod` names the pod in log lines; `on_failure` gets each refusal or failure as a sentence
  // (container, index, subPath, reason) and a bad annotation's error.
  void Report(const logging::Value& pod, const VolumeKey& key, const SubPathPlan& plan,
              const std::vector<SubPathCopy>& copies,
              const std::function<void(const std::string& error)>& on_failure);
  const SubPathCopyStats& stats() const { return stats_; }

 private:
  SubPathCopyStats stats_;
  // A subPath placeholder that is no mount point was warned about (once per run; then debug).
  bool warned_binds_invisible_ = false;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_SUBPATH_REPORT_H_
