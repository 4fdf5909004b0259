// bench_watch: events per second and delivery latency through the Reflector over loopback TLS,
// for 1 and for 2,000 single-object watches (metadata.name=<x>, the kubelet's per-object shape),
// with the connections used and the RSS per watched object.
//
// A producer thread PATCHes the watched ConfigMaps through one keep-alive connection, stamping
// each change with the steady-clock time it was sent; the loop thread's Reflector handlers take
// the difference on arrival. The API server is tests/apiserver/kube-test-apiserver (Python), so
// the numbers bound the whole path from the HTTP write to our handler, server included; the
// server is the slower side (see BENCHMARKS.md). `--quick` runs fewer events, and 200 watches
// instead of 2,000 (TLS handshakes with the Python server dominate the large run).
//
// `--watches N [--http2 none|curl|native] [--events E]` (docs/design.md, "HTTP stacks, weighed")
// runs N watches once, E changes (default 2,000), on one of the API client's stacks: `none`
// (default) is HTTP/1.1 straight to the test server through libcurl; `curl` and `native` go
// through an nghttpx TLS + HTTP/2 front the bench starts (HTTP/1.1 + TLS behind it, as
// bench/cluster_bench.py does), with HttpClientOptions::native_http2 false (libcurl's HTTP/2) or
// true (kubeclient/transport/http2_transport.h). It prints the RSS with the client created and
// idle, after the N watches are open, the connections, p50/p99/max delivery, and the RSS of each
// mapped shared library (from /proc/self/smaps; the bench itself links libcurl for its producer
// and the test server's admin calls, so libcurl and OpenSSL are mapped in every mode).
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kubeclient/api_client.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/transport/http_client.h"
#include "kubeclient/watch/reflector.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/nghttpx.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

long RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

// RSS of each mapped shared library (summed over its mappings), by file name.
std::map<std::string, long> LibraryRssKiB() {
  std::ifstream smaps("/proc/self/smaps");
  std::map<std::string, long> out;
  std::string line, current;
  while (std::getline(smaps, line)) {
    if (line.rfind("Rss:", 0) == 0) {
      if (!current.empty()) out[current] += std::atol(line.c_str() + 4);
      continue;
    }
    // A mapping's header: "start-end perms offset dev inode [path]".
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      const size_t slash = line.rfind('/');
      current = (slash != std::string::npos && line.find(".so", slash) != std::string::npos)
                    ? line.substr(slash + 1)
                    : "";
    }
  }
  return out;
}

long long NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

// PATCHes ConfigMaps on one keep-alive connection from its own thread.
class Producer {
 public:
  Producer(const kube_testing::TestApiServerProcess& server) : server_(server) {
    curl_ = curl_easy_init();
    headers_ = curl_slist_append(nullptr, "Content-Type: application/merge-patch+json");
    headers_ = curl_slist_append(headers_, ("Authorization: Bearer " + server.token()).c_str());
    ca_ = server.ca_file();
    curl_easy_setopt(curl_, CURLOPT_CAINFO, ca_.c_str());
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, "PATCH");
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &Discard);
  }
  ~Producer() {
    curl_slist_free_all(headers_);
    curl_easy_cleanup(curl_);
  }
  bool Patch(const std::string& name, long long stamp) {
    std::string url = server_.url() + "/api/v1/namespaces/bench/configmaps/" + name;
    std::string body = "{\"data\":{\"t\":\"" + std::to_string(stamp) + "\"}}";
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.c_str());
    long code = 0;
    if (curl_easy_perform(curl_) != CURLE_OK) return false;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &code);
    return code == 200;
  }

 private:
  const kube_testing::TestApiServerProcess& server_;
  CURL* curl_;
  curl_slist* headers_;
  std::string ca_;
};

struct Result {
  int watches = 0;
  int events = 0;
  double seconds = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  long connections = 0;
  double rss_per_object_kib = 0;
  double sync_seconds = 0;
  long rss_idle_kib = 0;                        // the client created, no request yet
  long rss_watching_kib = 0;                    // every watch open
  std::map<std::string, long> library_rss_kib;  // then, by mapped file
};

// How the API client reaches the test server (`--http2`).
enum class Mode { kDefault, kHttp1, kCurlHttp2, kNativeHttp2 };

Result Run(int watches, int events, Mode mode = Mode::kDefault) {
  Result r;
  r.watches = watches;
  kube_testing::TestApiServerProcess server;
  if (!server.Start("bench-token").ok()) {
    std::fprintf(stderr, "cannot start kube-test-apiserver\n");
    std::exit(1);
  }
  server.Admin("POST", "settings", {{"history_max_events", 1000000}});
  for (int i = 0; i < watches; ++i) {
    server.Api("POST", "/api/v1/namespaces/bench/configmaps",
               {{"metadata", {{"name", "cm-" + std::to_string(i)}}}, {"data", {{"t", "0"}}}});
  }
  auto creds = kubeclient::LoadKubeconfig({server.kubeconfig()});
  std::optional<vmtest::Nghttpx> front;
  kubeclient::HttpClientOptions http_options;
  if (mode == Mode::kCurlHttp2 || mode == Mode::kNativeHttp2) {
    front.emplace(server);
    if (!front->Listening()) {
      std::fprintf(stderr, "nghttpx did not start (Debian package nghttp2-proxy)\n");
      std::exit(1);
    }
    creds->server = "https://127.0.0.1:" + std::to_string(front->port());
    http_options.native_http2 = mode == Mode::kNativeHttp2;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto http = kubeclient::HttpClient::Create(&loop, *creds, http_options);
  if (!http.ok()) {
    std::fprintf(stderr, "HttpClient: %s\n", http.status().message().c_str());
    std::exit(1);
  }
  kubeclient::ApiClient api(http->get());
  r.rss_idle_kib = RssKiB();

  std::vector<double> latencies_ms;
  latencies_ms.reserve(static_cast<size_t>(events));
  std::atomic<int> received{0};
  long rss_before = RssKiB();
  std::vector<std::unique_ptr<kubeclient::Reflector>> reflectors;
  auto sync_start = Clock::now();
  for (int i = 0; i < watches; ++i) {
    kubeclient::ReflectorOptions options;
    options.path = "/api/v1/namespaces/bench/configmaps";
    options.field_selector = "metadata.name=cm-" + std::to_string(i);
    options.kind = "ConfigMap";
    options.description = "bench cm-" + std::to_string(i);
    options.min_watch_timeout = std::chrono::seconds(1800);
    options.max_watch_timeout = std::chrono::seconds(3600);
    kubeclient::ReflectorHandlers handlers;
    handlers.on_update = [&](const nlohmann::json&, const nlohmann::json& now) {
      long long sent = std::atoll(now["data"].value("t", std::string("0")).c_str());
      latencies_ms.push_back(static_cast<double>(NowNs() - sent) / 1e6);
      received.fetch_add(1, std::memory_order_relaxed);
    };
    reflectors.push_back(std::make_unique<kubeclient::Reflector>(&api, options, handlers));
    reflectors.back()->Start();
  }
  auto all_synced = [&] {
    return std::all_of(reflectors.begin(), reflectors.end(),
                       [](const auto& ref) { return ref->synced(); });
  };
  while (!all_synced()) uv_run(&loop, UV_RUN_ONCE);
  // Let every watch request reach the server before producing.
  auto settle = Clock::now() + std::chrono::milliseconds(500);
  uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  uv_timer_start(
      &tick, [](uv_timer_t*) {}, 5, 5);
  while (Clock::now() < settle) uv_run(&loop, UV_RUN_ONCE);
  r.sync_seconds = std::chrono::duration<double>(Clock::now() - sync_start).count();
  r.rss_watching_kib = RssKiB();
  r.library_rss_kib = LibraryRssKiB();
  r.rss_per_object_kib = static_cast<double>(r.rss_watching_kib - rss_before) / watches;
  r.connections = static_cast<long>((*http)->stats().open_connections);

  std::atomic<bool> producer_ok{true};
  auto start = Clock::now();
  std::thread producer([&] {
    Producer p(server);
    for (int i = 0; i < events; ++i) {
      if (!p.Patch("cm-" + std::to_string(i % watches), NowNs())) producer_ok = false;
    }
  });
  auto deadline = Clock::now() + std::chrono::seconds(120);
  while (received.load() < events && Clock::now() < deadline) uv_run(&loop, UV_RUN_ONCE);
  auto end = Clock::now();
  producer.join();
  r.events = received.load();
  r.seconds = std::chrono::duration<double>(end - start).count();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  if (!latencies_ms.empty()) {
    r.p50_ms = latencies_ms[latencies_ms.size() / 2];
    r.p99_ms = latencies_ms[std::min(latencies_ms.size() - 1, latencies_ms.size() * 99 / 100)];
    r.max_ms = latencies_ms.back();
  }
  if (!producer_ok) std::fprintf(stderr, "warning: some PATCH requests failed\n");

  reflectors.clear();
  uv_timer_stop(&tick);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
  http->reset();
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int weigh_watches = 0;
  int weigh_events = 2000;
  Mode mode = Mode::kDefault;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--watches" && has_value) {
      weigh_watches = std::atoi(argv[++i]);
    } else if (arg == "--events" && has_value) {
      weigh_events = std::atoi(argv[++i]);
    } else if (arg == "--http2" && has_value) {
      const std::string value = argv[++i];
      mode = value == "native" ? Mode::kNativeHttp2
             : value == "curl" ? Mode::kCurlHttp2
             : value == "none" ? Mode::kHttp1
                               : Mode::kDefault;
      if (mode == Mode::kDefault) {
        std::fprintf(stderr, "--http2: none, curl or native\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_watch [--quick] | --watches N [--http2 none|curl|native] "
                   "[--events E]\n");
      return 2;
    }
  }
  if (mode != Mode::kDefault && weigh_watches <= 0) weigh_watches = 1000;
  // 2,000 watches over HTTP/1.1 are 2,000 sockets here and 2,000 in the server.
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  spdlog::set_level(spdlog::level::warn);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  if (weigh_watches > 0) {
    if (mode == Mode::kDefault) mode = Mode::kHttp1;
    const char* name = mode == Mode::kNativeHttp2 ? "native"
                       : mode == Mode::kCurlHttp2 ? "curl"
                                                  : "none";
    Result r = Run(weigh_watches, weigh_events, mode);
    std::printf(
        "| http2 | watches | events | p50 ms | p99 ms | max ms | connections | RSS idle KiB | "
        "RSS watching KiB | per watch KiB | set-up s |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| %s | %d | %d | %.2f | %.2f | %.2f | %ld | %ld | %ld | %.1f | %.2f |\n",
        name, r.watches, r.events, r.p50_ms, r.p99_ms, r.max_ms, r.connections, r.rss_idle_kib,
        r.rss_watching_kib, r.rss_per_object_kib, r.sync_seconds);
    std::vector<std::pair<long, std::string>> libs;
    for (const auto& [file, kib] : r.library_rss_kib) libs.emplace_back(kib, file);
    std::sort(libs.rbegin(), libs.rend());
    std::printf("# RSS of mapped shared libraries (KiB, every watch open):");
    for (const auto& [kib, file] : libs) std::printf(" %s %ld;", file.c_str(), kib);
    std::printf("\n");
    if (r.events < weigh_events) {
      std::fprintf(stderr, "lost events: %d of %d delivered\n", r.events, weigh_events);
      return 1;
    }
    return 0;
  }

  std::printf(
      "| watches | events | events/s | p50 ms | p99 ms | max ms | connections | "
      "RSS/object KiB | list+watch set-up s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int watches : {1, quick ? 200 : 2000}) {
    int events = quick ? 500 : 4000;
    Result r = Run(watches, events);
    std::printf("| %d | %d | %.0f | %.2f | %.2f | %.2f | %ld | %.1f | %.2f |\n", r.watches,
                r.events, r.events / r.seconds, r.p50_ms, r.p99_ms, r.max_ms, r.connections,
                r.rss_per_object_kib, r.sync_seconds);
    std::fflush(stdout);
    if (r.events < events) {
      std::fprintf(stderr, "lost events: %d of %d delivered\n", r.events, events);
      return 1;
    }
  }
  return 0;
}
