// LoopStallMonitor: how long the event loop goes without polling for I/O, i.e. how late any
// event (a file change, a finished write, a timer) can be served. For each loop iteration it
// takes the wall time between two polls minus the time the loop spent blocked in the poll
// (uv_metrics_idle_time), which is the time its callbacks ran. It adds no wakeup: a uv_prepare
// handle runs only when the loop iterates anyway.
//
// An iteration busy for `log_threshold` or longer is logged (info) with its duration; the
// longest one is kept for observability and benchmarks.
//
// Loop-thread only. Start must be called before the loop first runs (it enables the loop's idle
// time metric); Stop closes the handle, and the loop must run on for it to close.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_LOOP_STALL_MONITOR_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_LOOP_STALL_MONITOR_H_

#include <uv.h>

#include <chrono>
#include <cstdint>

#include "base/status.h"
#include "server/metrics.h"

namespace volumemanager {

class LoopStallMonitor {
 public:
  LoopStallMonitor() = default;
  ~LoopStallMonitor();
  LoopStallMonitor(const LoopStallMonitor&) = delete;
  LoopStallMonitor& operator=(const LoopStallMonitor&) = delete;

  base::Status Start(uv_loop_t* loop, std::chrono::microseconds log_threshold);
  void Stop();

  // The busiest iteration so far.
  std::chrono::microseconds longest() const;
  // Every iteration's busy time, in seconds (BusyBuckets); empty when not running.
  server::Histogram busy_histogram() const;
  static const std::vector<double>& BusyBuckets();

 private:
  struct Handle;
  Handle* handle_ = nullptr;  // freed by its close callback after Stop
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_LOOP_STALL_MONITOR_H_
