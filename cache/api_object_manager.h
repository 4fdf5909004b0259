// ApiObjectManager: the ObjectManager of cluster mode. ConfigMaps and Secrets come from the API
// server through kubeclient::ApiClient, with the kubelet's three change-detection strategies
// (docs/kubelet-behavior.md §5; --config-map-and-secret-change-detection-strategy):
//
//   * Get: every Fetch(kStrategy) GETs each object (no resourceVersion: a quorum read); gets
//     answer from the last fetch's result, an error when the object was never fetched.
//   * Cache: Fetch(kStrategy) GETs an object when its entry is older than the TTL
//     (--object-cache-ttl; 0 = always), holds no good object (never fetched, an error, or a cached
//     NotFound), or was invalidated because a pod newly references it (only new references
//     invalidate: the kubelet >= 1.29). A refresh of a previously good object reads the API
//     server's cache (resourceVersion=0), and a result older than the cached revision (by
//     resourceVersion) does not replace it.
//   * Watch (the default): one Reflector per referenced object, list+watch in its namespace with
//     fieldSelector=metadata.name=<name>, no periodic relist, watch timeouts in [30, 60) min,
//     reference-counted by pod UID and stopped when the last pod releases it. Each change (added,
//     updated, deleted) whose content digest differs calls the change handler at once.
//     Fetch(kStrategy) waits for a new object's initial list up to `sync_timeout` (1 s); until
//     that list arrived, gets fail with "failed to sync configmap cache: timed out waiting for the
//     condition" ("secret" for Secrets). Once an object is immutable its reflector is stopped and
//     the cached copy served; but when a pod newly references it, or on Fetch(kFresh), the object
//     is read again and a deleted and recreated one (another UID) replaces it and is watched
//     again (the kubelet's bug 131589 does not happen here). No idle recycling: only volumes
//     register references, and a mounted volume is in use for as long as its pod is registered.
//   * Fetch(kFresh), whatever the strategy: a quorum GET; a result newer than the cached revision
//     (by resourceVersion, or another UID) replaces it and calls the change handler when its
//     content differs.
//
// Whatever the strategy: concurrent fetches of one object share one request; an object that
// cannot be read (API unreachable, 5xx, 403, an undecodable body) keeps its last good revision
// served, and only gets of an object never read well fail (with the API's error, e.g. the 403's
// message): one object's failure never affects another. A 403 within a grace is read again
// first (the refusal grace and the reconnect grace, below). A 404 is an answer: the object does
// not exist (gets return nullptr). Objects are decoded (kube/object_decoder.h) and their
// ContentDigest computed on the libuv thread pool, once per revision; a revision is served once
// it is decoded, and inputs of one object are applied in the order they arrived. Values never
// reach a log: objects are named by kind, namespace and name.
//
// Thread model: a loop-thread object (every method, the change handler and `done` run on the loop
// thread; none of them may destroy the manager). Stop() cancels every request, reflector and wait,
// and runs every pending `done` (gets keep answering from what was cached); the destructor stops
// first, so no `done` runs after it. The loop must run on after Stop or destruction for handles and
// pool work to finish.
#ifndef VOLUMEMANAGER_CACHE_API_OBJECT_MANAGER_H_
#define VOLUMEMANAGER_CACHE_API_OBJECT_MANAGER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/change_detection_strategy.h"
#include "cache/object_manager.h"
#include "kubeclient/api_client.h"
#include "kubeclient/watch/reflector.h"

namespace cache {

// The kubelet's per-object reflector settings: watch timeouts in [30, 60) min, no periodic
// relist. Path, selector, kind and description are set per object.
kubeclient::ReflectorOptions PerObjectReflectorOptions();

struct ApiObjectManagerOptions {
  ChangeDetectionStrategy strategy = ChangeDetectionStrategy::kWatch;
  // Cache: how long a fetched object is served before a Fetch reads it again.
  std::chrono::milliseconds cache_ttl{60'000};
  // Watch: how long Fetch(kStrategy) waits for a new object's initial list.
  std::chrono::milliseconds sync_timeout{1000};
  // Watch: the per-object reflectors' settings (tests shorten the backoff).
  kubeclient::ReflectorOptions reflector = PerObjectReflectorOptions();
  // Time source for the Cache TTL; steady_clock::now when empty (tests inject their own).
  std::function<std::chrono::steady_clock::time_point()> clock;
  // An object whose data, binary data and annotations hold at most this many bytes is decoded
  // and digested on the loop thread, at once: for a small object that takes microseconds, less
  // than a round trip through the thread pool (its wake-ups alone cost 0.1-0.4 ms on a busy
  // node). A larger one is decoded on the pool, so that it never stalls the loop. 0: always on
  // the pool.
  size_t inline_decode_bytes = 16 * 1024;
};

class ApiObjectManager : public ObjectManager {
 public:
  // The refusal grace: a 403 on an object that a pod newly referenced less than
  // kRefusalGraceWindow ago may be the Node authorizer's graph not yet showing the pod's binding
  // (it follows pods through its own watch). Such a refusal of an object never read well is
  // retried, up to kRefusalRetries times (Get, Cache: after kRefusalRetryDelay, the fetch still
  // waiting; Watch: the reflector's next list), before it becomes the object's error.
  static constexpr std::chrono::milliseconds kRefusalGraceWindow{5000};
  static constexpr int kRefusalRetries = 2;
  static constexpr std::chrono::milliseconds kRefusalRetryDelay{250};
  // The reconnect grace: within the API client's reconnect grace (ServerReachability: 30 s after
  // the API server answered again following an outage, its Node authorizer may still be filling
  // its graph), a 403 of any object is read again after the client's grace_retry_delay (1 s)
  // for as long as the grace lasts (Get, Cache: the fetch still waiting; Watch: the reflector
  // relists within that delay), logged at debug level: no error, no FailedMount, nothing counted
  // in read_errors. After the grace, a 403 is handled as any other.

  struct Stats {
    uint64_t gets = 0;        // GETs sent for kStrategy fetches (Get, Cache)
    uint64_t fresh_gets = 0;  // quorum GETs for kFresh and immutable re-checks
    uint64_t reflectors_started = 0;
    uint64_t immutable_stops = 0;  // reflectors stopped because their object became immutable
    uint64_t decodes = 0;          // object revisions decoded on the pool
    uint64_t inline_decodes = 0;   // small ones decoded on the loop (inline_decode_bytes)
    // Reads (GETs, the reflectors' lists and watch set-ups) the API server answered with an
    // error, by (HTTP code, Status reason): 403 Forbidden, 500 InternalError, ... A 404 of a GET
    // is an answer (the object does not exist), not counted; nor are transport failures and the
    // refusals the refusal grace or the reconnect grace retried.
    std::map<std::pair<int, std::string>, uint64_t> read_errors;
    // 403s read again instead of failing: right after a pod newly referenced the object (the
    // refusal grace), and within the reconnect grace.
    uint64_t refusals_retried = 0;
    uint64_t refusals_retried_after_reconnect = 0;
    // 410s seen by reflectors already stopped (ReflectorsExpired() adds the running ones').
    uint64_t expired_of_stopped_reflectors = 0;
  };

  // `api` must outlive the manager; its loop is the manager's loop.
  ApiObjectManager(kubeclient::ApiClient* api, ApiObjectManagerOptions options);
  ~ApiObjectManager() override;
  ApiObjectManager(const ApiObjectManager&) = delete;
  ApiObjectManager& operator=(const ApiObjectManager&) = delete;

  // Cancels requests, reflectors and waits; runs every pending `done`. Later Fetches complete at
  // once; gets answer from the cache. Idempotent.
  void Stop();

  void RegisterPod(const std::string& pod_uid, const std::vector<kube::ObjectRef>& refs) override;
  void UnregisterPod(const std::string& pod_uid) override;
  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override;
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override;
  // The digest was computed when the revision was decoded: nothing is hashed here.
  base::Result<ObjectRevision> GetRevision(const kube::ObjectRef& ref) override;
  bool Unread(const kube::ObjectRef& ref) const override;
  void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) override;
  bool AnnouncesEveryChange() const override {
    return options_.strategy == ChangeDetectionStrategy::kWatch;
  }
  void Fetch(const std::vector<kube::ObjectRef>& refs, FetchMode mode,
             std::function<void()> done) override;

  // A new Cache TTL (dynamic config): applies to every cached object from now on.
  void SetCacheTtl(std::chrono::milliseconds ttl) { options_.cache_ttl = ttl; }

  // Observability and tests.
  const Stats& stats() const { return stats_; }
  size_t ReferencedObjectCount() const { return entries_.size(); }
  size_t RegisteredPodCount() const { return pods_.size(); }
  size_t RunningReflectors() const;
  // 410s (expired resourceVersions) the per-object reflectors have seen, stopped ones included.
  uint64_t ReflectorsExpired() const;

 private:
  using Clock = std::chrono::steady_clock;
  // Callbacks (`done`, the change handler) collected while state changes and run once it is
  // consistent, so that they may call back into the manager.
  using Deferred = std::vector<std::function<void()>>;
  struct Entry;
  struct Read;
  struct Input;
  struct Decoded;
  struct DecodeWork;
  // Where an input came from: a kStrategy GET (Get; Cache, with resourceVersion=0 once good), a
  // quorum GET (kFresh), the reflector.
  enum class Source { kRead, kCacheRead, kFresh, kWatch };

  // Pool thread (or the loop when the pool refuses work): uses only its arguments.
  static Decoded DecodeObject(const kube::ObjectRef& ref, const nlohmann::json& object);
  void RunDeferred(Deferred deferred);

  Clock::time_point Now() const;
  // The entry of `ref` when it is still the one with `id` (an entry dropped and re-created is
  // another), else null.
  Entry* Find(const kube::ObjectRef& ref, uint64_t id) const;
  Entry* Find(const kube::ObjectRef& ref) const;
  base::Result<ObjectRevision> Lookup(const kube::ObjectRef& ref) const;
  void AddReference(const kube::ObjectRef& ref);
  void Release(const kube::ObjectRef& ref, Deferred& out);
  // Cancels everything of `entry` and moves its waiters to `out`.
  void Quiesce(Entry& entry, Deferred& out);

  bool NeedsCacheRefresh(const Entry& entry) const;
  // Joins the entry's read of that kind in flight, or starts one.
  void JoinRead(Entry& entry, bool fresh, std::function<void()> waiter);
  // Sends the GET of the entry's read slot of that kind.
  void SendRead(Entry& entry, bool fresh);
  // A 403 now is retried (the refusal grace).
  bool InRefusalGrace(const Entry& entry) const;
  // A 403 now is retried (the reconnect grace).
  bool InReconnectGrace() const;
  // The refusal grace's timer: sends again the reads it held back.
  void RetryRefused(Entry& entry);
  // A failed read or a refused list: the object's error while nothing is served; logged once per
  // failure.
  void ApplyError(Entry& entry, const Input& input, Deferred& out);
  void OnRead(const kube::ObjectRef& ref, uint64_t id, bool fresh, kubeclient::ApiResult result);
  void FinishRead(Entry& entry, bool fresh, Deferred& out);

  // Inputs of one entry, applied in arrival order (objects after their decode on the pool).
  void Enqueue(Entry& entry, Input input, Deferred& out);
  void ProcessInbox(Entry& entry, Deferred& out);
  void OnDecoded(std::unique_ptr<DecodeWork> work);
  void Apply(Entry& entry, Input& input, Deferred& out);
  bool ShouldApply(const Entry& entry, Source source, bool exists, const std::string& rv,
                   const std::string& uid) const;
  void ApplyRevision(Entry& entry, Source source, Decoded decoded, Deferred& out);

  void StartReflector(Entry& entry);
  void RetireReflector(Entry& entry);
  void OnSynced(Entry& entry, Deferred& out);
  void AddSyncWaiter(Entry& entry, std::function<void()> waiter);
  void ArmSyncTimer(Entry& entry);
  void OnSyncTimer(Entry& entry);
  void Notify(const kube::ObjectRef& ref);

  kubeclient::ApiClient* api_;
  uv_loop_t* loop_;
  ApiObjectManagerOptions options_;
  std::function<void(const kube::ObjectRef&)> on_change_;
  std::map<kube::ObjectRef, std::unique_ptr<Entry>> entries_;
  std::map<std::string, std::set<kube::ObjectRef>> pods_;  // pod UID -> its references
  uint64_t next_entry_id_ = 1;
  bool stopped_ = false;
  Stats stats_;
  // Reflectors are stopped at once but destroyed from this timer, never inside their own
  // handlers.
  std::vector<std::unique_ptr<kubeclient::Reflector>> retired_;
  uv_timer_t* reap_timer_;
  std::shared_ptr<bool> alive_;
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_API_OBJECT_MANAGER_H_
