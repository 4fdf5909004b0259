// OwnedPaths: the ownership journal's paths in memory, grouped by pod.
//
// Every path the journal records is "pods/<uid>" or below it ("pods/<uid>/volumes/<plugin>/
// <name>"). Kept as full strings, each path was a heap block of 50-80 bytes in a map node of its
// own: about 860 bytes a pod of three volumes. Here a pod's UID is held once, with a vector of its
// entries (about 270 bytes a pod); the rest of each path (after "pods/<uid>/") is interned, so
// "volumes/kubernetes.io~configmap/config" is one string for every pod that has such a volume.
//
// Not thread-safe (the journal holds its lock around every call).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_JOURNAL_OWNED_PATHS_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_JOURNAL_OWNED_PATHS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace volumemanager {

enum class OwnedKind { kDir, kVolume };

class OwnedPaths {
 public:
  struct Owned {
    OwnedKind kind{};
    uint64_t inode = 0;  // of an owned volume's dir, when known (0: not known)
  };

  OwnedPaths() = default;
  OwnedPaths(const OwnedPaths&) = delete;
  OwnedPaths& operator=(const OwnedPaths&) = delete;

  // The entry of `path`, or nullptr (also for a path not of the form "pods/<uid>[/...]").
  Owned* Find(std::string_view path);
  const Owned* Find(std::string_view path) const;
  // Inserts `path` with `value` unless it is there; returns its entry and whether it was
  // inserted. Nullptr for a path not of the form "pods/<uid>[/...]" (the journal checks paths
  // before it records them).
  std::pair<Owned*, bool> Emplace(std::string_view path, Owned value);
  // False when `path` was not there.
  bool Erase(std::string_view path);
  size_t size() const { return size_; }

  // Every entry, as its full path: a pod's entries together, the pods in UID order and each
  // pod's entries in path order ("pods/<uid>" first).
  void ForEach(const std::function<void(const std::string& path, const Owned&)>& f) const;
  // The entries of one pod, in path order ("pods/<uid>" first).
  void ForEachOfPod(std::string_view uid,
                    const std::function<void(const std::string& path, const Owned&)>& f) const;

 private:
  struct Entry {
    const std::string* rest;  // interned: a key of rests_; "" for "pods/<uid>" itself
    Owned owned;
  };
  using Entries = std::vector<Entry>;  // sorted by *rest

  // Splits "pods/<uid>[/<rest>]"; false for anything else.
  static bool Split(std::string_view path, std::string_view* uid, std::string_view* rest);
  static Entries::const_iterator LowerBound(const Entries& entries, std::string_view rest);
  const std::string* Intern(std::string_view rest);
  void Release(const std::string* rest);
  static void Visit(const std::string& uid, const Entries& entries,
                    const std::function<void(const std::string&, const Owned&)>& f);

  std::map<std::string, Entries, std::less<>> pods_;  // by UID
  std::map<std::string, size_t, std::less<>> rests_;  // interned rest -> entries that use it
  size_t size_ = 0;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_JOURNAL_OWNED_PATHS_H_
