#include "volumemanager/reconciler/subpath_report.h"

namespace volumemanager {

void SubPathReporter::Report(const logging::Value& pod, const VolumeKey& key,
                             const SubPathPlan& plan, const std::vector<SubPathCopy>& copies,
                             const std::function<void(const std::string& error)>& on_failure) {
  if (!plan.annotation_error.empty()) {
    logging::Warn("FailedSubPathUpdate: invalid annotation", {{"pod", pod},
                                                              {"podUID", key.pod_uid.str()},
                                                              {"volume", key.volume_name},
                                                              {"err", plan.annotation_error}});
    on_failure(plan.annotation_error);
  }
  for (const SubPathCopy& c : copies) {
    switch (c.result) {
      case SubPathResult::kUpdated:
        ++stats_.updated;
        logging::Info("subPath file updated in place", {{"pod", pod},
                                                        {"podUID", key.pod_uid.str()},
                                                        {"volume", key.volume_name},
                                                        {"container", c.container},
                                                        {"subPath", c.sub_path},
                                                        {"version", c.version}});
        continue;
      case SubPathResult::kCurrent:
        ++stats_.current;
        continue;
      case SubPathResult::kNotBound:
        // The container has not started: the kubelet binds the file at its start, to the
        // version live then. Nothing to report; the volume's next write looks again.
        ++stats_.not_bound;
        logging::Debug("subPath file not bound yet: its container has not started",
                       {{"pod", pod},
                        {"podUID", key.pod_uid.str()},
                        {"volume", key.volume_name},
                        {"container", c.container},
                        {"subPath", c.sub_path}});
        continue;
      case SubPathResult::kRefused:
        ++stats_.refused;
        break;
      case SubPathResult::kFailed:
        ++stats_.failed;
        break;
    }
    const std::string error = "subPath \"" + c.sub_path + "\" of container \"" + c.container +
                              "\" (volumeMounts[" + std::to_string(c.index) +
                              "]) not updated: " + c.reason;
    // A placeholder that is no mount point means a node set-up problem: warned once per run.
    const bool warn = !(c.binds_invisible && warned_binds_invisible_);
    if (c.binds_invisible) warned_binds_invisible_ = true;
    (warn ? &logging::Warn : &logging::Debug)("FailedSubPathUpdate",
                                              {{"pod", pod},
                                               {"podUID", key.pod_uid.str()},
                                               {"volume", key.volume_name},
                                               {"container", c.container},
                                               {"subPath", c.sub_path},
                                               {"result", SubPathResultName(c.result)},
                                               {"err", c.reason}});
    on_failure(error);
  }
}

}  // namespace volumemanager
