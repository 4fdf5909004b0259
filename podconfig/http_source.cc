#include "podconfig/http_source.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <new>
#include <utility>

#include "podconfig/redacted_url.h"
#include "podconfig/static_pod.h"

namespace podconfig {
namespace {

constexpr size_t kMaxBodyBytes = 10 << 20;

// What one transfer produced; written on a pool thread, read on the loop thread after it.
struct Transfer {
  std::string url;
  long timeout_ms = 0;
  const std::atomic<bool>* cancelled = nullptr;
  std::string body;
  bool too_large = false;
  CURLcode code = CURLE_OK;
  long http_status = 0;
  std::string error;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) noexcept {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->body.size() + n > kMaxBodyBytes) {
    t->too_large = true;
    return 0;  // aborts the transfer
  }
  try {
    t->body.append(data, n);
  } catch (const std::bad_alloc&) {
    return 0;
  }
  return n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) noexcept {
  return static_cast<Transfer*>(user)->cancelled->load() ? 1 : 0;
}

// Runs on a pool thread.
void RunTransfer(Transfer* t) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    t->code = CURLE_FAILED_INIT;
    t->error = "cannot create a libcurl handle";
    return;
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, t->url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, t->timeout_ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "volumemanager");
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, t);
  t->code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t->http_status);
  if (t->code != CURLE_OK) t->error = errbuf[0] != 0 ? errbuf : curl_easy_strerror(t->code);
  curl_easy_cleanup(curl);
}

}  // namespace

struct HttpSource::Impl {
  uv_loop_t* loop = nullptr;
  HttpSourceOptions options;
  Sink sink;
  uv_timer_t poll_timer{};
  uv_work_t work{};
  Transfer transfer;
  bool in_flight = false;
  bool timer_open = false;
  bool stopped = false;
  std::atomic<bool> cancelled{false};
  bool have_bytes = false;
  std::string last_bytes;  // the previous 200 body, for the identical-bytes short-circuit

  void StartFetch();
  void OnFetched();
  void MaybeDelete() {
    if (stopped && !in_flight && !timer_open) delete this;
  }
};

void HttpSource::Impl::StartFetch() {
  transfer = Transfer{};
  transfer.url = options.url;
  transfer.timeout_ms = static_cast<long>(options.timeout.count());
  transfer.cancelled = &cancelled;
  work.data = this;
  in_flight = true;
  int rc = uv_queue_work(
      loop, &work, [](uv_work_t* w) { RunTransfer(&static_cast<Impl*>(w->data)->transfer); },
      [](uv_work_t* w, int) {
        auto* impl = static_cast<Impl*>(w->data);
        impl->in_flight = false;
        if (impl->stopped) {
          impl->MaybeDelete();
          return;
        }
        impl->OnFetched();
      });
  if (rc != 0) {
    in_flight = false;
    spdlog::error("manifest URL {}: cannot queue the fetch: {}", RedactedUrl(options.url),
                  uv_strerror(rc));
    OnFetched();
  }
}

void HttpSource::Impl::OnFetched() {
  const auto next = static_cast<uint64_t>(options.poll_interval.count());
  uv_timer_start(
      &poll_timer, [](uv_timer_t* t) { static_cast<Impl*>(t->data)->StartFetch(); }, next, 0);
  const Transfer& t = transfer;
  if (t.too_large) {
    spdlog::error("manifest URL {}: body larger than {} bytes; keeping the last pods",
                  RedactedUrl(t.url), kMaxBodyBytes);
    return;
  }
  if (t.code != CURLE_OK) {
    spdlog::error("manifest URL {}: {}; keeping the last pods", RedactedUrl(t.url), t.error);
    return;
  }
  if (t.http_status != 200) {
    spdlog::error("manifest URL {}: HTTP status {}; keeping the last pods", RedactedUrl(t.url),
                  t.http_status);
    return;
  }
  if (have_bytes && t.body == last_bytes) return;
  have_bytes = true;
  last_bytes = t.body;
  if (t.body.empty()) {
    spdlog::info("manifest URL {}: empty body; no pods from it", RedactedUrl(t.url));
    sink({});
    return;
  }
  base::Result<std::vector<kube::Pod>> pods =
      DecodeStaticPodsFromUrl(t.body, t.url, options.node_name);
  if (!pods.ok()) {
    spdlog::error("invalid manifest from URL, keeping the last pods: {}", pods.status().message());
    return;
  }
  spdlog::debug("manifest URL {}: {} pods", RedactedUrl(t.url), pods->size());
  sink(std::move(pods).value());
}

HttpSource::~HttpSource() { Stop(); }

base::Status HttpSource::Start(uv_loop_t* loop, HttpSourceOptions options, Sink sink) {
  if (impl_ != nullptr) return base::Status::Error("HTTP source: already started");
  if (options.node_name.empty()) return base::Status::Error("HTTP source: empty node name");
  if (!options.url.starts_with("http://") && !options.url.starts_with("https://")) {
    return base::Status::Error("manifest URL " + RedactedUrl(options.url) +
                               ": scheme must be http or https");
  }
  static std::once_flag curl_init;
  std::call_once(curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  auto* impl = new Impl;
  impl->loop = loop;
  impl->options = std::move(options);
  impl->sink = std::move(sink);
  uv_timer_init(loop, &impl->poll_timer);
  impl->poll_timer.data = impl;
  impl->timer_open = true;
  impl_ = impl;
  spdlog::info("HTTP pod source polling {} every {} ms", RedactedUrl(impl->options.url),
               impl->options.poll_interval.count());
  impl->StartFetch();
  return base::Status::OK();
}

void HttpSource::Stop() {
  if (impl_ == nullptr) return;
  Impl* impl = impl_;
  impl_ = nullptr;
  impl->stopped = true;
  impl->cancelled = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&impl->poll_timer), [](uv_handle_t* h) {
    auto* i = static_cast<Impl*>(h->data);
    i->timer_open = false;
    i->MaybeDelete();
  });
}

}  // namespace podconfig
