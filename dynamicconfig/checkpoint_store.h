// CheckpointStore: the dynamic config's records in --dynamic-config-dir, kept across restarts so
// that a daemon starts on its assigned config with the API server down, and falls back to the
// last known good one when the assigned one fails:
//
//   assigned.json         the config downloaded last and validated (its ConfigMap's namespace,
//                         name, uid, resourceVersion and the VolumeManagerConfiguration text),
//                         with its trial record: when the trial started, how many times the
//                         process started on it and how many of those runs ended cleanly;
//   last-known-good.json  the last config that ran through its whole trial;
//   rolled-back.json      the last config rolled back, and why (so that it is not tried again
//                         until its ConfigMap changes).
//
// Each file is one JSON document {"kind", "version", "sha256", "record"}, the digest over the
// record's text; a file that does not parse, has another kind or version, or whose digest does
// not match is corrupt: Load* returns an error naming the file, and SetAside moves it to
// <name>.corrupt for inspection. Except a later version (a newer release's checkpoint, after a
// rollback): Load* and RefuseNewerFormat return an error naming the file and the version, and
// the file is never set aside or replaced (docs/upgrades.md). Format versions: 1, the only one
// written so far (fixtures in testdata/formats/). Writes replace a file atomically and durably
// (base/durable_file.h). Blocking file I/O on small files, done at start and on a config change.
// Not thread-safe.
#ifndef VOLUMEMANAGER_DYNAMICCONFIG_CHECKPOINT_STORE_H_
#define VOLUMEMANAGER_DYNAMICCONFIG_CHECKPOINT_STORE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace dynamicconfig {

// A config as its ConfigMap carried it.
struct Checkpoint {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string config;  // the VolumeManagerConfiguration text (no secret: a config names paths)

  // The same ConfigMap revision.
  bool SameRevision(const Checkpoint& other) const {
    return uid == other.uid && resource_version == other.resource_version;
  }
  // For logs, Events and /configz: "ConfigMap ns/name uid=... resourceVersion=...".
  std::string Describe() const;
  // {"namespace", "name", "uid", "resourceVersion"}: what /configz shows (not the text).
  nlohmann::json Reference() const;
};

struct AssignedRecord {
  Checkpoint checkpoint;
  int64_t trial_started_unix = 0;  // 0: no process has run on it yet
  int starts = 0;                  // process starts on it during its trial
  int clean_exits = 0;             // of those, runs that ended with a graceful stop
};

struct RolledBackRecord {
  Checkpoint checkpoint;
  std::string reason;
};

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string dir);

  const std::string& dir() const { return dir_; }

  // Creates the directory (and its parents; mode 0700) when missing.
  base::Status Init();

  // nullopt when the file does not exist; an error when it cannot be read or is corrupt.
  base::Result<std::optional<AssignedRecord>> LoadAssigned() const;
  base::Result<std::optional<Checkpoint>> LoadLastKnownGood() const;
  base::Result<std::optional<RolledBackRecord>> LoadRolledBack() const;

  base::Status SaveAssigned(const AssignedRecord& record);
  base::Status SaveLastKnownGood(const Checkpoint& checkpoint);
  base::Status SaveRolledBack(const RolledBackRecord& record);
  // Removes assigned.json (no config assigned any more); a missing file is OK.
  base::Status ClearAssigned();

  // An error naming the file and its format version when a checkpoint of a later format than
  // this release's is present (a rollback): the daemon must then not start. Missing, unreadable
  // or corrupt files are Load*'s to report.
  base::Status RefuseNewerFormat() const;

  // Moves a corrupt file (kAssigned, ...) to <name>.corrupt; best effort, errors are returned
  // for the log.
  base::Status SetAside(const std::string& file);

  static constexpr char kAssigned[] = "assigned.json";
  static constexpr char kLastKnownGood[] = "last-known-good.json";
  static constexpr char kRolledBack[] = "rolled-back.json";

 private:
  base::Result<std::optional<nlohmann::json>> Load(const std::string& file) const;
  base::Status Save(const std::string& file, const nlohmann::json& record);

  std::string dir_;
};

}  // namespace dynamicconfig

#endif  // VOLUMEMANAGER_DYNAMICCONFIG_CHECKPOINT_STORE_H_
