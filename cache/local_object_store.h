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
//   * settling (manifestdir/manifest_grace.h): a file gone, failing or emptied is given `settle`
//     to come back or be completed before it counts: a file unlinked and created again within it
//     (`git checkout`) is one change, so no referenced object is ever seen deleted in between; a
//     failure that ends within it is never reported; a reported one that ends is logged once;
//   * Pods in the directory are ignored (they belong in --pod-manifest-path).
//
// Keeping current, whatever the strategy (manifestdir/manifest_dir_watcher.h): inotify on the
// directory; a file renamed into place or closed after writing is read at once, other events are
// coalesced (a read happens 2 ms after the last event of a burst, at most 10 ms after its first
// while a file is still being written) and every file an event names is read again (an event on a
// "..name" entry, as when the directory is itself a projected volume whose "..data" link was
// swapped, makes every file's stat be compared); a relist (stat of every file, default every 20 s)
// catches anything missed and re-arms the watch. Gets are served from memory: no get reads or stats
// a file.
//
// Strategies (--config-map-and-secret-change-detection-strategy):
//   * Watch: each change calls the change handler at once for every referenced object it
//     created, changed or deleted; a get returns the object as last read.
//   * Cache: a get returns the object as it was when this object was last fetched, unless that is
//     older than the TTL (--object-cache-ttl) or the object was newly referenced by a pod since
//     (the kubelet's invalidation on new references); then it is fetched again, from memory.
//   * Get: a get returns the object as last read.
//   Get and Cache never call the change handler: as with the kubelet, changes reach volumes at the
//   next periodic pod resync.
// A changed file is recognised by its bytes: a rewrite with identical bytes changes nothing. In a
// YAML file, a changed document is recognised by its text: an edit decodes the documents it
// changed, and the others keep the objects they had (FileObjects). Each object revision carries
// the ContentDigest of its data (GetRevision), computed where it is decoded.
//
// Thread model: a loop-thread object. Start reads the directory on the calling thread (before the
// loop runs); every later read, decode and digest runs on the libuv thread pool
// (manifestdir/manifest_dir_scanner.h), and its outcome is applied on the loop thread. Start, Stop,
// every ObjectManager method and the change handler run on the loop thread.
#ifndef VOLUMEMANAGER_CACHE_LOCAL_OBJECT_STORE_H_
#define VOLUMEMANAGER_CACHE_LOCAL_OBJECT_STORE_H_

#include <uv.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
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
#include "kube/manifest_decoder.h"
#include "manifestdir/manifest_dir.h"
#include "manifestdir/manifest_dir_scanner.h"
#include "manifestdir/manifest_dir_watcher.h"
#include "manifestdir/manifest_grace.h"

namespace cache {

struct LocalObjectStoreOptions {
  std::string dir;  // --object-manifest-path
  ChangeDetectionStrategy strategy = ChangeDetectionStrategy::kWatch;
  std::chrono::milliseconds cache_ttl{60'000};        // Cache: --object-cache-ttl
  std::chrono::milliseconds relist_interval{20'000};  // Watch
  std::chrono::milliseconds debounce{2};              // Watch: quiet time that ends a burst
  std::chrono::milliseconds max_debounce{10};         // Watch: longest wait from a burst's start
  // How long a file that is gone, or cannot be read or decoded, may take to come back or be
  // completed before it counts (manifestdir::ManifestGrace); 0: at once.
  std::chrono::milliseconds settle{manifestdir::kDefaultManifestSettleTime};
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
  // work. The loop must run on for the libuv handles to close and a read in flight to finish.
  void Stop();

  void RegisterPod(const std::string& pod_uid, const std::vector<kube::ObjectRef>& refs) override;
  void UnregisterPod(const std::string& pod_uid) override;
  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override;
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override;
  // The digest comes with the revision, computed when it was decoded: nothing is hashed here.
  base::Result<ObjectRevision> GetRevision(const kube::ObjectRef& ref) override;
  void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) override;
  bool AnnouncesEveryChange() const override {
    return options_.strategy == ChangeDetectionStrategy::kWatch;
  }

  // Observability and tests: the number of objects served, of file reads and of directory scans
  // so far, and whether a read is running or waiting.
  size_t ObjectCount() const { return view_.size(); }
  uint64_t Scans() const { return scanner_ ? scanner_->scans() : 0; }
  bool Reading() const { return scanner_ && !scanner_->idle(); }
  // Pods registered and objects they reference (bounded memory, tests).
  size_t RegisteredPodCount() const { return pods_.size(); }
  size_t ReferencedObjectCount() const {
    return references_.size() + invalidated_.size() + fetched_.size();
  }
  uint64_t FileReads() const { return scanner_ ? scanner_->reads() : 0; }
  // Decodes so far: one per YAML document decoded alone (an edit decodes only the documents it
  // changed), one per file decoded whole.
  uint64_t Decodes() const { return memo_ ? memo_->decodes.load() : 0; }
  // The files that are there but rejected (cannot be read or decoded, or emptied while they held
  // objects) and have stayed so for the settle time, in name order.
  std::vector<manifestdir::RejectedManifest> Rejected() const;

 private:
  using Clock = std::chrono::steady_clock;

  using Objects = std::vector<std::pair<kube::ObjectRef, ObjectRevision>>;
  // A file's objects as one decode made them: immutable, shared by the loop thread (which serves
  // them) and the pool (whose next decode of the file takes from them the documents that an edit
  // left alone, instead of decoding all of them again).
  struct FileObjects {
    struct Document {  // a YAML document (kube::SplitManifestDocuments)
      // The first 16 bytes of the SHA-256 of its text (kube::WithoutBareMarker).
      std::array<char, 16> text_digest{};
      uint32_t objects_end = 0;  // its objects: from the previous document's end to here
      kube::YamlCost cost;       // against yaml_to_json.h's limits, for the whole file
    };
    Objects objects;                  // in file order
    std::vector<Document> documents;  // empty when the file was decoded whole (JSON, ...)
    // The objects that are not ours: their document (0 when decoded whole), "<Kind> <name>".
    std::vector<std::pair<uint32_t, std::string>> ignored;
  };
  // The pool's side: the objects of each file as its last decode made them, while the loop
  // thread holds them. Touched by one decode at a time (the scanner runs one scan at a time).
  struct DecodeMemo {
    std::map<std::string, std::weak_ptr<const FileObjects>> files;  // by path
    size_t sweep_at = 64;  // the size at which entries whose files are gone are dropped
    // Decodes run: one per document decoded alone, one per file decoded whole. Read by the loop.
    std::atomic<uint64_t> decodes{0};
  };
  // One file's decoding, done on a pool thread.
  struct DecodedFile {
    bool empty = false;                          // the file had 0 bytes (nothing decoded)
    base::Status status;                         // not OK: the file does not decode
    std::shared_ptr<const FileObjects> objects;  // when it does
  };
  using Scanner = manifestdir::ManifestDirScanner<DecodedFile>;

  struct ManifestFile {
    std::shared_ptr<const FileObjects> objects;  // as last decoded well; null before
    bool read = false;                           // read well at least once
    size_t size() const { return objects ? objects->objects.size() : 0; }
  };
  struct Served {
    ObjectRevision revision;
    std::string file;
  };
  struct Fetched {                           // Cache: a get's answer, kept for the TTL
    std::optional<ObjectRevision> revision;  // nullopt: the object did not exist
    Clock::time_point at;
  };
  // Decodes a file's bytes; `memo` gives the file's objects as last decoded, whose unchanged
  // documents (by the digest of their text) are taken as they are.
  static DecodedFile Decode(const std::string& path, const std::string& bytes, DecodeMemo* memo);
  // Document by document, each unchanged one taken from `previous`; null when a document fails
  // alone or the limits are passed (the whole file's decode then says why).
  static std::shared_ptr<const FileObjects> DecodeDocuments(
      const std::string& path, const std::vector<std::string_view>& pieces,
      const FileObjects* previous, DecodeMemo* memo);
  // The whole file at once (JSON, a directive, or a document that fails alone).
  static DecodedFile DecodeWhole(const std::string& path, const std::string& bytes,
                                 const FileObjects* previous, DecodeMemo* memo);
  // Appends `decoded` (document `document`'s objects) to `out`: ConfigMaps and Secrets with
  // their digests, in `previous`'s revision when it holds an equal one of the same object (one
  // copy per object revision, kept across reads), other kinds to `ignored`.
  static void AddObjects(std::vector<kube::ManifestObject>* decoded, uint32_t document,
                         const FileObjects* previous, FileObjects* out);
  Clock::time_point Now() const;
  // Takes in a scan's outcome: if any file's objects changed, updates the served objects and,
  // when `notify`, calls the change handler for referenced objects that changed.
  void Apply(Scanner::Outcome outcome, bool notify);
  // Takes in one file's new read. When its objects were replaced, appends to `refs` the objects
  // whose served revision may change, or sets `everything` when that takes comparing all of them
  // (its documents no longer line up).
  void TakeRead(Scanner::File& read, ManifestFile* file, std::vector<kube::ObjectRef>* refs,
                bool* everything);
  // Serves, from every file, the first definition of each object (UpdateView: of the objects
  // named only). Both log and notify as `Announce` says.
  void RebuildView(bool notify);
  void UpdateView(std::vector<kube::ObjectRef> refs, bool notify);
  // A second definition of `ref`, in file `also_in`: logged once per file.
  void Duplicate(const kube::ObjectRef& ref, const std::string& served_from,
                 const std::string& also_in);
  // Logs each change and, when `notify`, calls the change handler for the referenced ones.
  void Announce(const std::vector<std::pair<kube::ObjectRef, const char*>>& changed, bool notify);
  // Drops a file that is gone; true when it held objects.
  bool Remove(const std::string& name);
  // A file's read or decode failed (`error` OK: it was emptied; code kUnavailable: its read
  // failed): reported now, or once the settle time has passed; `what` is the log line.
  void Fail(const std::string& name, const std::string& path, const char* what,
            const base::Status& error);
  // Logs a failing file once per distinct reason and lists it as rejected.
  void Report(const std::string& name);
  // The settle time ended for these files: still gone, or still failing.
  void Settled(const std::vector<std::string>& gone, const std::vector<std::string>& invalid);
  base::Result<ObjectRevision> Lookup(const kube::ObjectRef& ref);

  LocalObjectStoreOptions options_;
  bool started_ = false;
  std::shared_ptr<DecodeMemo> memo_;  // the decodes'; the loop thread reads its count only
  std::unique_ptr<Scanner> scanner_;
  manifestdir::ManifestDirWatcher watcher_;
  std::function<void(const kube::ObjectRef&)> on_change_;
  std::map<std::string, ManifestFile> files_;  // by file name: name order is precedence order
  std::map<kube::ObjectRef, Served> view_;
  std::set<std::pair<kube::ObjectRef, std::string>> logged_duplicates_;
  std::map<kube::ObjectRef, int> references_;
  // Pod UID -> its references: keys of references_, which stay while a pod refers to them (a
  // ref is held once, however many pods name it).
  std::map<std::string, std::vector<const kube::ObjectRef*>> pods_;
  std::set<kube::ObjectRef> invalidated_;       // Cache: newly referenced
  std::map<kube::ObjectRef, Fetched> fetched_;  // Cache: referenced objects only
  std::string dir_error_;                       // why the last listing failed; empty when it worked
  manifestdir::ManifestGrace grace_;
  struct Failure {
    std::string file;  // its path
    std::string what;  // the log line
    base::Status error;
  };
  std::map<std::string, Failure> failing_;  // by file name, waiting or reported
  std::map<std::string, manifestdir::RejectedManifest> reported_;  // by file name
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_LOCAL_OBJECT_STORE_H_
