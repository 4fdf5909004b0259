// HttpSource: the static-pod source over --manifest-url, as the kubelet's HTTP source.
//
// The URL (http or https) is fetched at Start and then every `poll_interval` after the previous
// fetch ended, each fetch bounded by `timeout`. The body is a single Pod, a PodList or a v1 List
// of Pods, JSON or YAML (static_pod.h: deterministic UID from the content and the URL,
// "<name>-<node>" names). Outcomes:
//   * 200 with a body that decodes: the sink receives those pods (the source's complete state);
//   * 200 with the same bytes as the previous fetch: nothing (no decode, no sink call);
//   * 200 with an empty body: the sink receives no pods ("seen, no pods");
//   * a body that fails to decode or validate, another status, a timeout or a connection error:
//     logged (URL, object, field; never a value) and the last state stays.
// Redirects are followed (at most 10, http and https only). Bodies over 10 MiB are refused.
//
// Thread model: a loop-thread object. Start, Stop and the destructor run on the loop thread, and
// so do the transfers (kubeclient::HttpClient on the loop, no thread) and the sink. Stop ends a
// transfer in flight at once.
#ifndef VOLUMEMANAGER_PODCONFIG_HTTP_SOURCE_H_
#define VOLUMEMANAGER_PODCONFIG_HTTP_SOURCE_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/pod.h"
#include "podconfig/pod_update.h"

namespace podconfig {

struct HttpSourceOptions {
  std::string url;  // --manifest-url
  std::string node_name;
  std::chrono::milliseconds poll_interval{20'000};
  std::chrono::milliseconds timeout{10'000};
};

class HttpSource {
 public:
  using Sink = std::function<void(std::vector<PodPtr>)>;

  HttpSource() = default;
  ~HttpSource();
  HttpSource(const HttpSource&) = delete;
  HttpSource& operator=(const HttpSource&) = delete;

  // Starts the first fetch; the first sink call comes from the loop when it completes. Fails on
  // bad options (empty URL or node name, a scheme other than http:// or https://).
  base::Status Start(uv_loop_t* loop, HttpSourceOptions options, Sink sink);
  // Stops polling; no sink call happens after it returns. Idempotent. The loop must run on for
  // the source's handles to finish closing.
  void Stop();

 private:
  struct Impl;
  Impl* impl_ = nullptr;  // freed once its timer closed
};

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_HTTP_SOURCE_H_
