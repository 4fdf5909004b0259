// Propagation benchmark: how long an object change takes to reach every pod volume that uses it,
// through the real daemon (build/bin/volumemanager) in standalone mode, and what the daemon
// costs while idle.
//
// Scenarios: a ConfigMap created after its pod (the mount fails and backs off until then): the
// time from its creation to the content (polled every 1 ms). 1, 100 and 1,000 pods sharing one
// ConfigMap; 1,000 pods with one ConfigMap each (one object changed at a time). For each change the
// object file is replaced (write + rename, as editors do) and the time until each affected volume's
// ..data is swapped is taken from inotify (IN_MOVED_TO "..data" on every volume dir), then the new
// bytes are checked. Reports p50/p99 of the time to the first and to the last volume over --changes
// changes. Then a 1 MiB Secret shared by 1,000 pods (--big-changes changes): p50/p99 to the last
// volume and the event loop's longest stall while the change spreads (the daemon logs every loop
// iteration busy for 1 ms or more, --loop-stall-log-threshold; the largest such line between the
// edit and the last swap, or "< 1" when there is none). Then, with 1,000 pods x 3 volumes mounted,
// the daemon's RSS and CPU over --idle-seconds.
//
// Usage: bench_propagation [--changes N] [--big-changes N] [--idle-seconds S] [--daemon PATH]
//                          [--quick] [--idle-only] [--big-only] [--late-only] [--shared-only]
//                          [--one-only]
//                          [--work-parent DIR]
//                          [--late-samples N]
//                          [--sync-frequency D (repeatable; default 1m and 5m)]
//                          [--samples-to FILE] [--no-settle]
//
// --samples-to FILE: every change of the change scenarios, one line each (scenario, change,
// seconds since the first change, ms to the first volume, ms to the last), after a comment line
// with the first change's CLOCK_MONOTONIC time (to line them up with a kernel trace taken with
// trace_clock "mono"), to see where a tail comes from. --no-settle: the change scenarios start
// right after the set-up instead of after its writes are retired (Settle).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

// Linux 5.13's ext4 journal checkpoint ioctl; Debian 12's headers predate it.
#ifndef EXT4_IOC_CHECKPOINT
#define EXT4_IOC_CHECKPOINT _IOW('f', 43, uint32_t)
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void WriteAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  std::ofstream(tmp) << text;
  fs::rename(tmp, path);
}

std::string ConfigMapYaml(const std::string& name, const std::string& value) {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  value: \"" +
         value + "\"\n  static.conf: \"" + std::string(512, 'x') + "\"\n";
}

// A Secret of one key whose value is `mib` MiB, starting with `value` (base64 of printable
// bytes, as the API would hold it).
std::string BigSecretYaml(const std::string& name, const std::string& value, int mib) {
  std::string raw = value + ":";
  raw.resize(static_cast<size_t>(mib) << 20, 'x');
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  b64.reserve(raw.size() / 3 * 4 + 4);
  for (size_t i = 0; i < raw.size(); i += 3) {
    const uint32_t n = (static_cast<uint8_t>(raw[i]) << 16) |
                       (i + 1 < raw.size() ? static_cast<uint8_t>(raw[i + 1]) << 8 : 0) |
                       (i + 2 < raw.size() ? static_cast<uint8_t>(raw[i + 2]) : 0);
    b64 += alphabet[(n >> 18) & 63];
    b64 += alphabet[(n >> 12) & 63];
    b64 += i + 1 < raw.size() ? alphabet[(n >> 6) & 63] : '=';
    b64 += i + 2 < raw.size() ? alphabet[n & 63] : '=';
  }
  return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\ndata:\n  blob: " + b64 +
         "\n";
}

std::string SecretYaml(const std::string& name) {
  return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name +
         "\nstringData:\n  token: bench-not-a-secret\n";
}

// A pod mounting a configMap volume of `cm`, and optionally a secret and a downwardAPI volume.
std::string PodYaml(const std::string& name, const std::string& uid, const std::string& cm,
                    bool three_volumes) {
  std::ostringstream y;
  y << "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " << name << "\n  uid: " << uid
    << "\n  labels: {app: bench}\nspec:\n  containers:\n  - name: app\n    image: x\n"
    << "    volumeMounts:\n    - {name: cfg, mountPath: /cfg}\n";
  if (three_volumes) {
    y << "    - {name: sec, mountPath: /sec}\n    - {name: info, mountPath: /info}\n";
  }
  y << "  volumes:\n  - name: cfg\n    configMap: {name: " << cm << "}\n";
  if (three_volumes) {
    y << "  - name: sec\n    secret: {secretName: shared-secret}\n"
      << "  - name: info\n    downwardAPI:\n      items:\n      - {path: labels, fieldRef: "
         "{fieldPath: metadata.labels}}\n";
  }
  return y.str();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t idx = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  return v[idx];
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct Daemon {
  pid_t pid = -1;
  fs::path dir;

  void Start(const std::string& bin, const std::vector<std::string>& extra = {}) {
    pid = fork();
    if (pid == 0) {
      const std::string log = (dir / "daemon.log").string();
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      std::vector<std::string> args = {bin,
                                       "--root-dir",
                                       (dir / "root").string(),
                                       "--state-dir",
                                       (dir / "state").string(),
                                       "--node-name",
                                       "bench",
                                       "--pod-manifest-path",
                                       (dir / "pods").string(),
                                       "--object-manifest-path",
                                       (dir / "objects").string()};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
  }
  void Stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }
  // A field of /proc/<pid>/status in KiB ("VmRSS", "RssAnon"), -1 if missing.
  long StatusKiB(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
    }
    return -1;
  }
  double CpuSeconds() const {
    const std::string s = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = s.rfind(')');
    std::istringstream rest(s.substr(close + 2));
    std::string field;
    std::vector<std::string> f;
    while (rest >> field) f.push_back(field);
    // After the comm field: state is f[0]; utime is field 14, stime 15 (1-based) => f[11], f[12].
    return (std::atof(f[11].c_str()) + std::atof(f[12].c_str())) / sysconf(_SC_CLK_TCK);
  }
};

// Waits until every dir in `dirs` has a file `value` reading `want`; false after `timeout`.
bool WaitContent(const std::vector<fs::path>& dirs, const std::string& want,
                 std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    bool all = true;
    for (const auto& d : dirs) {
      if (ReadFile(d / "value") != want) {
        all = false;
        break;
      }
    }
    if (all) return true;
    usleep(20000);
  }
  return false;
}

struct Result {
  std::string name;
  int changes = 0;
  std::vector<double> first_ms, last_ms;
  std::vector<double> at_s;  // when each change was made, seconds after the first
  double start_s = 0;        // when the first was, CLOCK_MONOTONIC seconds (trace_clock "mono")
  double daemon_cpu_ms_per_change = 0;  // the daemon's user + system time over the changes
};

// Watches every volume dir for the ..data swap.
class SwapWatcher {
 public:
  explicit SwapWatcher(const std::vector<fs::path>& dirs) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    for (size_t i = 0; i < dirs.size(); ++i) {
      const int wd = inotify_add_watch(fd_, dirs[i].c_str(), IN_MOVED_TO);
      wd_to_index_[wd] = i;
    }
  }
  ~SwapWatcher() { close(fd_); }

  // Collects swaps until `count` distinct dirs swapped or `timeout`; returns the time of the
  // first and last swap relative to `t0`, in ms (negative when timed out).
  std::pair<double, double> Wait(Clock::time_point t0, size_t count,
                                 std::chrono::milliseconds timeout) {
    std::set<size_t> seen;
    double first = -1, last = -1;
    const auto deadline = Clock::now() + timeout;
    alignas(struct inotify_event) char buf[64 * 1024];
    while (seen.size() < count && Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, 10);
      for (;;) {
        const ssize_t n = read(fd_, buf, sizeof(buf));
        if (n <= 0) break;
        const auto now = Clock::now();
        for (ssize_t off = 0; off < n;) {
          auto* e = reinterpret_cast<inotify_event*>(buf + off);
          off += sizeof(inotify_event) + e->len;
          if (e->len == 0 || std::strcmp(e->name, "..data") != 0) continue;
          auto it = wd_to_index_.find(e->wd);
          if (it == wd_to_index_.end() || !seen.insert(it->second).second) continue;
          const double ms = std::chrono::duration<double, std::milli>(now - t0).count();
          if (first < 0) first = ms;
          last = ms;
        }
      }
    }
    if (seen.size() < count) return {-1, -1};
    return {first, last};
  }

 private:
  int fd_;
  std::map<int, size_t> wd_to_index_;
};

// The daemon leaves tmpfs volumes mounted when it stops (as the kubelet): unmount them, then
// remove the work dir.
void RemoveWorkDir(const fs::path& work) {
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  std::vector<std::string> targets;
  const std::string prefix = work.string() + "/";
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string source, target;
    fields >> source >> target;
    if (target.rfind(prefix, 0) == 0) targets.push_back(target);
  }
  std::sort(targets.rbegin(), targets.rend());
  for (const std::string& t : targets) umount2(t.c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(work, ec);
}

// Where the work dirs (and so the volumes) go: `--work-parent`, /tmp (the disk) by default.
std::string g_work_parent = "/tmp";

// --no-settle clears it: the changes then start while the set-up's writes are still being retired.
bool g_settle = true;

// Retires the set-up's disk work before the first change, so that the changes are measured and
// not what setting up 1,000 volumes left behind: syncfs, then on ext4 a checkpoint of its journal
// (EXT4_IOC_CHECKPOINT, Linux 5.13; elsewhere the ioctl fails and is ignored). Without it, the
// first time the journal fills after the set-up, ext4 checkpoints the set-up's small
// transactions (one per fsync of the daemon's ownership journal, about 480 for 1,000 new
// volumes) one at a time, and every write waits: 0.1-1 s on the journaled loop ext4
// (bench/history.md, the settled start of 2026-11-24).
void Settle(const fs::path& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  syncfs(fd);
  uint32_t flags = 0;
  ioctl(fd, EXT4_IOC_CHECKPOINT, &flags);
  close(fd);
}

fs::path MakeWorkDir() {
  std::string tmpl = g_work_parent + "/bench-propagation-XXXXXX";
  fs::path d = mkdtemp(tmpl.data());
  for (const char* sub : {"pods", "objects", "root"}) fs::create_directories(d / sub);
  return d;
}

fs::path VolumeDir(const fs::path& work, const std::string& uid, const char* plugin,
                   const char* vol) {
  return work / "root" / "pods" / uid / "volumes" / plugin / vol;
}

Result RunScenario(const std::string& bin, const std::string& name, int pods, bool shared,
                   int changes) {
  Result r;
  r.name = name;
  fs::path work = MakeWorkDir();
  const int objects = shared ? 1 : pods;
  for (int i = 0; i < objects; ++i) {
    WriteAtomically(work / "objects" / ("cm-" + std::to_string(i) + ".yaml"),
                    ConfigMapYaml("cm-" + std::to_string(i), "v0"));
  }
  std::vector<fs::path> dirs;
  for (int i = 0; i < pods; ++i) {
    const std::string uid = "pod-" + std::to_string(i);
    const std::string cm = "cm-" + std::to_string(shared ? 0 : i);
    WriteAtomically(work / "pods" / (uid + ".yaml"), PodYaml(uid, uid, cm, false));
    dirs.push_back(VolumeDir(work, uid, "kubernetes.io~configmap", "cfg"));
  }
  Daemon d;
  d.dir = work;
  d.Start(bin);
  if (!WaitContent(dirs, "v0", std::chrono::seconds(120))) {
    std::fprintf(stderr, "%s: initial mount timed out (see %s)\n", name.c_str(),
                 (work / "daemon.log").c_str());
    std::exit(1);
  }
  if (g_settle) Settle(work);
  SwapWatcher watcher(dirs);
  const double cpu_before = d.CpuSeconds();
  const auto start = Clock::now();
  r.start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
  for (int c = 1; c <= changes; ++c) {
    const int obj = shared ? 0 : (c * 7919) % objects;
    const std::string value = "v" + std::to_string(c);
    const auto t0 = Clock::now();
    WriteAtomically(work / "objects" / ("cm-" + std::to_string(obj) + ".yaml"),
                    ConfigMapYaml("cm-" + std::to_string(obj), value));
    const size_t expect = shared ? dirs.size() : 1;
    auto [first, last] = watcher.Wait(t0, expect, std::chrono::seconds(30));
    if (first < 0) {
      std::fprintf(stderr, "%s: change %d did not arrive within 30s\n", name.c_str(), c);
      std::exit(1);
    }
    const fs::path check = shared ? dirs.back() : dirs[static_cast<size_t>(obj)];
    if (ReadFile(check / "value") != value) {
      std::fprintf(stderr, "%s: change %d: wrong bytes after the swap\n", name.c_str(), c);
      std::exit(1);
    }
    r.first_ms.push_back(first);
    r.last_ms.push_back(last);
    r.at_s.push_back(std::chrono::duration<double>(t0 - start).count());
    ++r.changes;
    usleep(50000);  // let the daemon settle; changes are independent samples
  }
  if (r.changes > 0) r.daemon_cpu_ms_per_change = (d.CpuSeconds() - cpu_before) * 1e3 / r.changes;
  d.Stop();
  RemoveWorkDir(work);
  return r;
}

// A pod whose ConfigMap does not exist yet: its mount fails and backs off (0.5 s doubling); the
// ConfigMap is created `wait_ms` later, after the failures; the time from its creation to the
// volume's content. One daemon, `samples` pods one after the other, waits spread over 2-9 s so
// that the creation falls at every point of a backoff period.
void RunLateObjectScenario(const std::string& bin, int samples) {
  fs::path work = MakeWorkDir();
  Daemon d;
  d.dir = work;
  d.Start(bin);
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    const std::string uid = "late-" + std::to_string(i);
    const fs::path dir = VolumeDir(work, uid, "kubernetes.io~configmap", "cfg");
    WriteAtomically(work / "pods" / (uid + ".yaml"), PodYaml(uid, uid, uid, false));
    const int wait_ms = 2000 + (i * 7001) % 7000;
    usleep(static_cast<useconds_t>(wait_ms) * 1000);
    const auto t0 = Clock::now();
    WriteAtomically(work / "objects" / (uid + ".yaml"), ConfigMapYaml(uid, "here"));
    while (ReadFile(dir / "value") != "here") {
      if (Clock::now() - t0 > std::chrono::minutes(3)) {
        std::fprintf(stderr, "late object %d: no content after 3 min\n", i);
        std::exit(1);
      }
      usleep(1000);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  d.Stop();
  RemoveWorkDir(work);
  std::printf(
      "| ConfigMap created 2-9 s after its pod (failing, backing off) | %d | %.1f / %.1f | "
      "(max %.1f) |\n",
      samples, Percentile(ms, 50), Percentile(ms, 99), *std::max_element(ms.begin(), ms.end()));
  std::fflush(stdout);
}

// The longest "event loop: one iteration ran callbacks for X ms" the daemon logged in
// log[from, to), in ms; 0 when none.
double LongestStall(const fs::path& log, size_t from, size_t to) {
  const std::string text = ReadFile(log);
  const std::string marker = "event loop: one iteration ran callbacks for ";
  double longest = 0;
  for (size_t at = text.find(marker, from); at != std::string::npos && at < to;
       at = text.find(marker, at + 1)) {
    longest = std::max(longest, std::atof(text.c_str() + at + marker.size()));
  }
  return longest;
}

// A stall in ms as the table shows it: none logged (under the 1 ms threshold) is "< 1".
std::string StallText(double ms) {
  if (ms <= 0) return "< 1";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", ms);
  return buf;
}

// 1,000 pods mounting one 1 MiB Secret; each change rewrites it with a new value.
void RunBigSecretScenario(const std::string& bin, int pods, int changes) {
  Result r;
  fs::path work = MakeWorkDir();
  WriteAtomically(work / "objects" / "big.yaml", BigSecretYaml("big", "v0", 1));
  std::vector<fs::path> dirs;
  for (int i = 0; i < pods; ++i) {
    const std::string uid = "pod-" + std::to_string(i);
    std::ostringstream y;
    y << "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " << uid << "\n  uid: " << uid
      << "\nspec:\n  containers:\n  - name: app\n    image: x\n    volumeMounts:\n"
      << "    - {name: big, mountPath: /big}\n  volumes:\n  - name: big\n    secret: "
         "{secretName: big}\n";
    WriteAtomically(work / "pods" / (uid + ".yaml"), y.str());
    dirs.push_back(VolumeDir(work, uid, "kubernetes.io~secret", "big"));
  }
  Daemon d;
  d.dir = work;
  d.Start(bin, {"--loop-stall-log-threshold", "1ms"});
  const auto prefix_is = [](const fs::path& file, const std::string& want) {
    std::ifstream in(file);
    std::string got(want.size(), '\0');
    in.read(got.data(), static_cast<std::streamsize>(got.size()));
    return in.gcount() == static_cast<std::streamsize>(want.size()) && got == want;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  for (const fs::path& dir : dirs) {
    while (!prefix_is(dir / "blob", "v0:")) {
      if (Clock::now() > deadline) {
        std::fprintf(stderr, "big secret: initial mount timed out (see %s)\n",
                     (work / "daemon.log").c_str());
        std::exit(1);
      }
      usleep(20000);
    }
  }
  sleep(1);
  SwapWatcher watcher(dirs);
  std::vector<double> stalls;
  for (int c = 1; c <= changes; ++c) {
    const std::string value = "v" + std::to_string(c);
    const std::string yaml = BigSecretYaml("big", value, 1);
    const size_t log_from = fs::file_size(work / "daemon.log");
    const auto t0 = Clock::now();
    WriteAtomically(work / "objects" / "big.yaml", yaml);
    auto [first, last] = watcher.Wait(t0, dirs.size(), std::chrono::seconds(120));
    if (first < 0) {
      std::fprintf(stderr, "big secret: change %d did not arrive within 120s\n", c);
      std::exit(1);
    }
    usleep(200000);  // the stall line of the last busy iteration comes after it
    stalls.push_back(
        LongestStall(work / "daemon.log", log_from, fs::file_size(work / "daemon.log")));
    if (!prefix_is(dirs.back() / "blob", value + ":")) {
      std::fprintf(stderr, "big secret: change %d: wrong bytes after the swap\n", c);
      std::exit(1);
    }
    r.first_ms.push_back(first);
    r.last_ms.push_back(last);
    ++r.changes;
    sleep(1);
  }
  d.Stop();
  RemoveWorkDir(work);
  const double longest = *std::max_element(stalls.begin(), stalls.end());
  std::printf(
      "| 1 MiB Secret shared by %d pods | %d | %.1f / %.1f | %.1f / %.1f | longest loop stall: "
      "p50 %s ms, max %s ms |\n",
      pods, r.changes, Percentile(r.first_ms, 50), Percentile(r.first_ms, 99),
      Percentile(r.last_ms, 50), Percentile(r.last_ms, 99),
      StallText(Percentile(stalls, 50)).c_str(), StallText(longest).c_str());
  std::fflush(stdout);
}

void Idle(const std::string& bin, int pods, int seconds, const std::string& sync_frequency) {
  fs::path work = MakeWorkDir();
  WriteAtomically(work / "objects" / "shared.yaml",
                  ConfigMapYaml("shared-cm", "v0") + "---\n" + SecretYaml("shared-secret"));
  std::vector<fs::path> dirs;
  for (int i = 0; i < pods; ++i) {
    const std::string uid = "pod-" + std::to_string(i);
    WriteAtomically(work / "pods" / (uid + ".yaml"), PodYaml(uid, uid, "shared-cm", true));
    dirs.push_back(VolumeDir(work, uid, "kubernetes.io~configmap", "cfg"));
  }
  Daemon d;
  d.dir = work;
  const auto t0 = Clock::now();
  d.Start(bin, {"--sync-frequency", sync_frequency});
  if (!WaitContent(dirs, "v0", std::chrono::seconds(300))) {
    std::fprintf(stderr, "idle: initial mount timed out\n");
    std::exit(1);
  }
  // Wait for the secret and downwardAPI volumes too.
  for (int i = 0; i < pods; ++i) {
    const std::string uid = "pod-" + std::to_string(i);
    while (!fs::exists(VolumeDir(work, uid, "kubernetes.io~downward-api", "info") / "labels") ||
           !fs::exists(VolumeDir(work, uid, "kubernetes.io~secret", "sec") / "token")) {
      usleep(20000);
    }
  }
  const double mount_s = std::chrono::duration<double>(Clock::now() - t0).count();
  sleep(2);
  const double cpu0 = d.CpuSeconds();
  const auto w0 = Clock::now();
  long max_rss = 0;
  long max_anon = 0;
  for (int s = 0; s < seconds; ++s) {
    sleep(1);
    max_rss = std::max(max_rss, d.StatusKiB("VmRSS"));
    max_anon = std::max(max_anon, d.StatusKiB("RssAnon"));
  }
  const double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  const double cpu = d.CpuSeconds() - cpu0;
  std::printf(
      "| idle, %d pods x 3 volumes, --sync-frequency %s | first mount of all %d volumes: %.1f s "
      "| RSS %.1f MiB, of which anonymous %.1f MiB (max over %d s) | CPU %.3f %% of a core |\n",
      pods, sync_frequency.c_str(), pods * 3, mount_s, max_rss / 1024.0, max_anon / 1024.0, seconds,
      100.0 * cpu / wall);
  d.Stop();
  RemoveWorkDir(work);
}

}  // namespace

int main(int argc, char** argv) {
  int changes = 50;
  int big_changes = 10;
  bool big_only = false;
  int idle_seconds = 60;
  std::string bin = (fs::read_symlink("/proc/self/exe").parent_path() / "volumemanager").string();
  bool quick = false;
  bool idle_only = false;
  std::vector<std::string> sync_frequencies = {"1m", "5m"};
  bool custom_sync = false;
  bool late_only = false;
  bool shared_only = false;  // only "1,000 pods sharing 1 ConfigMap"
  bool one_only = false;     // only "1 pod, 1 ConfigMap"
  int late_samples = 10;
  std::string samples_to;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--changes" && i + 1 < argc) changes = std::atoi(argv[++i]);
    if (a == "--idle-seconds" && i + 1 < argc) idle_seconds = std::atoi(argv[++i]);
    if (a == "--daemon" && i + 1 < argc) bin = argv[++i];
    if (a == "--quick") quick = true;
    if (a == "--idle-only") idle_only = true;
    if (a == "--big-only") big_only = true;
    if (a == "--late-only") late_only = true;
    if (a == "--shared-only") shared_only = true;
    if (a == "--one-only") one_only = true;
    if (a == "--work-parent" && i + 1 < argc) g_work_parent = argv[++i];
    if (a == "--late-samples" && i + 1 < argc) late_samples = std::atoi(argv[++i]);
    if (a == "--big-changes" && i + 1 < argc) big_changes = std::atoi(argv[++i]);
    if (a == "--samples-to" && i + 1 < argc) samples_to = argv[++i];
    if (a == "--no-settle") g_settle = false;
    if (a == "--sync-frequency" && i + 1 < argc) {
      if (!custom_sync) sync_frequencies.clear();
      custom_sync = true;
      sync_frequencies.push_back(argv[++i]);
    }
  }
  if (quick) {
    changes = 10;
    big_changes = 3;
    idle_seconds = 5;
  }
  std::printf(
      "| scenario | changes | to first volume p50 / p99 (ms) | to last volume p50 / p99 (ms) | "
      "daemon CPU per change (ms) |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  const struct {
    const char* name;
    int pods;
    bool shared;
  } scenarios[] = {
      {"1 pod, 1 ConfigMap", 1, true},
      {"100 pods sharing 1 ConfigMap", 100, true},
      {"1,000 pods sharing 1 ConfigMap", 1000, true},
      {"1,000 pods, 1 ConfigMap each (one changed)", 1000, false},
  };
  if (!idle_only && !big_only && !shared_only && !one_only) {
    RunLateObjectScenario(bin, quick ? 3 : late_samples);
  }
  if (late_only) return 0;
  for (const auto& s : scenarios) {
    if (idle_only || big_only) break;
    if (shared_only && !(s.pods == 1000 && s.shared)) continue;
    if (one_only && s.pods != 1) continue;
    Result r = RunScenario(bin, s.name, s.pods, s.shared, changes);
    std::printf("| %s | %d | %.1f / %.1f | %.1f / %.1f | %.1f |\n", r.name.c_str(), r.changes,
                Percentile(r.first_ms, 50), Percentile(r.first_ms, 99), Percentile(r.last_ms, 50),
                Percentile(r.last_ms, 99), r.daemon_cpu_ms_per_change);
    std::fflush(stdout);
    if (!samples_to.empty()) {
      std::ofstream out(samples_to, std::ios::app);
      char first[64];
      std::snprintf(first, sizeof(first), "%.6f", r.start_s);
      out << "# " << r.name << ": first change at CLOCK_MONOTONIC " << first << " s\n";
      for (size_t i = 0; i < r.last_ms.size(); ++i) {
        out << r.name << '\t' << i + 1 << '\t' << r.at_s[i] << '\t' << r.first_ms[i] << '\t'
            << r.last_ms[i] << '\n';
      }
      if (!out) std::fprintf(stderr, "cannot write %s\n", samples_to.c_str());
    }
  }
  if (shared_only || one_only) return 0;
  if (!idle_only) RunBigSecretScenario(bin, 1000, big_changes);
  if (big_only) return 0;
  for (const std::string& sync : sync_frequencies) Idle(bin, 1000, idle_seconds, sync);
  return 0;
}
