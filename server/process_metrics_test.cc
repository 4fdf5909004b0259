#include "server/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "server/admin_server.h"

namespace server {
namespace {

// The test's own view of its process, read another way than the code under test: VmRSS of
// /proc/self/status, getrlimit, a count of /proc/self/fd with std::filesystem, and the wall
// clock read while the test binary initialised (just after the process started).
double StatusKilobytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1));
  }
  ADD_FAILURE() << key << " not in /proc/self/status";
  return 0;
}

size_t CountFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

double Now() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

const double kInitialisedAt = Now();

TEST(ProcessMetricsTest, AgreesWithProc) {
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const ProcessStats s = ReadProcessStats();
  const double rss_kib = StatusKilobytes("VmRSS");
  const double vm_kib = StatusKilobytes("VmSize");
  const size_t fds_now = CountFds();
  for (int fd : fds) close(fd);

  ASSERT_TRUE(s.resident_bytes && s.virtual_bytes && s.cpu_seconds && s.start_time_seconds &&
              s.open_fds && s.max_fds);
  EXPECT_NEAR(*s.resident_bytes, rss_kib * 1024, rss_kib * 1024 * 0.10);
  EXPECT_NEAR(*s.virtual_bytes, vm_kib * 1024, vm_kib * 1024 * 0.10);
  EXPECT_NEAR(*s.open_fds, static_cast<double>(fds_now), 3);
  EXPECT_GE(*s.open_fds, 5 + 3);  // the five above and stdin, stdout, stderr
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur == RLIM_INFINITY) {
    EXPECT_TRUE(std::isinf(*s.max_fds));
  } else {
    EXPECT_EQ(*s.max_fds, static_cast<double>(limit.rlim_cur));
  }
  // Started before the binary's static initialisation (allowing a clock tick of rounding), and
  // shortly before it: the start time is /proc/stat's btime (whole seconds, so up to 1 s early)
  // plus the start in clock ticks since boot, and the real-time clock drifts from the boot clock
  // on a machine that has been up for long (seen: 1.04 s after 20 hours).
  EXPECT_LE(*s.start_time_seconds, kInitialisedAt + 0.05);
  EXPECT_NEAR(*s.start_time_seconds, kInitialisedAt, 3.0);
  // CPU time: the test has used some and not more than the wall time since start, per core.
  EXPECT_GE(*s.cpu_seconds, 0);
  EXPECT_LE(*s.cpu_seconds, (Now() - *s.start_time_seconds + 1) *
                                static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)));
}

TEST(ProcessMetricsTest, AnUnreadableProcessLeavesItsValuesOut) {
  const ProcessStats s = ReadProcessStats("/nonexistent/proc/1", "/nonexistent/stat");
  EXPECT_FALSE(s.cpu_seconds || s.resident_bytes || s.virtual_bytes || s.start_time_seconds ||
               s.open_fds || s.max_fds);
  const std::string text = RenderPrometheusText(ProcessMetricFamilies(s));
  // Every family still listed, none with a sample.
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE process_max_fds gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("\nprocess_"), std::string::npos) << text;
}

TEST(ProcessMetricsTest, ACommandNameWithSpacesAndParenthesesIsSkipped) {
  const std::string dir = testing::TempDir() + "/proc_fake";
  std::filesystem::create_directories(dir + "/fd");
  std::ofstream(dir + "/fd/0") << "";
  std::ofstream(dir + "/stat") << "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 "
                                  "0 1 0 1000 123456789 300 18446744073709551615\n";
  std::ofstream(dir + "/limits") << "Limit                     Soft Limit           Hard Limit    "
                                    "       Units     \n"
                                    "Max open files            unlimited            unlimited    "
                                    "        files     \n";
  std::ofstream(dir + "/boot_stat") << "cpu  1 2 3\nbtime 1700000000\n";
  const ProcessStats s = ReadProcessStats(dir, dir + "/boot_stat");
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(*s.cpu_seconds, 400 / ticks);
  EXPECT_DOUBLE_EQ(*s.start_time_seconds, 1700000000 + 1000 / ticks);
  EXPECT_DOUBLE_EQ(*s.virtual_bytes, 123456789);
  EXPECT_DOUBLE_EQ(*s.resident_bytes, 300.0 * static_cast<double>(sysconf(_SC_PAGESIZE)));
  EXPECT_DOUBLE_EQ(*s.open_fds, 1);
  EXPECT_TRUE(std::isinf(*s.max_fds));
}

TEST(ScrapeTimeMetricsTest, ReadyFollowsTheSnapshotsChecksAsReadyzDoes) {
  Snapshot snapshot;
  snapshot.readiness = {{"a", true, ""}, {"b", true, ""}};
  auto ready = [&] {
    const std::vector<MetricFamily> f = ScrapeTimeMetrics(snapshot, ProcessStats{});
    EXPECT_EQ(f.front().name, "volumemanager_ready");
    return f.front().values.at(0).second;
  };
  EXPECT_EQ(ready(), 1.0);
  snapshot.readiness[1].ok = false;
  EXPECT_EQ(ready(), 0.0);
  EXPECT_FALSE(AllReady(snapshot.readiness));
}

}  // namespace
}  // namespace server
