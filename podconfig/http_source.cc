#include "podconfig/http_source.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <utility>

#include "base/catch_all.h"
#include "base/redacted_url.h"
#include "kubeclient/transport/http_client.h"
#include "podconfig/static_pod.h"

namespace podconfig {
namespace {

constexpr size_t kMaxBodyBytes = 10 << 20;

}  // namespace

struct HttpSource::Impl {
  HttpSourceOptions options;
  Sink sink;
  std::unique_ptr<kubeclient::HttpClient> http;   // destroyed with the Impl, outside its callbacks
  kubeclient::HttpClient::RequestId request = 0;  // the fetch in flight, if any
  bool stopped = false;
  uv_timer_t poll_timer{};
  bool have_bytes = false;
  std::string last_bytes;  // the previous 200 body, for the identical-bytes short-circuit

  void StartFetch();
  void OnFetched(const base::Status& transport, const kubeclient::HttpResponse& response);
  void FetchLater();
};

void HttpSource::Impl::FetchLater() {
  if (stopped) return;  // the timer is closing
  uv_timer_start(
      &poll_timer,
      [](uv_timer_t* t) {
        auto* impl = static_cast<Impl*>(t->data);
        if (base::Status s = base::CatchAll("manifest URL fetch", [impl] { impl->StartFetch(); });
            !s.ok()) {
          spdlog::error("manifest URL {}: {}", base::RedactedUrl(impl->options.url), s.message());
          impl->FetchLater();
        }
      },
      static_cast<uint64_t>(options.poll_interval.count()), 0);
}

void HttpSource::Impl::StartFetch() {
  kubeclient::HttpRequest fetch;
  fetch.accept.clear();  // a manifest may be JSON or YAML
  fetch.follow_redirects = true;
  fetch.max_body_bytes = kMaxBodyBytes;
  fetch.timeout = options.timeout;
  request = http->Start(std::move(fetch),
                        [this](base::Status transport, kubeclient::HttpResponse response) {
                          request = 0;
                          FetchLater();  // first: whatever happens below, polling goes on
                          OnFetched(transport, response);
                        });
}

void HttpSource::Impl::OnFetched(const base::Status& transport,
                                 const kubeclient::HttpResponse& response) {
  const std::string shown = base::RedactedUrl(options.url);
  if (!transport.ok()) {
    spdlog::error("manifest URL {}: {}; keeping the last pods", shown, transport.message());
    return;
  }
  if (response.status != 200) {
    spdlog::error("manifest URL {}: HTTP status {}; keeping the last pods", shown, response.status);
    return;
  }
  if (have_bytes && response.body == last_bytes) return;
  have_bytes = true;
  last_bytes = response.body;
  if (response.body.empty()) {
    spdlog::info("manifest URL {}: empty body; no pods from it", shown);
    sink({});
    return;
  }
  base::Result<std::vector<kube::Pod>> pods =
      DecodeStaticPodsFromUrl(response.body, options.url, options.node_name);
  if (!pods.ok()) {
    spdlog::error("invalid manifest from URL, keeping the last pods: {}", pods.status().message());
    return;
  }
  spdlog::debug("manifest URL {}: {} pods", shown, pods->size());
  std::vector<PodPtr> out;
  for (kube::Pod& pod : *pods) {
    pod.metadata.annotations[kConfigSourceAnnotation] = kHttpSource;  // PodConfig keeps it as is
    out.push_back(std::make_shared<const kube::Pod>(std::move(pod)));
  }
  sink(std::move(out));
}

HttpSource::~HttpSource() { Stop(); }

base::Status HttpSource::Start(uv_loop_t* loop, HttpSourceOptions options, Sink sink) {
  if (impl_ != nullptr) return base::Status::Error("HTTP source: already started");
  if (options.node_name.empty()) return base::Status::Error("HTTP source: empty node name");
  if (!options.url.starts_with("http://") && !options.url.starts_with("https://")) {
    return base::Status::Error("manifest URL " + base::RedactedUrl(options.url) +
                               ": scheme must be http or https");
  }
  kubeclient::Credentials server;  // no token, no client certificate, the system's CAs
  server.server = options.url;
  server.source = "--manifest-url";
  auto http = kubeclient::HttpClient::Create(loop, server);
  if (!http.ok()) {  // its message would show the URL as given, credentials included
    return base::Status::Error("manifest URL " + base::RedactedUrl(options.url) +
                               ": not an http(s)://host URL, or libcurl cannot start");
  }
  auto* impl = new Impl;
  impl->options = std::move(options);
  impl->sink = std::move(sink);
  impl->http = std::move(*http);
  uv_timer_init(loop, &impl->poll_timer);
  impl->poll_timer.data = impl;
  impl_ = impl;
  spdlog::info("HTTP pod source polling {} every {} ms", base::RedactedUrl(impl->options.url),
               impl->options.poll_interval.count());
  impl->StartFetch();
  return base::Status::OK();
}

void HttpSource::Stop() {
  if (impl_ == nullptr) return;
  Impl* impl = impl_;
  impl_ = nullptr;
  impl->stopped = true;
  // No callback of the fetch runs after Cancel, which is safe inside the client's callbacks (the
  // sink may stop the source); the client itself goes with the Impl, on a later loop iteration.
  if (impl->request != 0) impl->http->Cancel(impl->request);
  uv_close(reinterpret_cast<uv_handle_t*>(&impl->poll_timer),
           [](uv_handle_t* h) { delete static_cast<Impl*>(h->data); });
}

}  // namespace podconfig
