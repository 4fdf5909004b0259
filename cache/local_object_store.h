// LocalObjectStore: the ObjectManager of standalone mode. ConfigMaps and Secrets come from the
// manifest files of one directory (--object-manifest-path) instead of an API server.
//
// Files: every regular file directly in the directory (no recursion) whose name ends in .yaml,
// .yml or .json and does not start with '.'. A file may hold several documents and lists
// (kube/manifest_decoder.h: the API server's defaulting and validation apply). Rules:
//   * an object defined twice is served from the first definition in file-name order (then
//     document order); the others are logged once;
//   * a file that cannot be read, or fails to decode or validate, is logged (file, document,
//     object, field; never a value) and its objects stay as last read (none if it never read
//     well); other files are unaffected. A file that becomes empty (0 bytes) is treated the same
//     way, because an in-place rewrite truncates before it writes; delete the file instead;
//   * a deleted file's objects are gone; a missing directory holds no objects;
//   * Pods in the directory are ignored (they belong in --pod-manifest-path).
//
// Strategies (--config-map-and-secret-change-detection-strategy):
//   * Watch (manifestdir/manifest_dir_watcher.h): libuv fs events on the directory; events are
//     coalesced (a read happens 2 ms after the last event of a burst, at most 10 ms after its
//     first) and every file an event names is read again (an event on a "..name" entry, as when the
//     directory is itself a projected volume whose "..data" link was swapped, makes every file's
//     stat be compared); a relist (stat of every file, default every 20 s) catches anything missed
//     and re-arms the watch. Each change calls the change handler at once for every referenced
//     object it created, changed or deleted. Gets are served from memory.
//   * Cache: a get reads the object's file again when the last read is older than the TTL
//     (--object-cache-ttl), or when the object was newly referenced by a pod since (the
//     kubelet's invalidation on new references).
//   * Get: every get reads the object's file again (and any file whose stat changed).
//   Get and Cache do not watch and never call the change handler: as with the kubelet, changes
//   reach volumes at the next periodic pod resync.
// A changed file is recognised by its bytes: a rewrite with identical bytes changes nothing.
//
// Thread model: a loop-thread object; files are read on the loop thread (a few small reads per
// change). Start, Stop, every ObjectManager method and the change handler run on the loop thread.
#ifndef VOLUMEMANAGER_CACHE_LOCAL_OBJECT_STORE_H_
#define VOLUMEMANAGER_CACHE_LOCAL_OBJECT_STORE_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "cache/change_detection_strategy.h"
#include "cache/object_manager.h"
#include "manifestdir/manifest_dir.h"
#include "manifestdir/manifest_dir_watcher.h"

namespace cache {

struct LocalObjectStoreOptions {
  std::string dir;  // --object-manifest-path
  ChangeDetectionStrategy strategy = ChangeDetectionStrategy::kWatch;
  std::chrono::milliseconds cache_ttl{60'000};        // Cache: --object-cache-ttl
  std::chrono::milliseconds relist_interval{20'000};  // Watch
  std::chrono::milliseconds debounce{2};              // Watch: quiet time that ends a burst
  std::chrono::milliseconds max_debounce{10};         // Watch: longest wait from a burst's start
  // Time source for the Cache TTL; steady_clock::now when empty (tests inject their own).
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class LocalObjectStore : public ObjectManager {
 public:
  LocalObjectStore();
  ~LocalObjectStore() override;
  LocalObjectStore(const LocalObjectStore&) = delete;
  LocalObjectStore& operator=(const LocalObjectStore&) = delete;

  // Reads the directory once (objects are served when Start returns), then, for Watch, watches
  // it. Fails only on an empty directory name or a second Start.
  base::Status Start(uv_loop_t* loop, LocalObjectStoreOptions options);
  // Stops watching; no change handler call happens after it returns. Idempotent. Gets still
  // work. The loop must run on for the libuv handles to close.
  void Stop();

  void RegisterPod(const std::string& pod_uid, const std::vector<kube::ObjectRef>& refs) override;
  void UnregisterPod(const std::string& pod_uid) override;
  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override;
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override;
  void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) override;

  // Observability and tests: the number of objects served, and of full file reads so far.
  size_t ObjectCount() const { return view_.size(); }
  // Pods registered and objects they reference (bounded memory, tests).
  size_t RegisteredPodCount() const { return pods_.size(); }
  size_t ReferencedObjectCount() const { return references_.size() + invalidated_.size(); }
  uint64_t FileReads() const { return dir_.reads(); }

 private:
  using Clock = std::chrono::steady_clock;
  using Object =
      std::variant<std::shared_ptr<const kube::ConfigMap>, std::shared_ptr<const kube::Secret>>;

  struct ManifestFile {
    std::vector<std::pair<kube::ObjectRef, Object>> objects;  // as last decoded well
    Clock::time_point read_at;
    bool read = false;  // read well at least once
  };
  struct Served {
    Object object;
    std::string file;
  };
  Clock::time_point Now() const;
  // Reads files again as `scope` says (`force`: file names to read whatever their stamp), then,
  // if any file's objects changed, updates the served objects and, when `notify`, calls the
  // change handler for referenced objects that changed.
  void Rescan(kube::ManifestScanScope scope, const std::set<std::string>& force, bool notify);
  // Takes in one file's new read; true when its objects were replaced.
  bool TakeRead(const kube::ManifestFileRead& read, ManifestFile* file);
  void RebuildView(bool notify);
  // Cache / Get: brings `ref` up to date before a get.
  void Refresh(const kube::ObjectRef& ref);
  base::Result<const Object*> Lookup(const kube::ObjectRef& ref);

  LocalObjectStoreOptions options_;
  bool started_ = false;
  kube::ManifestDir dir_{{}};
  kube::ManifestDirWatcher watcher_;  // Watch only
  std::function<void(const kube::ObjectRef&)> on_change_;
  std::map<std::string, ManifestFile> files_;  // by file name: name order is precedence order
  std::map<kube::ObjectRef, Served> view_;
  std::set<std::pair<kube::ObjectRef, std::string>> logged_duplicates_;
  std::map<kube::ObjectRef, int> references_;
  std::map<std::string, std::vector<kube::ObjectRef>> pods_;  // pod UID -> its references
  std::set<kube::ObjectRef> invalidated_;                     // Cache: newly referenced
  Clock::time_point last_scan_{};
  std::string dir_error_;  // why the last listing failed; empty when it worked
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_LOCAL_OBJECT_STORE_H_
