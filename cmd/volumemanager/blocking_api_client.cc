#include "cmd/volumemanager/blocking_api_client.h"

#include <optional>
#include <utility>

namespace volumemanager {

BlockingApiClient::BlockingApiClient(const kubeclient::Credentials& credentials,
                                     std::chrono::milliseconds timeout) {
  uv_loop_init(&loop_);
  kubeclient::HttpClientOptions options;
  options.request_timeout = timeout;
  options.connect_timeout = timeout;
  options.native_http2 = true;  // the daemon's transport, used as the daemon will use it
  auto http = kubeclient::HttpClient::Create(&loop_, credentials, options);
  if (!http.ok()) {
    error_ = http.status().message();
    return;
  }
  http_ = std::move(*http);
  kubeclient::RetryPolicy policy;
  policy.max_retry_after = 2;
  policy.max_transient_retries = 0;
  policy.max_retry_after_wait = std::chrono::seconds(2);
  api_ = std::make_unique<kubeclient::ApiClient>(http_.get(), policy);
}

BlockingApiClient::~BlockingApiClient() {
  api_.reset();
  http_.reset();
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_loop_close(&loop_);
}

kubeclient::ApiResult BlockingApiClient::Call(
    const std::function<void(kubeclient::ApiClient&, kubeclient::ApiCallback)>& start) {
  std::optional<kubeclient::ApiResult> result;
  // uv_stop: the callback may run from a timer, after which uv_run would otherwise go on to
  // block in poll although the answer is already here.
  start(*api_, [&](kubeclient::ApiResult r) {
    result = std::move(r);
    uv_stop(&loop_);
  });
  while (!result) uv_run(&loop_, UV_RUN_ONCE);
  return std::move(*result);
}

kubeclient::ApiResult BlockingApiClient::Watch(const std::string& path) {
  std::optional<kubeclient::ApiResult> result;
  kubeclient::HttpRequest request;
  request.path = path;
  request.stream = true;
  kubeclient::HttpClient::RequestId id = 0;
  bool opened = false;
  id = http_->Start(
      request,
      [&](base::Status transport, kubeclient::HttpResponse response) {
        if (!transport.ok()) {
          result = kubeclient::ApiResult{
              kubeclient::TransportError(transport.message(), response.fault), nullptr};
        } else if (response.status >= 200 && response.status < 300) {
          result = kubeclient::ApiResult{std::nullopt, nullptr};
        } else {
          result = kubeclient::ApiResult{
              kubeclient::ParseApiError(response.status, response.headers, response.body), nullptr};
        }
        uv_stop(&loop_);
      },
      {[&](const kubeclient::HttpResponse& head) {
         opened = head.status >= 200 && head.status < 300;
         uv_stop(&loop_);
       },
       nullptr});
  while (!result && !opened) uv_run(&loop_, UV_RUN_ONCE);
  if (!result) {
    http_->Cancel(id);
    result = kubeclient::ApiResult{std::nullopt, nullptr};
  }
  return std::move(*result);
}

}  // namespace volumemanager
