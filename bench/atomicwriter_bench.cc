// Atomic writer against the kubelet's writer algorithm, on tmpfs and on the disk that holds the
// build dir, for four payload shapes, changed and unchanged writes, no fsync.
//
// "kubelet" is the kubelet's AtomicWriter algorithm (docs/kubelet-behavior.md §2) written here
// step by step with the system calls its Go implementation makes: readlink ..data, a walk of the
// old version (lstat + readdir), an lstat and a whole-file read per payload path, a temporary
// dir + chmod, per file MkdirAll (stat) + create/truncate/write/close + chmod, symlink
// ..data_tmp + rename, readlink per top-level name, and the old version removed by RemoveAll's
// unlinkat sequence before the write returns.
//
// "writer" is atomicwriter::AtomicWriter as the daemon runs it for a volume it owns (standalone's
// default), with a RemovalQueue whose worker thread removes replaced versions. The grace period is
// the daemon's (30 s), so during a round nothing falls due, as in a burst of changes; the round's
// clock stops only after every replaced version was removed (RunAll on the bench's thread), so
// throughput and CPU include the removals. On a filesystem that withholds freed inodes (ext4
// without a journal, atomicwriter::ProbeFilesystem) the version a write replaced is due at once
// instead (ReplacedVersion::kAtOnceWhereFreedInodesWait): the worker removes it during the round,
// on the other core, as the daemon does for its own volumes there. `--shared`: as the daemon
// writes a volume the kubelet owns (the replaced version always waits out the grace).
// `--grace-ms 0` makes every removal due at once, on any filesystem.
//
// "floor" is the bare system calls that publish a version (mkdir, create+write+close per file,
// symlink, rename), with no reading and no comparing. It removes the version it replaced between
// two writes, outside its clock: on a journal-less ext4 the next write then reuses the inodes
// just freed, as a writer that removes promptly does, instead of walking past thousands freed in
// one batch at the round's end (which would also tax the rounds that follow). Its versions are
// placed where the writer's are: where the writer places them away from the volume dir (a volume
// it owns on a filesystem that withholds freed inodes, atomicwriter::ReplacedVersion), the floor
// makes a first version under FS_TOPDIR_FL before its clock starts, and its links inside the new
// version's dir.
//
// Per cell, rounds of the writers in turn (fresh volume dirs, `--seconds` each; who goes first
// turns with each round) and the median round: the machine is shared, and interleaving spreads
// the load over all of them. Columns:
// writes/s including the queue's removals; the mean time inside Write (what a pod waits for);
// the process's CPU time per write (both threads).
//
// `--no-queue`: the writer without a RemovalQueue (it then removes entries past their grace
// period itself, inside Write, as before the queue existed).
//
// Usage: bench_atomicwriter [--seconds S] [--rounds N] [--disk-dir DIR] [--only tmpfs|disk]
//                           [--no-queue] [--shared] [--shape a|b|c|d|e|f]
//                           [--writer kubelet|writer|floor] [--grace-ms MS]
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/removal_queue.h"
#include "atomicwriter/remove_tree.h"

namespace {

namespace fs = std::filesystem;
using atomicwriter::AtomicWriter;
using atomicwriter::FileProjection;
using atomicwriter::Payload;
using Clock = std::chrono::steady_clock;

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

double CpuSeconds() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// --- The kubelet's writer algorithm, with the system calls of its Go implementation. ---------

// os.RemoveAll: unlinkat as a file, then as a dir; when not empty, open, read the names, remove
// each the same way, close, and unlinkat the dir.
void GoRemoveAllAt(int parent, const std::string& name) {
  if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT) return;
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return;
  const int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) Die("open " + name);
  DIR* d = ::fdopendir(fd);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  for (const std::string& n : names) GoRemoveAllAt(::dirfd(d), n);
  ::closedir(d);
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) Die("rmdir " + name);
}

// filepath.Walk: lstat each entry, read each dir's names (open, getdents, close).
void GoWalk(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  const std::string path = rel.empty() ? root : root + "/" + rel;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!rel.empty()) out->push_back(rel);
  if (!S_ISDIR(st.st_mode)) return;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) GoWalk(root, rel.empty() ? n : rel + "/" + n, out);
}

// os.ReadFile: open, fstat, read until EOF, close.
bool GoReadFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  ::fstat(fd, &st);
  out->assign(static_cast<size_t>(st.st_size) + 512, '\0');
  size_t got = 0;
  for (;;) {
    if (got == out->size()) out->resize(out->size() * 2);
    const ssize_t n = ::read(fd, out->data() + got, out->size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  ::close(fd);
  return true;
}

// os.MkdirAll: stat; if missing, the parent first, then mkdir.
void GoMkdirAll(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return;
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) GoMkdirAll(path.substr(0, slash));
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) Die("mkdir " + path);
}

std::string GoTimestampDirName() {
  thread_local std::mt19937 rng{std::random_device{}()};
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "..%Y_%m_%d_%H_%M_%S.", &tm);
  return std::string(buf) + std::to_string(rng());
}

// One write; returns whether a new version was published.
bool KubeletWrite(const std::string& target, const Payload& payload) {
  const std::string data_link = target + "/..data";
  char buf[4096];
  const ssize_t n = ::readlink(data_link.c_str(), buf, sizeof(buf));
  std::string old_ts = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  const std::string old_dir = old_ts.empty() ? "" : target + "/" + old_ts;
  std::set<std::string> removals;
  if (!old_ts.empty()) {
    std::vector<std::string> walked;
    GoWalk(old_dir, "", &walked);
    std::set<std::string> keep;
    for (const auto& [p, f] : payload) {
      for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1)) {
        keep.insert(p.substr(0, slash));
      }
      keep.insert(p);
    }
    for (const std::string& w : walked) {
      if (keep.count(w) == 0) removals.insert(w);
    }
  }
  bool changed = old_ts.empty();
  std::string content;
  for (auto it = payload.begin(); !changed && it != payload.end(); ++it) {
    const std::string path = old_dir + "/" + it->first;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !GoReadFile(path, &content) ||
        content != it->second.data) {
      changed = true;
    }
  }
  if (!changed && removals.empty()) {
    for (const auto& [p, f] : payload) {
      const std::string first = p.substr(0, p.find('/'));
      if (::readlink((target + "/" + first).c_str(), buf, sizeof(buf)) < 0 && errno == ENOENT) {
        ::symlink(("..data/" + first).c_str(), (target + "/" + first).c_str());
      }
    }
    return false;
  }
  const std::string ts = GoTimestampDirName();
  const std::string ts_dir = target + "/" + ts;
  if (::mkdir(ts_dir.c_str(), 0700) != 0) Die("mkdir " + ts_dir);
  ::chmod(ts_dir.c_str(), 0755);
  for (const auto& [p, f] : payload) {
    const std::string path = ts_dir + "/" + p;
    GoMkdirAll(path.substr(0, path.rfind('/')));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, f.mode);
    if (fd < 0) Die("create " + path);
    if (::write(fd, f.data.data(), f.data.size()) < 0) Die("write " + path);
    ::close(fd);
    ::chmod(path.c_str(), f.mode);
  }
  const std::string tmp = target + "/..data_tmp";
  if (::symlink(ts.c_str(), tmp.c_str()) != 0) Die("symlink " + tmp);
  if (::rename(tmp.c_str(), data_link.c_str()) != 0) Die("rename " + tmp);
  for (const auto& [p, f] : payload) {
    const std::string first = p.substr(0, p.find('/'));
    if (::readlink((target + "/" + first).c_str(), buf, sizeof(buf)) < 0 && errno == ENOENT) {
      ::symlink(("..data/" + first).c_str(), (target + "/" + first).c_str());
    }
  }
  for (const std::string& r : removals) {
    if (r.find('/') == std::string::npos) ::unlink((target + "/" + r).c_str());
  }
  if (!old_ts.empty()) {
    const int tfd = ::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    GoRemoveAllAt(tfd, old_ts);
    ::close(tfd);
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

Round WriterRound(const Shape& s, const std::string& parent, double seconds) {
  const std::string vol = MakeTempDir(parent);
  atomicwriter::RemovalQueue queue;
  queue.Start();
  atomicwriter::Options o;
  o.unpublished_grace = g_grace;
  if (!g_no_queue) o.removals = &queue;
  o.replaced_version = g_shared ? atomicwriter::ReplacedVersion::kAfterGrace
                                : atomicwriter::ReplacedVersion::kAtOnceWhereFreedInodesWait;
  auto w = AtomicWriter::Open(vol, o);
  if (!w.ok()) Die(w.status().message());
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  if (!(*w)->Write(a).ok()) Die("first write");
  const Round r = Measure(
      seconds,
      [&](long i) {
        const Payload& p = s.no_change ? a : (i % 2 == 0 ? b : a);
        auto res = (*w)->Write(p);
        if (!res.ok() || res->published == s.no_change) Die("unexpected write result");
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
  fs::remove_all(vol);
  return r;
}

Round KubeletRound(const Shape& s, const std::string& parent, double seconds) {
  const std::string vol = MakeTempDir(parent);
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  KubeletWrite(vol, a);
  const Round r = Measure(
      seconds,
      [&](long i) {
        const Payload& p = s.no_change ? a : (i % 2 == 0 ? b : a);
        if (KubeletWrite(vol, p) == s.no_change) Die("unexpected kubelet write result");
      },
      nullptr);
  fs::remove_all(vol);
  return r;
}

// Whether the writer places its versions away from volume dir `vol` (as WriterRound opens it:
// atomicwriter::ReplacedVersion), and if so places a first version as its first write does:
// made under FS_TOPDIR_FL, set on `vol` for that mkdir only. Later versions follow that one.
bool PlaceLikeTheWriter(const std::string& vol) {
  const int fd = ::open(vol.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Die("open " + vol);
  const bool spread = !g_shared && atomicwriter::ProbeFilesystem(fd).freed_inodes_wait;
  int flags = 0;
  bool marked = false;
  if (spread && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
    int top = flags | FS_TOPDIR_FL;
    marked = ::ioctl(fd, FS_IOC_SETFLAGS, &top) == 0;
  }
  // A random name, as the writer's: ext4 starts its search for a top-level dir's place from a
  // hash of the name, and among equally good groups takes the first it finds.
  if (spread && ::mkdirat(fd, GoTimestampDirName().c_str(), 0755) != 0)
    Die("mkdir of the placed version");
  if (marked) ::ioctl(fd, FS_IOC_SETFLAGS, &flags);
  ::close(fd);
  return spread;
}

// Removes version `name` of `vol` as the writer's removal queue does (atomicwriter::RemoveTreeAt:
// children in inode order, each dir removed while still open).
void RemoveVersion(const std::string& vol, const std::string& name) {
  const int fd = ::open(vol.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Die("open " + vol);
  if (!atomicwriter::RemoveTreeAt(*atomicwriter::PosixEnv(), fd, name, name, DT_DIR).ok()) {
    Die("remove " + name);
  }
  ::close(fd);
}

// The system calls that publish a version, nothing else (the version it replaced is removed
// between two writes, outside the clock).
Round FloorRound(const Shape& s, const std::string& parent, double seconds) {
  const std::string vol = MakeTempDir(parent);
  const bool spread = PlaceLikeTheWriter(vol);
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  const Round r = Measure(
      seconds,
      [&](long i) {
        const std::string dir = vol + "/v" + std::to_string(i);
        ::mkdir(dir.c_str(), 0755);
        std::string made;
        for (const auto& [path, file] : (i % 2 == 0 ? b : a)) {
          const std::string full = dir + "/" + path;
          if (s.nested) {
            const std::string parent_dir = full.substr(0, full.rfind('/'));
            if (parent_dir != made) {
              fs::create_directories(parent_dir);
              made = parent_dir;
            }
          }
          const int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
          if (::write(fd, file.data.data(), file.data.size()) < 0) Die("write");
          ::close(fd);
        }
        const std::string tmp = (spread ? dir : vol) + "/tmp";
        if (::symlink(("v" + std::to_string(i)).c_str(), tmp.c_str()) != 0) Die("symlink");
        ::rename(tmp.c_str(), (vol + "/data").c_str());
      },
      nullptr,
      [&](long i) {
        if (i > 0) RemoveVersion(vol, "v" + std::to_string(i - 1));
      });
  fs::remove_all(vol);
  return r;
}

Round Median(std::vector<Round> rounds) {
  auto mid = [&](auto field) {
    std::vector<double> v;
    for (const Round& r : rounds) v.push_back(r.*field);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return Round{mid(&Round::writes_per_s), mid(&Round::us_in_write), mid(&Round::cpu_us)};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  int rounds = 5;
  std::string disk_dir = fs::current_path().string();
  std::string only;
  std::string shape_only;   // the payload's letter, e.g. "a"
  std::string writer_only;  // kubelet, writer or floor: that one alone (e.g. under strace)
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

  std::printf(
      "| payload | medium | kubelet writes/s | kubelet us/write | writer writes/s (removals "
      "included) | writer us in Write | kubelet/writer time in write | kubelet/writer "
      "throughput | CPU us/write kubelet / writer | floor us/write | writer in Write / floor "
      "|\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& m : media) {
    if (!only.empty() && only != m.name) continue;
    for (const Shape& s : shapes) {
      if (!shape_only.empty() && shape_only[0] != s.name[0]) continue;
      std::vector<Round> k, w, f;
      const Round none;
      for (int r = 0; r < rounds; ++r) {
        const bool all = writer_only.empty();
        // Who goes first turns with each round: each round ends by removing thousands of
        // versions, and on a journal-less ext4 the next round may reuse inodes freed in the same
        // second (later ones it must walk past); no writer should always follow the same one.
        for (int turn = 0; turn < 3; ++turn) {
          switch ((r + turn) % 3) {
            case 0:
              k.push_back(all || writer_only == "kubelet" ? KubeletRound(s, m.dir, seconds) : none);
              break;
            case 1:
              w.push_back(all || writer_only == "writer" ? WriterRound(s, m.dir, seconds) : none);
              break;
            default:
              if (!s.no_change) {
                f.push_back(all || writer_only == "floor" ? FloorRound(s, m.dir, seconds) : none);
              }
          }
        }
      }
      const Round km = Median(k);
      const Round wm = Median(w);
      std::printf("| %s | %s | %.0f | %.1f | %.0f | %.1f | %.2f | %.2f | %.1f / %.1f |", s.name,
                  m.name, km.writes_per_s, km.us_in_write, wm.writes_per_s, wm.us_in_write,
                  km.us_in_write / wm.us_in_write, wm.writes_per_s / km.writes_per_s, km.cpu_us,
                  wm.cpu_us);
      if (s.no_change) {
        std::printf(" - | - |\n");
      } else {
        const Round fm = Median(f);
        std::printf(" %.1f | %.2f |\n", fm.us_in_write, wm.us_in_write / fm.us_in_write);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
