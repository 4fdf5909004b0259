// The process_* families every Prometheus client library exports (the Go client's process
// collector, the Python client's ProcessCollector), with their standard names, types and units,
// read from /proc when /metrics is scraped, on the server thread that serves the scrape (never
// the event loop):
//
//   process_cpu_seconds_total        counter  user + system CPU time (/proc/self/stat)
//   process_resident_memory_bytes    gauge    resident set size (/proc/self/stat rss, in pages)
//   process_virtual_memory_bytes     gauge    virtual memory size (/proc/self/stat vsize)
//   process_start_time_seconds       gauge    start time since the epoch (starttime + btime)
//   process_open_fds                 gauge    entries of /proc/self/fd
//   process_max_fds                  gauge    the soft "Max open files" of /proc/self/limits
//
// A value that cannot be read is left out (its family stays listed, with no sample), and the
// others are still served.
#ifndef VOLUMEMANAGER_SERVER_PROCESS_METRICS_H_
#define VOLUMEMANAGER_SERVER_PROCESS_METRICS_H_

#include <optional>
#include <string>
#include <vector>

#include "server/metrics.h"

namespace server {

struct ProcessStats {
  std::optional<double> cpu_seconds;
  std::optional<double> resident_bytes;
  std::optional<double> virtual_bytes;
  std::optional<double> start_time_seconds;
  std::optional<double> open_fds;
  std::optional<double> max_fds;  // +Inf when unlimited
};

// Reads the stats of the process whose /proc dir is `proc_dir` ("/proc/self", or "/proc/<pid>"),
// the boot time from `proc_stat` (the system's /proc/stat).
ProcessStats ReadProcessStats(const std::string& proc_dir = "/proc/self",
                              const std::string& proc_stat = "/proc/stat");

// The six families, in the order listed above.
std::vector<MetricFamily> ProcessMetricFamilies(const ProcessStats& stats);

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_PROCESS_METRICS_H_
