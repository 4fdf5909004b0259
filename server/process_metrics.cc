#include "server/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace server {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return s.str();
}

std::optional<double> Number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

// The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses:
// it ends at the last ')'): the state is field 3 of proc(5), so field n is fields[n - 3].
std::vector<std::string> StatFields(const std::string& stat) {
  std::vector<std::string> fields;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream in(stat.substr(close + 1));
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

std::optional<double> Field(const std::vector<std::string>& fields, size_t n) {
  if (n < 3 || n - 3 >= fields.size()) return std::nullopt;
  return Number(fields[n - 3]);
}

std::optional<double> BootTime(const std::string& proc_stat) {
  std::ifstream in(proc_stat);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return Number(line.substr(6));
  }
  return std::nullopt;
}

std::optional<double> OpenFds(const std::string& proc_dir) {
  DIR* dir = opendir((proc_dir + "/fd").c_str());
  if (dir == nullptr) return std::nullopt;
  double n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

// The soft limit of "Max open files  <soft>  <hard>  files".
std::optional<double> MaxFds(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/limits");
  std::string line;
  const std::string name = "Max open files";
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    std::istringstream fields(line.substr(name.size()));
    std::string soft;
    if (!(fields >> soft)) return std::nullopt;
    if (soft == "unlimited") return std::numeric_limits<double>::infinity();
    return Number(soft);
  }
  return std::nullopt;
}

MetricFamily Family(std::string name, std::string help, MetricType type, std::optional<double> v) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  if (v) f.values.push_back({{}, *v});
  return f;
}

}  // namespace

ProcessStats ReadProcessStats(const std::string& proc_dir, const std::string& proc_stat) {
  ProcessStats out;
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  if (std::optional<std::string> stat = ReadSmallFile(proc_dir + "/stat")) {
    const std::vector<std::string> f = StatFields(*stat);
    const std::optional<double> utime = Field(f, 14), stime = Field(f, 15);
    const std::optional<double> starttime = Field(f, 22), vsize = Field(f, 23), rss = Field(f, 24);
    if (utime && stime && ticks > 0) out.cpu_seconds = (*utime + *stime) / ticks;
    if (vsize) out.virtual_bytes = *vsize;
    if (rss && page > 0) out.resident_bytes = *rss * page;
    if (starttime && ticks > 0) {
      if (std::optional<double> btime = BootTime(proc_stat)) {
        out.start_time_seconds = *btime + *starttime / ticks;
      }
    }
  }
  out.open_fds = OpenFds(proc_dir);
  out.max_fds = MaxFds(proc_dir);
  return out;
}

std::vector<MetricFamily> ProcessMetricFamilies(const ProcessStats& stats) {
  std::vector<MetricFamily> out;
  out.push_back(Family("process_cpu_seconds_total",
                       "CPU time the process has used, user and system, in seconds",
                       MetricType::kCounter, stats.cpu_seconds));
  out.push_back(Family(
      "process_resident_memory_bytes",
      "Bytes of the process's memory resident in RAM (RSS; tmpfs pages it wrote are not in it)",
      MetricType::kGauge, stats.resident_bytes));
  out.push_back(Family("process_virtual_memory_bytes",
                       "Bytes of the process's virtual address space", MetricType::kGauge,
                       stats.virtual_bytes));
  out.push_back(Family("process_start_time_seconds",
                       "When the process started, in seconds since the Unix epoch",
                       MetricType::kGauge, stats.start_time_seconds));
  out.push_back(Family("process_open_fds", "File descriptors the process has open",
                       MetricType::kGauge, stats.open_fds));
  out.push_back(Family("process_max_fds",
                       "The most file descriptors the process may open (its soft limit)",
                       MetricType::kGauge, stats.max_fds));
  return out;
}

}  // namespace server
