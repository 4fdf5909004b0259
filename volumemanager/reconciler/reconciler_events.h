// What the reconciler tells and answers about a volume's content, for whoever waits for it (the
// reload controller): a content swap (ReconcilerOptions::on_content_swapped) and where a volume
// stands on its way to disk (Reconciler::Progress). A header of its own, so that those who listen
// need nothing else of the reconciler, and the reconciler nothing of them.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONCILER_EVENTS_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONCILER_EVENTS_H_

#include <chrono>
#include <string>

namespace volumemanager {

// A volume's content changed on disk after its first set-up (Reconciler's on_content_swapped).
struct ContentSwap {
  bool foreign = false;  // another writer's swap (the kubelet's), seen by a check of ..data
  std::string version;   // the ..data target after the swap
  // The earliest remount request the daemon's write served (an object change), or when the
  // foreign swap was seen.
  std::chrono::steady_clock::time_point changed_at{};
};

// Where a volume stands for whoever waits for its new content (a reload): Reconciler::Progress.
enum class VolumeProgress {
  // Nothing newer on its way to disk: current, waiting for something outside the daemon (the
  // kubelet's set-up, an object's first read), its pod terminating, or no longer refreshed.
  kSettled,
  // Newer content may be on its way: a write, object read or check of it runs, or the next pass
  // starts one (a remount, a check or a first mount owed). A failing volume's retry counts while
  // it runs. Whatever ends this is reported (Reconciler::SetOnOperationDone, SetOnSettled).
  kWriting,
  // Its last attempt failed and it waits out its backoff: it shows its last good content (or
  // none), and its retries may fail for as long as the cause lasts (an object refused, missing or
  // deleted).
  kFailing,
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONCILER_EVENTS_H_
