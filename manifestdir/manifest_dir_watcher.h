// ManifestDirWatcher: tells its owner when to scan a manifest directory again (see
// manifest_dir.h for the scan), and how much of it.
//
// Promise: after Start, the handler is called on the loop thread
//   * after a burst of fs events (inotify on the directory) is over: at once when the events
//     completed a manifest file (renamed into place, or closed after writing; a "..data" link
//     renamed) and no manifest file is left being written (created as a regular file or modified
//     and not yet closed); otherwise trailing-edge coalescing, `debounce` after the last event of
//     the burst and at most `max_debounce` after its first (max_debounce == debounce: once,
//     `debounce` after the first event). A writer that keeps a file open is read by the debounce
//     and again when it closes the file. The scope says
//     what the burst touched: kNamed with the manifest files events named; kStatAll when a
//     "..name" entry changed (the directory is itself a projected volume whose files are links
//     through a swapped "..data": every file may have changed without an event naming it);
//     kReadAll when an event named no file, named the directory itself, or the watch failed.
//     Events on other names (dotfiles, editors' swap and temporary files) are ignored;
//   * every `relist_interval`, with kStatAll: the safety net for missed events.
// After each call the watch is re-armed when the directory appeared, was replaced (new inode)
// or its watch failed, and then the handler is called once more with kReadAll (what was written
// into the new directory before its watch existed). While the path is missing, its parent
// directory is watched for the path's name: a directory removed and created again (or renamed
// into place) is read within `debounce`, not at the next relist (the relist still finds it when
// the parent is missing too). With `allow_single_file`, a path naming a regular file is watched
// through its directory.
//
// Thread model: a loop-thread object. Start, Stop, the destructor and the handler run on the loop
// thread. Stop (also from inside the handler) ends all calls; the libuv handles close afterwards,
// so the loop must run on for their memory to be released.
#ifndef VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_WATCHER_H_
#define VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_WATCHER_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "base/status.h"
#include "manifestdir/manifest_dir.h"

namespace manifestdir {

struct ManifestDirWatcherOptions {
  std::string path;
  bool allow_single_file = false;
  std::string what = "manifest path";  // how log lines name the path ("pod manifest path")
  std::chrono::milliseconds relist_interval{20'000};
  std::chrono::milliseconds debounce{2};
  std::chrono::milliseconds max_debounce{10};
};

class ManifestDirWatcher {
 public:
  // `named`: the manifest file names events named (kNamed; may be set with kStatAll too).
  using Handler = std::function<void(ManifestScanScope scope, const std::set<std::string>& named)>;

  ManifestDirWatcher() = default;
  ~ManifestDirWatcher();
  ManifestDirWatcher(const ManifestDirWatcher&) = delete;
  ManifestDirWatcher& operator=(const ManifestDirWatcher&) = delete;

  // Arms the watch and the relist timer; the owner has read the directory already. Fails on an
  // empty path or a second Start.
  base::Status Start(uv_loop_t* loop, ManifestDirWatcherOptions options, Handler handler);
  // No handler call happens after it returns. Idempotent.
  void Stop();

 private:
  struct Handles;
  Handles* handles_ = nullptr;  // freed by the last handle-close callback after Stop
};

}  // namespace manifestdir

#endif  // VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_WATCHER_H_
