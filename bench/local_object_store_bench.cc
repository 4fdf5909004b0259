// Local object store (standalone mode, Watch): how fast an edit of an object manifest reaches the
// change handler, and what the store costs at start and while idle.
//   * load: Start() reading N files of one ConfigMap each (1 KiB of data);
//   * change latency: a file rewritten (rename into place, as editors and kubectl cp do, or
//     in-place truncate+write) until the change handler runs for that object; p50/p99/max over
//     the changes, one object per change, all N referenced by a pod;
//   * the same with the N ConfigMaps as the documents of one manifest ("N (1)"), one of them
//     edited per change (the store decodes again only the documents an edit changed);
//   * relist: CPU time per periodic relist (stat of every file) with nothing changed.
//
// Usage: bench_local_object_store [--changes K] [--disk-dir DIR]
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cache/local_object_store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ConfigMapYaml(int i, int version) {
  std::string value(1024, static_cast<char>('a' + version % 26));
  return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-" + std::to_string(i) +
         "}\ndata:\n  key: \"" + value + "\"\n  version: \"" + std::to_string(version) + "\"\n";
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// One manifest of n documents, document `changed` at `version`, the others at 0.
std::string Manifest(int n, int changed, int version) {
  std::string all;
  for (int i = 0; i < n; ++i) {
    if (i > 0) all += "---\n";
    all += ConfigMapYaml(i, i == changed ? version : 0);
  }
  return all;
}

void RunOne(const std::string& medium, const std::string& root, int n, int changes, bool rename,
            bool one_file) {
  const std::string dir = root + "/vm-bench-objects";
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (one_file) {
    Write(dir + "/objects.yaml", Manifest(n, -1, 0));
  } else {
    for (int i = 0; i < n; ++i)
      Write(dir + "/cm-" + std::to_string(i) + ".yaml", ConfigMapYaml(i, 0));
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  cache::LocalObjectStore store;
  cache::LocalObjectStoreOptions options;
  options.dir = dir;
  const auto t0 = Clock::now();
  if (!store.Start(&loop, options).ok()) std::abort();
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  std::vector<kube::ObjectRef> refs;
  for (int i = 0; i < n; ++i)
    refs.push_back({kube::ObjectKind::kConfigMap, "default", "cm-" + std::to_string(i)});
  store.RegisterPod("pod", refs);
  std::set<std::string> changed;  // since the change began
  store.SetChangeHandler([&](const kube::ObjectRef& ref) { changed.insert(ref.name); });

  std::vector<double> latencies_ms;
  for (int c = 0; c < changes; ++c) {
    const int i = c % n;
    const std::string name = "cm-" + std::to_string(i);
    const std::string path = dir + "/" + (one_file ? "objects" : name) + ".yaml";
    const std::string bytes = one_file ? Manifest(n, i, c + 1) : ConfigMapYaml(i, c + 1);
    changed.clear();
    const auto start = Clock::now();
    if (rename) {
      Write(dir + "/." + name + ".tmp", bytes);
      fs::rename(dir + "/." + name + ".tmp", path);
    } else {
      Write(path, bytes);
    }
    while (changed.count(name) == 0) {
      uv_run(&loop, UV_RUN_ONCE);
      if (Clock::now() - start > std::chrono::seconds(5)) std::abort();
    }
    latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }

  // Idle relists: nothing changes; each relist stats every file.
  store.Stop();
  cache::LocalObjectStore idle;
  options.relist_interval = std::chrono::milliseconds(50);
  if (!idle.Start(&loop, options).ok()) std::abort();
  uv_timer_t stop;
  uv_timer_init(&loop, &stop);
  const double cpu0 = CpuSeconds();
  uv_timer_start(
      &stop, [](uv_timer_t* t) { uv_stop(t->loop); }, 2000, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  const double relist_us = (CpuSeconds() - cpu0) / 40 * 1e6;
  idle.Stop();
  uv_close(reinterpret_cast<uv_handle_t*>(&stop), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  fs::remove_all(dir);

  const std::string objects = std::to_string(n) + (one_file ? " (1)" : "");
  std::printf("| %s | %s | %s | %.1f | %.2f | %.2f | %.2f | %.0f |\n", medium.c_str(),
              objects.c_str(), rename ? "rename" : "in place", load_ms,
              Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99),
              *std::max_element(latencies_ms.begin(), latencies_ms.end()), relist_us);
}

}  // namespace

int main(int argc, char** argv) {
  int changes = 200;
  std::string disk_dir = fs::current_path().string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--changes")) changes = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--disk-dir")) disk_dir = argv[i + 1];
  }
  spdlog::set_level(spdlog::level::warn);
  std::printf(
      "| medium | objects (files) | write | load ms | change p50 ms | p99 ms | max ms | "
      "relist CPU us |\n|---|---:|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [medium, root] : {std::pair<std::string, std::string>{"tmpfs", "/dev/shm"},
                                     std::pair<std::string, std::string>{"disk", disk_dir}}) {
    for (int n : {1, 100, 1000}) {
      RunOne(medium, root, n, changes, true, false);
      RunOne(medium, root, n, changes, false, false);
    }
    for (int n : {100, 1000}) RunOne(medium, root, n, changes, true, true);
  }
  return 0;
}
