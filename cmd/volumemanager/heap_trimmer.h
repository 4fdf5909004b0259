// HeapTrimmer: gives the heap's free pages back to the kernel once a burst of work is over.
//
// Bulk work (a manifest of 1,000 objects decoded, 1,000 pods added, a fan-out of writes) leaves
// the heap with free chunks between the ones still in use. glibc returns only the free space at
// the top of the heap by itself; the rest stays resident until malloc_trim(0) releases every
// free page inside the heap (madvise) as well. At 1,000 pods that is 1.5 MiB after start and
// more after each change (BENCHMARKS.md, "Memory: where it goes").
//
// Request() after bulk work: the trim runs once `quiet` has passed since the last request and
// `busy` (operations in flight) is false, so a burst costs one trim at its end. The trim runs on
// the libuv thread pool, never on the loop. Nothing is armed while no request is pending, so an
// idle daemon is never woken.
//
// Loop-thread only. Stop closes the timer (the loop must run on for it to close); a trim already
// queued on the pool still runs, and its completion is dropped.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_HEAP_TRIMMER_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_HEAP_TRIMMER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace volumemanager {

struct HeapTrimmerOptions {
  // Time without a new request before the trim runs.
  std::chrono::milliseconds quiet{1000};
  // While true the trim waits another `quiet` (e.g. writes in flight). Empty: never busy.
  std::function<bool()> busy;
  // The trim, on a pool thread; true when memory was released. Empty: malloc_trim(0).
  std::function<bool()> trim;
};

class HeapTrimmer {
 public:
  HeapTrimmer() = default;
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  void Start(uv_loop_t* loop, HeapTrimmerOptions options);
  // Bulk work happened: trim once it is over. No-op before Start or after Stop.
  void Request();
  void Stop();

  // Trims finished so far, and those of them that released memory (observability, tests).
  uint64_t trims() const { return state_ ? state_->trims : 0; }
  uint64_t released() const { return state_ ? state_->released : 0; }
  bool pending() const { return pending_; }

 private:
  struct State {
    std::function<bool()> trim;
    bool stopped = false;
    bool in_flight = false;
    uint64_t trims = 0;
    uint64_t released = 0;
  };
  void Fire();

  uv_loop_t* loop_ = nullptr;
  HeapTrimmerOptions options_;
  uv_timer_t* timer_ = nullptr;  // freed by its close callback
  std::shared_ptr<State> state_;
  bool pending_ = false;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_HEAP_TRIMMER_H_
