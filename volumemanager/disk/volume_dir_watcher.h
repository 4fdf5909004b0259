// VolumeDirWatcher: tells its owner when another writer (the kubelet's AtomicWriter, at its pod
// sync) swapped the `..data` link of a volume dir, so that the daemon re-verifies that volume at
// once instead of at its next resync. One inotify instance for all volumes, read from the loop
// through a uv_poll handle: no thread of its own.
//
// Promise, per id (one volume, VolumeKey) armed with Watch(id, dir):
//   * `swapped(id)` after `..data` was renamed onto (IN_MOVED_TO: the kubelet's rename of
//     `..data_tmp`, and the daemon's own of its staging link) or created (IN_CREATE) in `dir`.
//     Every swap is reported, the daemon's own too: the caller knows which version it published
//     and filters. All the events one read of the inotify queue finds for an id make one report.
//     Other entries (version dirs, `..data_tmp`, the top-level links, user files) are not
//     reported.
//   * `lost(id)` once when the watch went away: the dir was removed (IN_DELETE_SELF), renamed
//     (IN_MOVE_SELF), the filesystem holding it was unmounted (IN_UNMOUNT), or the kernel dropped
//     the watch (IN_IGNORED). The id then stays known but unarmed: nothing more is reported for it
//     until the caller calls Rearm(id) (or Watch again), e.g. once the kubelet has set the volume
//     up again. An id lost in a read burst gets no `swapped` report from that burst.
//   * `overflow()` when the kernel's queue overflowed (IN_Q_OVERFLOW): swaps, and losses, may
//     have gone unreported for any id. The caller re-verifies every volume and calls Rearm on
//     every id whose volume is still set up (Rearm of an intact watch is one syscall and changes
//     nothing; of a stale one, moves the id to the dir's current inode).
//   * Swaps before the watch was armed are never reported: after every successful Watch or
//     Rearm, the caller verifies the volume once. A report read before a Watch, Rearm or Unwatch
//     of its id but not yet delivered (the handler re-armed it while the burst was delivered) is
//     dropped for the same reason.
//
// What inotify cannot see, so the caller's periodic resync remains the net (StillWatching tells
// whether the path still leads to the watched inode):
//   * A filesystem mounted on a watched dir after Watch (the kubelet's tmpfs for secret,
//     projected and downwardAPI volumes) hides the watched inode: no event says so and nothing
//     inside the mount is reported until the caller calls Rearm (or Watch), which watches the
//     mount's root. Hence the rule: arm only once `..data` exists, i.e. after the mount.
//   * An unmount reports `lost` only when the filesystem goes away with it (IN_UNMOUNT). A tmpfs
//     still mounted elsewhere (a running container's bind mount of the volume) ends without an
//     event: the watch stays on a root that is no longer at the path.
//
// The watch limit: when inotify_add_watch fails with ENOSPC (fs.inotify.max_user_watches
// reached), Watch succeeds with Arming::kPolled, the id counts as polled (state(), stats()) and
// the caller verifies it at each periodic resync instead, and may try Rearm then. The first id to
// become polled is logged (warn). Other failures (ENOENT, ENOTDIR, EACCES, ...) are errors naming
// the dir, and leave the id known and unarmed, like a lost one.
//
// Watch descriptors are per inode: ids watching the same dir share one kernel watch, which goes
// only with the last of them; an id whose dir now is another inode (re-created, or mounted over)
// gets a new watch on Rearm and its old one is released.
//
// Cost: reading and filtering events makes no filesystem call. Watch and Rearm make one
// inotify_add_watch each (a path walk) and one fstat, cheap enough to call from the loop per
// completed verification, so no thread-pool variant is offered; StillWatching a statx of the
// root, the walk beneath it and an fstat; WatchHolds nothing while the mount table is unchanged
// (the table's poll handle wakes the loop once per mount or unmount in the daemon's mount
// namespace, and calls the optional `mount_table_changed`). Stop closes the fds, which drops
// every watch. The kernel charges each watch against a per-user limit shared with the user's
// other processes. Measured figures: BENCHMARKS.md, "Volume-dir watcher".
//
// Thread model: a loop-thread object. Start, Stop, Watch, Unwatch, Rearm, the queries, the
// destructor and the handler all run on the loop thread; the handler may call any of them
// (including Stop). No handler call happens after Stop returns; the uv_poll handle and the
// inotify fd close afterwards, so the loop must run on for their memory to be released.
// Exceptions never reach libuv: a throwing handler is logged; a failure of the watcher itself
// while reading is reported as an overflow.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_DIR_WATCHER_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_DIR_WATCHER_H_

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "atomicwriter/env.h"
#include "base/status.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

struct VolumeDirWatcherHandler {
  std::function<void(const VolumeKey& id)> swapped;
  std::function<void(const VolumeKey& id)> lost;
  std::function<void()> overflow;
  // Optional: a change of the mount table was read, or its poll failed (FollowsMountTable turns
  // false). WatchHolds may now walk, and answer otherwise, for any id.
  std::function<void()> mount_table_changed;
};

struct VolumeDirWatcherOptions {
  // The opens beneath the root, inotify_add_watch(2) and the reads of the inotify fd go through
  // it (null: atomicwriter::PosixEnv()); tests pass one that fails a watch with ENOSPC without
  // touching the global fs.inotify sysctls. Must outlive the watcher.
  atomicwriter::Env* env = nullptr;
  // When set, every dir given to Watch below it is opened beneath it without following any link
  // (atomicwriter::OpenBeneath) and watched through /proc/self/fd/N of that descriptor: a symlink
  // planted on a volume's path is an error for that id (ELOOP), never followed. Dirs not below it
  // are watched by their path as given (a path the caller trusts).
  std::string root_dir;
};

struct VolumeDirWatcherStats {
  size_t armed = 0;           // ids with a kernel watch
  size_t kernel_watches = 0;  // distinct watch descriptors (ids on one dir share one)
  size_t polled = 0;          // ids refused by the watch limit
  size_t unarmed = 0;         // ids lost, or whose Watch failed, waiting for Rearm
  uint64_t overflows = 0;     // IN_Q_OVERFLOW events read
  uint64_t events_read = 0;   // inotify events read, of any kind
  uint64_t swaps_reported = 0;
  uint64_t losses_reported = 0;
  uint64_t mount_table_changes = 0;  // wake-ups of the mount table's poll
  uint64_t checks_without_walk = 0;  // WatchHolds answered from the mount table's generation
};

class VolumeDirWatcher {
 public:
  enum class Arming {
    kArmed,   // a kernel watch reports swaps in the dir
    kPolled,  // the watch limit is reached: the caller verifies this volume at each resync
  };
  enum class State { kUnknown, kArmed, kPolled, kUnarmed };

  VolumeDirWatcher() = default;
  ~VolumeDirWatcher();
  VolumeDirWatcher(const VolumeDirWatcher&) = delete;
  VolumeDirWatcher& operator=(const VolumeDirWatcher&) = delete;

  // Opens the inotify instance and starts reading it on `loop`. Fails when inotify_init1 does
  // (EMFILE: fs.inotify.max_user_instances or the fd limit) or on a second Start.
  base::Status Start(uv_loop_t* loop, VolumeDirWatcherHandler handler,
                     VolumeDirWatcherOptions options = {});
  // Closes the handle and the fd (once the loop runs on); no handler call after it. Idempotent.
  void Stop();

  // Watches `dir` (the volume dir, not a link to it) for `..data` swaps and for going away, on
  // behalf of `id`; an id already known moves to `dir`, releasing its previous watch. See above
  // for kPolled and the errors. Fails after Stop.
  base::Result<Arming> Watch(const VolumeKey& id, const std::string& dir);
  // Watch(id, the dir it was last given). Fails for an id never watched or unwatched since.
  base::Result<Arming> Rearm(const VolumeKey& id);
  // True when `id` is armed and its dir's path still leads to the inode its kernel watch is on:
  // every swap there has been or will be reported, so the caller's resync need not look at the
  // volume. The dir is walked to as Watch walks to it (beneath the root dir, no link followed on
  // the way, the root's descriptor kept across calls) and its device and inode compared with the
  // ones the watch was put on; nothing is watched, released or dropped. False when the id is
  // unknown, polled or unarmed, when the walk fails (a symlink on the way too), and when it leads
  // to another inode (a tmpfs mounted over the dir, or the mount under it gone while a bind mount
  // keeps it alive): the caller then verifies the volume and calls Rearm. A loss not yet read (the
  // dir removed, and a new one with the same inode number made) is reported when it is read.
  bool StillWatching(const VolumeKey& id) const;
  // StillWatching for the periodic resync, without the walk when nothing inotify misses can have
  // happened: what StillWatching finds that no event reports is a mount (above), and the watcher
  // polls this mount namespace's table (/proc/self/mountinfo, POLLPRI at every mount and unmount,
  // propagated ones too). True without a filesystem call while the id is armed and no change of
  // the table was read since it was armed or last found watching; otherwise StillWatching, a true
  // answer remembered. A change not yet read (the loop has not polled since) is read before the
  // next resync, which then walks. A dir renamed or removed is reported as lost by inotify; a
  // parent dir renamed away and another put at its path, which no event and no mount tells, is
  // found by StillWatching only. Walks every time when the table cannot be polled.
  bool WatchHolds(const VolumeKey& id);
  // Whether the mount table is polled: while it is, WatchHolds of an armed id that answered true
  // answers true again, without a walk, until `mount_table_changed` is called or the id is
  // reported lost, re-armed or unwatched.
  bool FollowsMountTable() const;
  // Forgets `id`: no report for it after this returns. Unknown ids are ignored.
  void Unwatch(const VolumeKey& id);

  // kUnknown for an id never watched (or unwatched since), and before Start and after Stop.
  State state(const VolumeKey& id) const;
  // All zero before Start and after Stop.
  VolumeDirWatcherStats stats() const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;  // freed by the handle's close callback after Stop
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_DISK_VOLUME_DIR_WATCHER_H_
