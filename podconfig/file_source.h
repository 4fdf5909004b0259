// FileSource: the static-pod source over --pod-manifest-path, as the kubelet's file source.
//
// The path is a directory (every regular file in it, not recursing, whose name ends in .yaml,
// .yml or .json and does not start with '.') or a single manifest file. Each file holds one Pod
// (static_pod.h: deterministic UID, "<name>-<node>" name, namespace "default"). After Start, and
// after every change, the sink receives the complete current set of pods, in file-name order.
//
// Change detection (manifestdir/): inotify on the directory (a single file's directory); a
// file renamed into place or closed after writing is read at once, other bursts `debounce` after
// their last event, plus a relist every `relist_interval` (the kubelet's 20 s file check frequency)
// that reads the files whose stat changed, as a safety net that also re-arms the watch when the
// directory was missing or replaced. Events name the files to read again; events on "..name"
// entries make every file's stat be compared, so a directory that is itself a projected volume
// (files linked through a swapped "..data") is followed. A file is decoded again only when its
// bytes changed.
//
// The pods come annotated with `kubernetes.io/config.source: file` and are shared, not copied, with
// the sink (an unchanged file delivers the same object again).
//
// Settling (manifestdir/manifest_grace.h): a file that is gone, or cannot be read or decoded, is
// given `settle` to come back or be completed before it counts. A file unlinked and created again
// within it (`git checkout`) is one change, or none: its pod is not removed in between. A file
// caught mid-write (`cat > file` creates it empty) that decodes within it is never reported. A
// file reported invalid that decodes again is logged once at info ("Pod manifest is valid again").
//
// Failures: a file that is there but cannot be read (a stat or read error, over the 10 MiB
// limit) or decoded or validated (truncated, half-saved, emptied, another kind) keeps the last
// good pod it gave: the daemon writes Secrets, and an editor's half-saved file must not tear down
// live volumes (docs/design.md, "Keep what works"). The kubelet drops such a pod instead. The
// failure is logged naming the file (and the held pod), once per distinct read error or content
// (never a value); a file that never decoded contributes no pod. A file that cannot be read is
// tried again at each relist. What a file contributes changes only when it decodes to a valid pod
// (the new one replaces the held one, whatever its name) or when it is gone: removed, renamed
// away, or no longer a regular file (a directory, FIFO or device is not a manifest, as with the
// kubelet; a symlink to nothing counts as removed). Held pods are not remembered across a
// restart: a daemon started on a broken file has no good version of it. A missing path counts as
// "seen, no pods" (as with the kubelet) and is retried at each relist.
//
// Thread model: a loop-thread object. Start, Stop and the destructor run on the loop thread; the
// sink runs there, inside the loop. Start reads and decodes the path on the calling thread (before
// the loop runs); every later read and decode runs on the libuv thread pool
// (manifestdir/manifest_dir_scanner.h) and only its outcome is applied on the loop thread.
#ifndef VOLUMEMANAGER_PODCONFIG_FILE_SOURCE_H_
#define VOLUMEMANAGER_PODCONFIG_FILE_SOURCE_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/pod.h"
#include "manifestdir/manifest_grace.h"
#include "podconfig/pod_update.h"

namespace podconfig {

struct FileSourceOptions {
  std::string path;  // --pod-manifest-path
  std::string node_name;
  std::chrono::milliseconds relist_interval{20'000};
  std::chrono::milliseconds debounce{2};
  // How long a file that is gone, or cannot be read or decoded, may take to come back or be
  // completed before it counts (manifestdir::ManifestGrace); 0: at once.
  std::chrono::milliseconds settle{manifestdir::kDefaultManifestSettleTime};
};

class FileSource {
 public:
  using Sink = std::function<void(std::vector<PodPtr>)>;

  FileSource() = default;
  ~FileSource();
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  // Reads the path once (delivering the first state to `sink` before returning), then watches.
  // Fails only on bad options (empty path or node name) or a libuv error.
  base::Status Start(uv_loop_t* loop, FileSourceOptions options, Sink sink);
  // Stops watching; no sink call happens after it returns. Idempotent. The loop must run on for
  // the libuv handles to close, a read in flight to finish, and their memory to be released.
  void Stop();

  // The files that are there but rejected (cannot be read or decoded) and have stayed so for the
  // settle time, in name order: for /debug/state and the manifest errors gauge.
  std::vector<manifestdir::RejectedManifest> Rejected() const;

 private:
  struct Impl;
  // Shared with the scan in progress, so that a sink may call Stop.
  std::shared_ptr<Impl> impl_;
};

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_FILE_SOURCE_H_
