// BeginStartup: which configuration a starting daemon runs on, decided from the checkpoints
// (checkpoint_store.h) without the API server, and the start counted against the trial of the
// assigned config.
//
//  * No assigned config: the --config file and the flags alone.
//  * The assigned config is the last known good one: it, not on trial.
//  * The assigned config is on trial: it, and this start is counted (the trial's clock starts at
//    the first start on it) -- unless `max_failed_starts` runs on it have already ended without a
//    graceful stop (crashed, killed by the liveness probe, or failed to start), or it no longer
//    passes validation with this daemon's flags: then it is rolled back (recorded in
//    rolled-back.json with the reason) and the daemon runs on the last known good config (or the
//    file and flags when there is none), which becomes the assigned one.
//  * A corrupt checkpoint is set aside (<file>.corrupt) with an error: a corrupt assigned config
//    falls back to the last known good one, a corrupt last known good one to the file and flags.
//  * A checkpoint of a later format version (a newer release's, after a rollback) is an error:
//    nothing is decided, written or set aside, and the daemon must not start.
// Flags given on the command line win over any of them (daemon_config.h).
#ifndef VOLUMEMANAGER_DYNAMICCONFIG_STARTUP_H_
#define VOLUMEMANAGER_DYNAMICCONFIG_STARTUP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "config/daemon_config.h"
#include "dynamicconfig/checkpoint_store.h"

namespace dynamicconfig {

// The effective configuration with a dynamic config's text over the file and under the flags
// (nullopt: none), validated: config::ParseDaemonFlags with the daemon's own arguments.
using ParseFunction =
    std::function<base::Result<config::ParsedFlags>(const std::optional<std::string>& dynamic)>;

// Runs on a config on trial that end without a graceful stop, after which the next start rolls
// it back.
inline constexpr int kMaxFailedStarts = 3;

struct Startup {
  config::ParsedFlags parsed;        // the effective configuration to run on
  std::optional<Checkpoint> active;  // the dynamic config in it; nullopt: file and flags alone
  std::optional<AssignedRecord> assigned;  // as saved after counting this start
  std::optional<Checkpoint> last_known_good;
  std::optional<RolledBackRecord> rolled_back;  // the last config rolled back (now or before)
  bool rolled_back_now = false;                 // this start rolled it back: report it
  // Corrupt or unusable checkpoints and failed writes, in order, each naming its file.
  std::vector<std::string> errors;

  bool on_trial() const {
    return active && assigned && assigned->checkpoint.SameRevision(*active) &&
           !(last_known_good && last_known_good->SameRevision(*active));
  }
};

// Whether BeginStartup writes what it decides (the count of this start, a rollback, setting a
// corrupt file aside, creating the dir).
enum class StartupWrites {
  kAll,
  // Nothing is written: the decision only, e.g. for a daemon that does not hold the node's lock
  // yet (another daemon may be writing the same checkpoints). Such a start is not counted; it
  // calls BeginStartup again, with kAll, once it holds the lock, and restarts when that decides
  // otherwise (cmd/volumemanager/main.cc).
  kNone,
};

// `now_unix`: wall-clock seconds (the trial spans restarts). An error only when `parse` rejects
// the file and flags alone.
base::Result<Startup> BeginStartup(CheckpointStore& store, int64_t now_unix, int max_failed_starts,
                                   const ParseFunction& parse,
                                   StartupWrites writes = StartupWrites::kAll);

}  // namespace dynamicconfig

#endif  // VOLUMEMANAGER_DYNAMICCONFIG_STARTUP_H_
