// Atomic writer throughput: writes per second for four payload shapes, on tmpfs and on the disk
// that holds the build dir, with durability off and on. A "floor" column times the bare syscalls
// any writer of that payload must make (mkdir, create+write+close each file, symlink, rename,
// remove the old dir), so the writer's own overhead is visible.
//
// Usage: bench_atomicwriter [--seconds S] [--disk-dir DIR]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "atomicwriter/atomic_writer.h"

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

std::string MakeTempDir(const std::string& parent) {
  std::string tmpl = parent + "/aw-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return tmpl;
}

// Runs `one` (which gets the iteration number) until `seconds` have passed and at least 3 runs
// were made; returns writes per second.
template <typename F>
double Rate(double seconds, F one) {
  const auto start = Clock::now();
  long n = 0;
  double elapsed = 0;
  do {
    one(n++);
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds || n < 3);
  return static_cast<double>(n) / elapsed;
}

double WriterRate(const Shape& s, const std::string& parent, bool durable, double seconds) {
  const std::string vol = MakeTempDir(parent);
  atomicwriter::Options o;
  o.durable = durable;
  auto w = AtomicWriter::Open(vol, o);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().message().c_str());
    std::exit(1);
  }
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  if (!(*w)->Write(a).ok()) std::exit(1);
  const double rate = Rate(seconds, [&](long i) {
    const Payload& p = s.no_change ? a : (i % 2 == 0 ? b : a);
    auto r = (*w)->Write(p);
    if (!r.ok() || r->published == s.no_change) {
      std::fprintf(stderr, "unexpected write result\n");
      std::exit(1);
    }
  });
  fs::remove_all(vol);
  return rate;
}

// The syscalls a writer of `s` cannot avoid, with no reading, checking or cleanup logic.
double FloorRate(const Shape& s, const std::string& parent, bool durable, double seconds) {
  const std::string vol = MakeTempDir(parent);
  const Payload a = MakePayload(s, 1);
  const Payload b = MakePayload(s, 2);
  std::string live;
  const double rate = Rate(seconds, [&](long i) {
    const std::string dir = vol + "/v" + std::to_string(i);
    ::mkdir(dir.c_str(), 0755);
    for (const auto& [path, file] : (i % 2 == 0 ? b : a)) {
      const fs::path full = fs::path(dir) / path;
      if (s.nested) fs::create_directories(full.parent_path());
      int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (::write(fd, file.data.data(), file.data.size()) < 0) std::exit(1);
      if (durable) ::fsync(fd);
      ::close(fd);
    }
    if (durable) {
      int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
      ::fsync(dfd);
      ::close(dfd);
    }
    const std::string tmp = vol + "/tmp";
    if (::symlink(("v" + std::to_string(i)).c_str(), tmp.c_str()) != 0) std::exit(1);
    ::rename(tmp.c_str(), (vol + "/data").c_str());
    if (durable) {
      int vfd = ::open(vol.c_str(), O_RDONLY | O_DIRECTORY);
      ::fsync(vfd);
      ::close(vfd);
    }
    if (!live.empty()) fs::remove_all(live);
    live = dir;
  });
  fs::remove_all(vol);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  std::string disk_dir = fs::current_path().string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--disk-dir") == 0) disk_dir = argv[i + 1];
  }
  const Shape shapes[] = {
      {"a) 1 file x 1 KiB", 1, 1024, false, false},
      {"b) 10 files x 1 KiB", 10, 1024, false, false},
      {"c) 100 files x 10 KiB, nested", 100, 10240, true, false},
      {"d) no-change write of (c)", 100, 10240, true, true},
      {"e) no-change write of (b)", 10, 1024, false, true},
  };
  const struct {
    const char* name;
    std::string dir;
  } media[] = {{"tmpfs", "/dev/shm"}, {"disk", disk_dir}};

  std::printf(
      "| payload | medium | durable | writes/s | us/write | floor writes/s | floor/writer |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|\n");
  for (const auto& m : media) {
    for (bool durable : {false, true}) {
      for (const Shape& s : shapes) {
        const double rate = WriterRate(s, m.dir, durable, seconds);
        std::printf("| %s | %s | %s | %.0f | %.1f |", s.name, m.name, durable ? "on" : "off", rate,
                    1e6 / rate);
        if (s.no_change) {
          std::printf(" - | - |\n");
        } else {
          const double floor = FloorRate(s, m.dir, durable, seconds);
          std::printf(" %.0f | %.2f |\n", floor, floor / rate);
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
