// SignalBatcher: runs the signal reload actions of many pods with one scan of /proc per batch, on
// a thread of its own.
//
// Finding a container's main process reads every /proc/<pid>/cgroup of the node (about 25 µs a
// process: 50 ms with 2,000 processes), and that cost is the same for one request as for a
// thousand (SignalContainers). One ConfigMap shared by N pods with a signal action would cost N
// scans if each pod's attempt scanned alone, and N blocked threads of the libuv pool, where they
// would queue ahead of volume writes. So attempts are batched:
// * Requests submitted in the same turn of the loop go in one call of `send`; the call is made
//   at the end of that turn (a zero-delay timer), not at the first submission.
// * At most one call runs at a time. Everything submitted while it runs waits and goes in the
//   next call, made as soon as the running one ends. So a burst costs two or three scans however
//   many pods it reaches, and a pod waits at most for the scan in progress and its own.
// * The calls run on one thread the batcher starts at its first batch (none when signals are
//   never sent), never on the libuv pool, so no scan delays a volume write.
//
// Loop-thread only, except `send`, which runs on the batcher's thread (it must be thread-safe
// and must not touch loop-owned state; reload::SignalContainers qualifies). Close() before
// destruction.
#ifndef VOLUMEMANAGER_RELOAD_SIGNAL_BATCHER_H_
#define VOLUMEMANAGER_RELOAD_SIGNAL_BATCHER_H_

#include <uv.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "reload/signal_action.h"

namespace reload {

class SignalBatcher {
 public:
  // One result per request, in order: the process signalled, or why not.
  using Results = std::vector<base::Result<std::string>>;
  using Send = std::function<Results(const std::vector<ContainerSignal>&)>;

  // `send` is called on the batcher's thread with every request of a batch.
  SignalBatcher(uv_loop_t* loop, Send send);
  ~SignalBatcher();
  SignalBatcher(const SignalBatcher&) = delete;
  SignalBatcher& operator=(const SignalBatcher&) = delete;

  // Queues `requests`; `done` runs on the loop with one result per request, in order, once the
  // batch that carried them ended (never from inside Submit). A `send` that throws, or returns
  // fewer results than requests, fails the requests it did not answer, each with a reason.
  void Submit(std::vector<ContainerSignal> requests, std::function<void(Results)> done);

  // No new batch: submissions not yet handed to the thread are dropped (their `done` never runs);
  // the batch running ends first (its `done`s do not run either). `done` once the thread has
  // ended and the handles are closed. The loop is never blocked.
  void Close(std::function<void()> done);

  struct Stats {
    uint64_t batches = 0;   // calls of `send` (scans of /proc)
    uint64_t requests = 0;  // requests they carried
  };
  const Stats& stats() const { return stats_; }
  // Submissions queued or in the running batch.
  size_t outstanding() const { return queued_.size() + running_.size(); }

 private:
  struct Submission {
    std::vector<ContainerSignal> requests;
    std::function<void(Results)> done;
  };

  void Dispatch();  // hands the queued submissions to the thread, when none runs
  void OnBatchDone();
  void ThreadMain();
  void MaybeClosed();

  uv_loop_t* loop_;
  Send send_;
  uv_timer_t* kick_ = nullptr;   // the end of the turn a submission came in
  uv_async_t* async_ = nullptr;  // the thread's batch ended
  std::vector<Submission> queued_;
  std::vector<Submission> running_;
  bool closing_ = false;
  std::function<void()> close_done_;
  Stats stats_;

  // Shared with the thread, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ContainerSignal> job_;
  bool job_ready_ = false;
  Results results_;  // the batch's, one per request of job_ (in submission order)
  bool results_ready_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_SIGNAL_BATCHER_H_
