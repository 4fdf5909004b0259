// Test support for the volume manager's tests: a pod whose container mounts one configMap volume
// named "cfg", and optionally an emptyDir the daemon ignores; the options of a manager on a
// temporary root dir with its own ownership journal.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_TEST_PODS_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_TEST_PODS_H_

#include <chrono>
#include <memory>
#include <string>

#include "kube/pod.h"
#include "tests/support/test_loop.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/volume_manager.h"

namespace volumemanager {

struct TestPodOptions {
  bool optional = false;      // the configMap source's `optional`
  bool mounted = true;        // whether the container mounts "cfg"
  bool with_scratch = false;  // add an emptyDir "scratch", mounted at /tmp
};

inline kube::Pod PodReadingConfigMap(const std::string& uid, const std::string& config_map,
                                     TestPodOptions o = {}) {
  kube::Pod pod;
  pod.metadata.name = "web-" + uid;
  pod.metadata.namespace_ = "default";
  pod.metadata.uid = uid;
  kube::Volume v;
  v.name = "cfg";
  kube::ConfigMapVolumeSource src;
  src.name = config_map;
  src.default_mode = 0644;
  src.optional = o.optional;
  v.source = src;
  pod.spec.volumes.push_back(v);
  kube::Container c;
  c.name = "app";
  if (o.mounted) c.volume_mounts.push_back(kube::VolumeMount{"cfg", "/etc/cfg", "", true, ""});
  if (o.with_scratch) {
    kube::Volume scratch;
    scratch.name = "scratch";  // an emptyDir: not the daemon's
    pod.spec.volumes.push_back(scratch);
    c.volume_mounts.push_back(kube::VolumeMount{"scratch", "/tmp", "", false, ""});
  }
  pod.spec.containers.push_back(c);
  return pod;
}

// A root dir and a state dir of their own, the journal in it, and manager options using both
// (no tmpfs, a resync too rare to matter).
class TestManagerDirs {
 public:
  TestManagerDirs() {
    auto j = OwnershipJournal::Open(state_.path());
    if (j.ok()) journal_ = std::move(j->journal);
  }
  bool ok() const { return journal_ != nullptr; }
  VolumeManagerOptions Options() const {
    VolumeManagerOptions o;
    o.root_dir = root_.path();
    o.journal = journal_.get();
    o.sync_frequency = std::chrono::hours(1);
    o.tmpfs = false;
    return o;
  }
  const std::string& root() const { return root_.path(); }

 private:
  vmtest::TempDir root_;
  vmtest::TempDir state_;
  std::unique_ptr<OwnershipJournal> journal_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_TEST_PODS_H_
