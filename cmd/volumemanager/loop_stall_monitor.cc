#include "cmd/volumemanager/loop_stall_monitor.h"

#include <spdlog/spdlog.h>

namespace volumemanager {

struct LoopStallMonitor::Handle {
  uv_prepare_t prepare{};
  uint64_t threshold_ns = 0;
  uint64_t last_wall_ns = 0;
  uint64_t last_idle_ns = 0;
  uint64_t longest_ns = 0;
  server::Histogram busy_seconds{BusyBuckets()};

  void OnPrepare() {
    uv_loop_t* loop = prepare.loop;
    const uint64_t wall = uv_hrtime();
    const uint64_t idle = uv_metrics_idle_time(loop);
    if (last_wall_ns != 0) {
      const uint64_t elapsed = wall - last_wall_ns;
      const uint64_t blocked = idle - last_idle_ns;
      const uint64_t busy = elapsed > blocked ? elapsed - blocked : 0;
      if (busy > longest_ns) longest_ns = busy;
      busy_seconds.Observe(static_cast<double>(busy) / 1e9);
      if (busy >= threshold_ns) {
        spdlog::info("event loop: one iteration ran callbacks for {:.1f} ms without polling",
                     static_cast<double>(busy) / 1e6);
      }
    }
    // Measured after logging, so that the log line's own cost counts in the next iteration.
    last_wall_ns = uv_hrtime();
    last_idle_ns = idle;
  }
};

LoopStallMonitor::~LoopStallMonitor() { Stop(); }

base::Status LoopStallMonitor::Start(uv_loop_t* loop, std::chrono::microseconds log_threshold) {
  if (handle_ != nullptr) return base::Status::Error("loop stall monitor: already started");
  if (int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME); rc != 0) {
    return base::Status::Error(std::string("loop stall monitor: ") + uv_strerror(rc));
  }
  handle_ = new Handle;
  handle_->threshold_ns = static_cast<uint64_t>(log_threshold.count()) * 1000;
  uv_prepare_init(loop, &handle_->prepare);
  handle_->prepare.data = handle_;
  uv_prepare_start(&handle_->prepare,
                   [](uv_prepare_t* p) { static_cast<Handle*>(p->data)->OnPrepare(); });
  // Not a reason for the loop to keep running.
  uv_unref(reinterpret_cast<uv_handle_t*>(&handle_->prepare));
  return base::Status::OK();
}

void LoopStallMonitor::Stop() {
  if (handle_ == nullptr) return;
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->prepare),
           [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  handle_ = nullptr;
}

const std::vector<double>& LoopStallMonitor::BusyBuckets() {
  static const std::vector<double> buckets = {.0001, .00025, .0005, .001, .0025, .005, .01,
                                              .025,  .05,    .1,    .25,  .5,    1,    2.5};
  return buckets;
}

server::Histogram LoopStallMonitor::busy_histogram() const {
  return handle_ == nullptr ? server::Histogram(BusyBuckets()) : handle_->busy_seconds;
}

std::chrono::microseconds LoopStallMonitor::longest() const {
  return std::chrono::microseconds(handle_ == nullptr ? 0 : handle_->longest_ns / 1000);
}

}  // namespace volumemanager
