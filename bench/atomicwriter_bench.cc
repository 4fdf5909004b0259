// The project's writer against the kubelet's real writer and the floor of the system calls that
// publish a version, on tmpfs and on the disk that holds the bench's dirs, for the payload shapes
// below, changed and unchanged writes, no fsync (issue 48).
//
// Every writer writes one configMap volume laid out as on a node,
// <round dir>/pods/<uid>/volumes/kubernetes.io~configmap/vol, a fresh round dir per round in the
// same parent dir (so the same filesystem), with the same payload bytes, each called the way its
// daemon calls it for one volume update:
//
// "kubelet" is the kubelet's own writer: pkg/volume/util/atomic_writer.go of Kubernetes v1.20.2
// (the tree `make real-kube` unpacks), built with Go by bench/kubelet_writer/build.sh into
// `kubelet_atomic_writer` beside this binary (or `--kubelet-harness PATH`). That harness is a child
// process driven over a pipe: the payloads are sent to it byte for byte, then a round at a time
// ("run for S seconds in dir D") it calls what the kubelet's configMap plugin calls for one update,
// volumeutil.NewAtomicWriter(dir, ...) and Write(payload) with its map[string]FileProjection, and
// answers the writes made, the time inside them and its process's CPU time. After each round the
// bench reads the volume through ..data and checks it holds the payload last written. Its Write
// removes the version it replaced before returning. Without the harness the kubelet columns say
// "not built" (and why, above the table); nothing else changes.
//
// "writer" is the daemon's write entry for one volume update: what the reconciler's write
// operation calls (volumemanager::RealVolumeDisk()->SetUp, i.e. SetUpVolume: the volume dir
// opened beneath the root dir following no link, the ownership journal's check of the dir,
// atomicwriter::AtomicWriter::Write with payload path validation and the content hash on), with
// the daemon's defaults: the volume is the daemon's own (set up by the round's first write, which
// records it in a journal in the round dir), a ledger kept across the volume's writes, a
// RemovalQueue whose worker thread removes replaced versions, the grace period 30 s. So during a
// round nothing falls due, as in a burst of changes; the round's clock stops only after every
// replaced version was removed (RunAll on the bench's thread), so throughput and CPU include the
// removals. On a filesystem that withholds freed inodes (ext4 without a journal,
// atomicwriter::ProbeFilesystem) the version a write replaced is due at once instead
// (ReplacedVersion::kAtOnceWhereFreedInodesWait): the worker removes it during the round, on the
// other core, as the daemon does for its own volumes there. `--shared`: as the daemon writes a
// volume the kubelet owns (refresh only; the replaced version always waits out the grace).
// `--grace-ms 0` makes every removal due at once, on any filesystem. No write gate (outside an
// operation there is none) and no fsGroup pass (the pod has none).
//
// "floor" is fixed by issue 48: mkdirat of the version dir (and of its subdirs, for nested
// paths), openat + write + close per file, symlinkat of the staging link, renameat onto ..data,
// and the removal of the version it replaced (unlinkat of each file, then of each dir), issued
// back to back in C, all relative to a descriptor of the volume dir, with no reading and no
// comparing. The removal is inside its clock (before issue 48 it ran between two writes, outside
// the clock). Its versions are placed where the writer's are: where the writer places them away
// from the volume dir (a volume it owns on a filesystem that withholds freed inodes,
// atomicwriter::ReplacedVersion), the floor makes a first version under FS_TOPDIR_FL before its
// clock starts, and its staging link inside the new version's dir.
//
// Per cell, rounds of the three in turn (fresh volume dirs, `--seconds` each; who goes first turns
// with each round), and per column the median round and the spread (min-max over the rounds):
// the machine is shared, and interleaving spreads the load over all of them. Columns: the mean
// time inside one write (what a pod waits for; for the writer SetUp's whole call), writes/s
// (the writer's including the queue's removals), the process's CPU time per write (every thread;
// the kubelet's is the harness's, the Go runtime's included).
//
// `--no-queue`: the writer without a RemovalQueue (it then removes entries past their grace
// period itself, inside Write, as before the queue existed).
//
// Usage: bench_atomicwriter [--seconds S] [--rounds N] [--disk-dir DIR] [--only tmpfs|disk]
//                           [--no-queue] [--shared] [--shape a|b|c|d|e|f]
//                           [--writer kubelet|writer|floor] [--grace-ms MS]
//                           [--kubelet-harness PATH]
//        bench_atomicwriter --fanout N [--threads T] [--rounds N] [--disk-dir DIR] [--only ...]
//
// `--fanout N`: instead of the table above, one change reaching N volumes of payload (a), written
// by T threads (the machine's cores unless --threads), the writer against the floor (FanoutRound
// says how each is called), rounds alternating; the median fan-out's wall time in ms, with the
// spread, and the process's CPU time in it. It is what the daemon's fan-out (bench_propagation
// --shared-only) would take with nothing but the writes.
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/removal_queue.h"
#include "volumemanager/disk/volume_disk.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/journal/ownership_journal.h"

namespace {

namespace fs = std::filesystem;
using atomicwriter::AtomicWriter;
using atomicwriter::FileProjection;
using atomicwriter::Payload;
using Clock = std::chrono::steady_clock;

constexpr char kPodUid[] = "0b5e5c1a-48aa-4b6c-9d1e-000000000048";
constexpr char kPluginDir[] = "kubernetes.io~configmap";
constexpr char kVolumeName[] = "vol";

struct Shape {
  const char* name;
  int files;
  size_t bytes;
  bool nested;
  bool no_change;
};

Payload MakePayload(const Shape& s, int version) {
  Payload p;
  for (int i = 0; i < s.files; ++i) {
    std::string path = s.nested ? "d" + std::to_string(i % 10) + "/sub" + std::to_string(i % 3) +
                                      "/file" + std::to_string(i)
                                : "file" + std::to_string(i);
    std::string data(s.bytes, static_cast<char>('a' + i % 26));
    const std::string tag = std::to_string(version);
    data.replace(0, tag.size(), tag);
    p[path] = FileProjection{std::move(data), 0644, std::nullopt};
  }
  return p;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_atomicwriter: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

std::string MakeTempDir(const std::string& parent) {
  std::string tmpl = parent + "/aw-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp");
  return tmpl;
}

// The round's root dir (as the daemon's --root-dir) and the volume dir below it.
struct RoundDirs {
  std::string top;   // removed after the round
  std::string root;  // top/root
  std::string vol;   // root/pods/<uid>/volumes/<plugin>/vol
  volumemanager::VolumeLocation location;
};

RoundDirs MakeRoundDirs(const std::string& parent, bool make_volume_dir) {
  RoundDirs d;
  d.top = MakeTempDir(parent);
  d.root = d.top + "/root";
  d.location = volumemanager::VolumeLocation{d.root, kPodUid, kPluginDir, kVolumeName};
  d.vol = d.location.dir();
  fs::create_directories(make_volume_dir ? d.vol : d.root);
  return d;
}

double CpuSeconds() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::string VersionName(std::mt19937& rng) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "..%Y_%m_%d_%H_%M_%S.", &tm);
  return std::string(buf) + std::to_string(rng());
}

// True when the volume dir `vol` shows exactly `p` through ..data (every file's bytes).
bool VolumeHolds(const std::string& vol, const Payload& p) {
  for (const auto& [path, file] : p) {
    const int fd = ::open((vol + "/..data/" + path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    std::string got(file.data.size() + 1, '\0');
    size_t n = 0;
    for (ssize_t r; (r = ::read(fd, got.data() + n, got.size() - n)) > 0;) {
      n += static_cast<size_t>(r);
      if (n == got.size()) break;
    }
    ::close(fd);
    if (n != file.data.size() || got.compare(0, n, file.data) != 0) return false;
  }
  return true;
}

// --- Measurement. -------------------------------------------------------------------------------

struct Round {
  double writes_per_s = 0;  // including the removals
  double us_in_write = 0;   // mean time inside one write call
  double cpu_us = 0;        // process CPU time per write
};

// Calls `one(i)` until `seconds` passed (at least 3 times), then `settle()`; times both. `between`
// (may be empty) runs after each call, outside the time counted as inside a write.
Round Measure(double seconds, const std::function<void(long)>& one,
              const std::function<void()>& settle, const std::function<void(long)>& between = {}) {
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  Clock::duration inside{};
  long n = 0;
  for (;;) {
    const auto t0 = Clock::now();
    one(n);
    const auto t1 = Clock::now();
    inside += t1 - t0;
    if (between) between(n);
    ++n;
    if ((std::chrono::duration<double>(Clock::now() - start).count() >= seconds && n >= 3)) break;
  }
  if (settle) settle();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  Round r;
  r.writes_per_s = static_cast<double>(n) / elapsed;
  r.us_in_write =
      std::chrono::duration<double, std::micro>(inside).count() / static_cast<double>(n);
  r.cpu_us = (CpuSeconds() - cpu0) * 1e6 / static_cast<double>(n);
  return r;
}

bool g_no_queue = false;
bool g_shared = false;
// The writer's grace period (Options::unpublished_grace); the daemon's default unless --grace-ms.
std::chrono::milliseconds g_grace = atomicwriter::kDefaultUnpublishedGrace;

// --- The writer: the daemon's write entry. ------------------------------------------------------

Round WriterRound(const Shape& s, const std::string& parent, double seconds) {
  const RoundDirs d = MakeRoundDirs(parent, /*make_volume_dir=*/g_shared);
  auto journal = volumemanager::OwnershipJournal::Open(d.top + "/state", d.root);
  if (!journal.ok()) Die("journal: " + journal.status().message());
  atomicwriter::RemovalQueue queue;
  queue.Start();
  atomicwriter::UnpublishedLedger ledger;
  const std::shared_ptr<volumemanager::VolumeDisk> disk = volumemanager::RealVolumeDisk();
  // One request per payload, as the reconciler fills one per write (the payload moved in).
  volumemanager::SetUpRequest requests[2];
  for (int v = 0; v < 2; ++v) {
    volumemanager::SetUpRequest& r = requests[v];
    r.location = d.location;
    r.payload = MakePayload(s, v + 1);
    r.journal = journal->journal.get();
    r.ledger = &ledger;
    r.unpublished_grace = g_grace;
    r.removals = g_no_queue ? nullptr : &queue;
    r.refresh_only = g_shared;
  }
  const volumemanager::SetUpRequest& a = requests[0];
  const volumemanager::SetUpRequest& b = requests[1];
  if (g_shared) {
    // The kubelet's set-up: the volume dir and a first version, not the daemon's.
    auto w = AtomicWriter::Open(d.vol);
    if (!w.ok() || !(*w)->Write(a.payload).ok()) Die("the kubelet's set-up");
  } else if (auto first = disk->SetUp(a); !first.ok()) {
    Die("first write: " + first.status().message());
  }
  const Round r = Measure(
      seconds,
      [&](long i) {
        const volumemanager::SetUpRequest& req = s.no_change ? a : (i % 2 == 0 ? b : a);
        auto res = disk->SetUp(req);
        if (!res.ok()) Die("write: " + res.status().message());
        if (res->published == s.no_change) Die("unexpected write result");
      },
      [&] {
        if (g_grace.count() > 0) {
          // Every replaced version is still queued, due after the grace period, as in the daemon
          // after a burst: remove them now, on this thread, inside the round's clock.
          queue.RunAll();
        }
        while (queue.pending() > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      });
  queue.Stop();
  if (queue.stats().failed != 0) Die("removal failed: " + queue.stats().last_error);
  fs::remove_all(d.top);
  return r;
}

// --- The kubelet's writer: the Go harness. ------------------------------------------------------

class KubeletHarness {
 public:
  // Starts `path`; nullopt (and `*why` says why) when it cannot run.
  static std::unique_ptr<KubeletHarness> Start(const std::string& path, std::string* why) {
    if (::access(path.c_str(), X_OK) != 0) {
      *why = path + " not built (bench/kubelet_writer/build.sh REALKUBE_DIR " + path +
             "; `make bench` builds it when `make real-kube` has unpacked the Kubernetes tree)";
      return nullptr;
    }
    int to_child[2];
    int from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) Die("pipe");
    const pid_t pid = ::fork();
    if (pid < 0) Die("fork");
    if (pid == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::execl(path.c_str(), path.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    auto h = std::unique_ptr<KubeletHarness>(new KubeletHarness);
    h->pid_ = pid;
    h->in_ = ::fdopen(to_child[1], "w");
    h->out_ = ::fdopen(from_child[0], "r");
    return h;
  }
  ~KubeletHarness() {
    std::fclose(in_);  // EOF: the harness exits
    std::fclose(out_);
    ::waitpid(pid_, nullptr, 0);
  }

  // Payload `id` (0 or 1) is `p` from now on.
  void SendPayload(int id, const Payload& p) {
    std::fprintf(in_, "payload %d %zu\n", id, p.size());
    for (const auto& [path, file] : p) {
      std::fprintf(in_, "%o %zu %zu\n", static_cast<unsigned>(file.mode), path.size(),
                   file.data.size());
      std::fwrite(path.data(), 1, path.size(), in_);
      std::fwrite(file.data.data(), 1, file.data.size(), in_);
    }
    if (Reply() != "ok") Die("kubelet harness refused the payload");
  }

  // One round in `vol`; `*writes` is how many it made.
  Round Run(const std::string& vol, double seconds, bool changed, long* writes) {
    std::fprintf(in_, "run %.6f %d %s\n", seconds, changed ? 1 : 0, vol.c_str());
    const std::string reply = Reply();
    long long n = 0, inside = 0, elapsed = 0, cpu = 0;
    if (std::sscanf(reply.c_str(), "ok %lld %lld %lld %lld", &n, &inside, &elapsed, &cpu) != 4 ||
        n <= 0) {
      errno = 0;
      Die("kubelet harness: " + reply);
    }
    *writes = static_cast<long>(n);
    Round r;
    r.writes_per_s = static_cast<double>(n) / (static_cast<double>(elapsed) / 1e9);
    r.us_in_write = static_cast<double>(inside) / 1e3 / static_cast<double>(n);
    r.cpu_us = static_cast<double>(cpu) / 1e3 / static_cast<double>(n);
    return r;
  }

 private:
  KubeletHarness() = default;
  std::string Reply() {
    std::fflush(in_);
    char line[4096];
    if (std::fgets(line, sizeof(line), out_) == nullptr) {
      errno = 0;
      Die("kubelet harness: no reply (it exited)");
    }
    std::string s(line);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

KubeletHarness* g_kubelet = nullptr;

Round KubeletRound(const Shape& s, const std::string& parent, double seconds) {
  const RoundDirs d = MakeRoundDirs(parent, /*make_volume_dir=*/true);
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  long n = 0;
  const Round r = g_kubelet->Run(d.vol, seconds, !s.no_change, &n);
  // The last write was of payload 1 (b) when its index n-1 is even, as in the other rounds.
  const Payload& last = s.no_change ? a : ((n - 1) % 2 == 0 ? b : a);
  if (!VolumeHolds(d.vol, last)) {
    errno = 0;
    Die("the kubelet's writer left other bytes than its last payload in " + d.vol);
  }
  fs::remove_all(d.top);
  return r;
}

// --- The floor. ---------------------------------------------------------------------------------

// Whether the writer places its versions away from volume dir `vol_fd` (as WriterRound opens it:
// atomicwriter::ReplacedVersion), and if so places a first version `name` as its first write
// does: made under FS_TOPDIR_FL, set on the volume dir for that mkdir only. Later versions follow
// that one. Else makes `name` plainly.
bool PlaceLikeTheWriter(int vol_fd, const std::string& name) {
  const bool spread = !g_shared && atomicwriter::ProbeFilesystem(vol_fd).freed_inodes_wait;
  int flags = 0;
  bool marked = false;
  if (spread && ::ioctl(vol_fd, FS_IOC_GETFLAGS, &flags) == 0) {
    int top = flags | FS_TOPDIR_FL;
    marked = ::ioctl(vol_fd, FS_IOC_SETFLAGS, &top) == 0;
  }
  // A random name, as the writer's: ext4 starts its search for a top-level dir's place from a
  // hash of the name, and among equally good groups takes the first it finds.
  if (::mkdirat(vol_fd, name.c_str(), 0755) != 0) Die("mkdir of the first version");
  if (marked) ::ioctl(vol_fd, FS_IOC_SETFLAGS, &flags);
  return spread;
}

// The floor's version: the dirs to make (parents first) and the files, relative to its dir.
struct FloorLayout {
  std::vector<std::string> dirs;
  std::vector<std::pair<std::string, const FileProjection*>> files;
};

FloorLayout LayoutOf(const Payload& p) {
  FloorLayout l;
  std::set<std::string> dirs;
  for (const auto& [path, file] : p) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      if (dirs.insert(path.substr(0, slash)).second) l.dirs.push_back(path.substr(0, slash));
    }
    l.files.emplace_back(path, &file);
  }
  return l;
}

// Makes version `name` of `l` in `vol_fd` (the dir itself already made).
void FloorFill(int vol_fd, const std::string& name, const FloorLayout& l) {
  for (const std::string& dir : l.dirs) {
    if (::mkdirat(vol_fd, (name + "/" + dir).c_str(), 0755) != 0) Die("mkdirat");
  }
  for (const auto& [path, file] : l.files) {
    const int fd = ::openat(vol_fd, (name + "/" + path).c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file->mode);
    if (fd < 0) Die("openat");
    if (::write(fd, file->data.data(), file->data.size()) < 0) Die("write");
    ::close(fd);
  }
}

// Removes version `name` of `l`: its files, then its dirs, deepest first, then itself.
void FloorRemove(int vol_fd, const std::string& name, const FloorLayout& l) {
  for (const auto& [path, file] : l.files) {
    if (::unlinkat(vol_fd, (name + "/" + path).c_str(), 0) != 0) Die("unlinkat");
  }
  for (auto it = l.dirs.rbegin(); it != l.dirs.rend(); ++it) {
    if (::unlinkat(vol_fd, (name + "/" + *it).c_str(), AT_REMOVEDIR) != 0) Die("rmdir");
  }
  if (::unlinkat(vol_fd, name.c_str(), AT_REMOVEDIR) != 0) Die("rmdir " + name);
}

// Issue 48's floor: the system calls that publish a version and remove the one it replaced,
// nothing else.
Round FloorRound(const Shape& s, const std::string& parent, double seconds) {
  const RoundDirs d = MakeRoundDirs(parent, /*make_volume_dir=*/true);
  const int vol_fd = ::open(d.vol.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (vol_fd < 0) Die("open " + d.vol);
  std::mt19937 rng{std::random_device{}()};
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  const FloorLayout la = LayoutOf(a);
  const FloorLayout lb = LayoutOf(b);
  // The first version (payload a), published before the clock starts.
  std::string live = VersionName(rng);
  const bool spread = PlaceLikeTheWriter(vol_fd, live);
  FloorFill(vol_fd, live, la);
  if (::symlinkat(live.c_str(), vol_fd, "..data") != 0) Die("symlinkat");
  // Names made outside the clock, as the writer's take no system call.
  const std::string prefix = VersionName(rng) + "0";
  const Round r = Measure(
      seconds,
      [&](long i) {
        const std::string name = prefix + std::to_string(i);
        const FloorLayout& l = i % 2 == 0 ? lb : la;
        if (::mkdirat(vol_fd, name.c_str(), 0755) != 0) Die("mkdirat");
        FloorFill(vol_fd, name, l);
        const std::string tmp = spread ? name + "/..tmp" : std::string("..tmp");
        if (::symlinkat(name.c_str(), vol_fd, tmp.c_str()) != 0) Die("symlinkat");
        if (::renameat(vol_fd, tmp.c_str(), vol_fd, "..data") != 0) Die("renameat");
        FloorRemove(vol_fd, live, i % 2 == 0 ? la : lb);
        live = name;
      },
      nullptr);
  ::close(vol_fd);
  fs::remove_all(d.top);
  return r;
}

// --- Fan-out: one change reaching N volumes. ---------------------------------------------------

// N volumes of payload (a), each in its own pod dir under one root, changed once each by
// `threads` threads taking volumes in turn, as the daemon's pool runs a fan-out's writes. The
// clock runs from the first write's start to the last one's return: when the last pod could read
// its new file. Returns milliseconds, and the process's CPU milliseconds in `cpu_ms`.
//
// "writer": the daemon's write entry (SetUp), a journal, ledger and RemovalQueue shared by all
// volumes, as in the daemon; the first version of each volume is its first SetUp. Replaced
// versions go as in WriterRound (queued, or due at once where freed inodes wait: the queue's
// thread then removes them during the fan-out, as the daemon's does).
// "floor": issue 48's floor calls for each volume (mkdirat, openat + write + close, symlinkat,
// renameat) without the removal, which the daemon defers too: the replaced versions are removed
// after the clock stops.
double FanoutRound(bool floor, int volumes, int threads, const std::string& parent,
                   double* cpu_ms) {
  const Shape one{"a", 1, 1024, false, false};
  const RoundDirs d = MakeRoundDirs(parent, /*make_volume_dir=*/false);
  std::vector<volumemanager::VolumeLocation> locations;
  for (int i = 0; i < volumes; ++i) {
    char uid[64];
    std::snprintf(uid, sizeof(uid), "0b5e5c1a-48aa-4b6c-9d1e-%012d", i);
    locations.push_back(volumemanager::VolumeLocation{d.root, uid, kPluginDir, kVolumeName});
  }
  const Payload a = MakePayload(one, 1);
  const Payload b = MakePayload(one, 2);
  const FloorLayout lb = LayoutOf(b);
  std::mt19937 rng{std::random_device{}()};

  auto journal = volumemanager::OwnershipJournal::Open(d.top + "/state", d.root);
  if (!journal.ok()) Die("journal: " + journal.status().message());
  atomicwriter::RemovalQueue queue;
  queue.Start();
  std::vector<atomicwriter::UnpublishedLedger> ledgers(static_cast<size_t>(volumes));
  const std::shared_ptr<volumemanager::VolumeDisk> disk = volumemanager::RealVolumeDisk();
  std::vector<volumemanager::SetUpRequest> requests(static_cast<size_t>(volumes));
  std::vector<int> vol_fds(static_cast<size_t>(volumes), -1);
  std::vector<std::string> live(static_cast<size_t>(volumes));
  std::vector<std::string> next(static_cast<size_t>(volumes));
  std::vector<char> spread(static_cast<size_t>(volumes), 0);
  for (int i = 0; i < volumes; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (floor) {
      fs::create_directories(locations[k].dir());
      vol_fds[k] = ::open(locations[k].dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (vol_fds[k] < 0) Die("open " + locations[k].dir());
      live[k] = VersionName(rng);
      spread[k] = PlaceLikeTheWriter(vol_fds[k], live[k]) ? 1 : 0;
      FloorFill(vol_fds[k], live[k], LayoutOf(a));
      if (::symlinkat(live[k].c_str(), vol_fds[k], "..data") != 0) Die("symlinkat");
      next[k] = VersionName(rng);  // named outside the clock, as in FloorRound
      continue;
    }
    volumemanager::SetUpRequest& r = requests[k];
    r.location = locations[k];
    r.payload = a;
    r.journal = journal->journal.get();
    r.ledger = &ledgers[k];
    r.unpublished_grace = g_grace;
    r.removals = &queue;
    if (auto first = disk->SetUp(r); !first.ok()) Die("first write: " + first.status().message());
    r.payload = b;
  }
  queue.RunAll();  // the first versions' leftovers, before the clock

  std::atomic<int> taken{0};
  auto work = [&] {
    for (int i; (i = taken.fetch_add(1)) < volumes;) {
      const size_t k = static_cast<size_t>(i);
      if (floor) {
        const int fd = vol_fds[k];
        const std::string& name = next[k];
        if (::mkdirat(fd, name.c_str(), 0755) != 0) Die("mkdirat");
        FloorFill(fd, name, lb);
        const std::string tmp = spread[k] != 0 ? name + "/..tmp" : std::string("..tmp");
        if (::symlinkat(name.c_str(), fd, tmp.c_str()) != 0) Die("symlinkat");
        if (::renameat(fd, tmp.c_str(), fd, "..data") != 0) Die("renameat");
      } else if (auto res = disk->SetUp(requests[k]); !res.ok() || !res->published) {
        Die("write: " + (res.ok() ? std::string("nothing published") : res.status().message()));
      }
    }
  };
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  *cpu_ms = (CpuSeconds() - cpu0) * 1e3;

  for (int i = 0; i < volumes; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (!VolumeHolds(locations[k].dir(), b)) {
      errno = 0;
      Die("a fan-out volume does not hold its new payload: " + locations[k].dir());
    }
    if (floor) {
      FloorRemove(vol_fds[k], live[k], LayoutOf(a));
      ::close(vol_fds[k]);
    }
  }
  queue.Stop();
  if (queue.stats().failed != 0) Die("removal failed: " + queue.stats().last_error);
  fs::remove_all(d.top);
  return ms;
}

// --- The table. ---------------------------------------------------------------------------------

struct Summary {
  Round median;
  Round min;
  Round max;
};

Summary Summarize(const std::vector<Round>& rounds) {
  Summary s;
  for (double Round::*field : {&Round::writes_per_s, &Round::us_in_write, &Round::cpu_us}) {
    std::vector<double> v;
    for (const Round& r : rounds) v.push_back(r.*field);
    if (v.empty()) break;
    std::sort(v.begin(), v.end());
    s.median.*field = v[v.size() / 2];
    s.min.*field = v[0];
    s.max.*field = v[v.size() - 1];
  }
  return s;
}

// "median (min-max)" of `field` in us, or `none`.
std::string Spread(const std::optional<Summary>& s, double Round::*field, const char* none) {
  if (!s) return none;
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.1f (%.1f-%.1f)", s->median.*field, s->min.*field,
                s->max.*field);
  return buf;
}

// The median of `field`, with `decimals`, or `none`.
std::string Median(const std::optional<Summary>& s, double Round::*field, int decimals,
                   const char* none) {
  if (!s) return none;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, s->median.*field);
  return buf;
}

std::string Ratio(double num, double den) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", num / den);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  int rounds = 5;
  std::string disk_dir = fs::current_path().string();
  std::string only;
  std::string shape_only;   // the payload's letter, e.g. "a"
  std::string writer_only;  // kubelet, writer or floor: that one alone (e.g. under strace)
  std::string harness = fs::read_symlink("/proc/self/exe").parent_path() / "kubelet_atomic_writer";
  int fanout = 0;
  int threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--no-queue") {
      g_no_queue = true;
      continue;
    }
    if (arg == "--shared") {
      g_shared = true;
      continue;
    }
    if (arg == "--grace-ms")
      g_grace = std::chrono::milliseconds(std::atol(value));
    else if (arg == "--seconds")
      seconds = std::atof(value);
    else if (arg == "--rounds")
      rounds = std::atoi(value);
    else if (arg == "--disk-dir")
      disk_dir = value;
    else if (arg == "--only")
      only = value;
    else if (arg == "--shape")
      shape_only = value;
    else if (arg == "--writer")
      writer_only = value;
    else if (arg == "--kubelet-harness")
      harness = value;
    else if (arg == "--fanout")
      fanout = std::atoi(value);
    else if (arg == "--threads")
      threads = std::max(1, std::atoi(value));
    else
      Die("unknown flag " + arg);
    ++i;
  }
  const Shape shapes[] = {
      {"a) 1 file x 1 KiB", 1, 1024, false, false},
      {"b) 10 files x 1 KiB", 10, 1024, false, false},
      {"c) 100 files x 10 KiB, nested", 100, 10240, true, false},
      {"d) no-change write of (c)", 100, 10240, true, true},
      {"e) no-change write of (b)", 10, 1024, false, true},
      {"f) no-change write of (a)", 1, 1024, false, true},
  };
  const struct {
    const char* name;
    std::string dir;
  } media[] = {{"tmpfs", "/dev/shm"}, {"disk", disk_dir}};

  if (fanout > 0) {
    std::printf(
        "| medium | volumes | threads | writer ms | floor ms | writer/floor | CPU ms writer / "
        "floor "
        "|\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& m : media) {
      if (!only.empty() && only != m.name) continue;
      std::vector<double> w, f, wc, fc;
      for (int r = 0; r < rounds; ++r) {
        for (int turn = 0; turn < 2; ++turn) {
          const bool floor = (r + turn) % 2 == 1;
          if (!writer_only.empty() && writer_only != (floor ? "floor" : "writer")) continue;
          double cpu = 0;
          const double ms = FanoutRound(floor, fanout, threads, m.dir, &cpu);
          (floor ? f : w).push_back(ms);
          (floor ? fc : wc).push_back(cpu);
        }
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      auto spread = [&](const std::vector<double>& v) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), "%.1f (%.1f-%.1f)", median(v),
                      *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
        return std::string(buf);
      };
      if (w.empty() || f.empty()) {  // --writer: one of them
        std::printf("| %s | %d | %d | %s | %s | - | %.1f |\n", m.name, fanout, threads,
                    w.empty() ? "-" : spread(w).c_str(), f.empty() ? "-" : spread(f).c_str(),
                    median(w.empty() ? fc : wc));
        continue;
      }
      std::printf("| %s | %d | %d | %s | %s | %s | %.1f / %.1f |\n", m.name, fanout, threads,
                  spread(w).c_str(), spread(f).c_str(), Ratio(median(w), median(f)).c_str(),
                  median(wc), median(fc));
      std::fflush(stdout);
    }
    return 0;
  }

  const bool all = writer_only.empty();
  std::unique_ptr<KubeletHarness> kubelet;
  if (all || writer_only == "kubelet") {
    std::string why;
    kubelet = KubeletHarness::Start(harness, &why);
    if (kubelet == nullptr) {
      if (!all) {
        errno = 0;
        Die("the kubelet's writer: " + why);
      }
      std::printf("The kubelet's writer is NOT MEASURED: %s.\n\n", why.c_str());
    }
    g_kubelet = kubelet.get();
  }

  std::printf(
      "| payload | medium | kubelet us/write | writer us/write | floor us/write | kubelet/writer "
      "| writer/floor | writes/s kubelet / writer / floor | CPU us/write kubelet / writer / floor "
      "|\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& m : media) {
    if (!only.empty() && only != m.name) continue;
    for (const Shape& s : shapes) {
      if (!shape_only.empty() && shape_only[0] != s.name[0]) continue;
      if (g_kubelet != nullptr) {
        g_kubelet->SendPayload(0, MakePayload(s, 1));
        g_kubelet->SendPayload(1, MakePayload(s, 2));
      }
      std::vector<Round> k, w, f;
      for (int r = 0; r < rounds; ++r) {
        // Who goes first turns with each round: each round ends by removing thousands of
        // versions, and on a journal-less ext4 the next round may reuse inodes freed in the same
        // second (later ones it must walk past); no writer should always follow the same one.
        for (int turn = 0; turn < 3; ++turn) {
          switch ((r + turn) % 3) {
            case 0:
              if (g_kubelet != nullptr) k.push_back(KubeletRound(s, m.dir, seconds));
              break;
            case 1:
              if (all || writer_only == "writer") w.push_back(WriterRound(s, m.dir, seconds));
              break;
            default:
              if (!s.no_change && (all || writer_only == "floor")) {
                f.push_back(FloorRound(s, m.dir, seconds));
              }
          }
        }
      }
      std::optional<Summary> ks, ws, fs_;
      if (!k.empty()) ks = Summarize(k);
      if (!w.empty()) ws = Summarize(w);
      if (!f.empty()) fs_ = Summarize(f);
      const char* kubelet_none = g_kubelet == nullptr && all ? "not built" : "-";
      std::printf("| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s |\n", s.name,
                  m.name, Spread(ks, &Round::us_in_write, kubelet_none).c_str(),
                  Spread(ws, &Round::us_in_write, "-").c_str(),
                  Spread(fs_, &Round::us_in_write, "-").c_str(),
                  ks && ws ? Ratio(ks->median.us_in_write, ws->median.us_in_write).c_str() : "-",
                  ws && fs_ ? Ratio(ws->median.us_in_write, fs_->median.us_in_write).c_str() : "-",
                  Median(ks, &Round::writes_per_s, 0, kubelet_none).c_str(),
                  Median(ws, &Round::writes_per_s, 0, "-").c_str(),
                  Median(fs_, &Round::writes_per_s, 0, "-").c_str(),
                  Median(ks, &Round::cpu_us, 1, kubelet_none).c_str(),
                  Median(ws, &Round::cpu_us, 1, "-").c_str(),
                  Median(fs_, &Round::cpu_us, 1, "-").c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
