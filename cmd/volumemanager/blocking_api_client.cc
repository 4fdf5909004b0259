#include "cmd/volumemanager/blocking_api_client.h"

#include <optional>
#include <utility>

namespace kube {

BlockingApiClient::BlockingApiClient(const Credentials& credentials,
                                     std::chrono::milliseconds timeout) {
  uv_loop_init(&loop_);
  HttpClientOptions options;
  options.request_timeout = timeout;
  options.connect_timeout = timeout;
  options.native_http2 = true;  // the daemon's transport, used as the daemon will use it
  auto http = HttpClient::Create(&loop_, credentials, options);
  if (!http.ok()) {
    error_ = http.status().message();
    return;
  }
  http_ = std::move(*http);
  RetryPolicy policy;
  policy.max_retry_after = 2;
  policy.max_transient_retries = 0;
  policy.max_retry_after_wait = std::chrono::seconds(2);
  api_ = std::make_unique<ApiClient>(http_.get(), policy);
}

BlockingApiClient::~BlockingApiClient() {
  api_.reset();
  http_.reset();
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_loop_close(&loop_);
}

ApiResult BlockingApiClient::Call(const std::function<void(ApiClient&, ApiCallback)>& start) {
  std::optional<ApiResult> result;
  // uv_stop: the callback may run from a timer, after which uv_run would otherwise go on to
  // block in poll although the answer is already here.
  start(*api_, [&](ApiResult r) {
    result = std::move(r);
    uv_stop(&loop_);
  });
  while (!result) uv_run(&loop_, UV_RUN_ONCE);
  return std::move(*result);
}

ApiResult BlockingApiClient::Watch(const std::string& path) {
  std::optional<ApiResult> result;
  HttpRequest request;
  request.path = path;
  request.stream = true;
  HttpClient::RequestId id = 0;
  bool opened = false;
  id = http_->Start(
      request,
      [&](base::Status transport, HttpResponse response) {
        if (!transport.ok()) {
          result = ApiResult{TransportError(transport.message(), response.fault), nullptr};
        } else if (response.status >= 200 && response.status < 300) {
          result = ApiResult{std::nullopt, nullptr};
        } else {
          result =
              ApiResult{ParseApiError(response.status, response.headers, response.body), nullptr};
        }
        uv_stop(&loop_);
      },
      {[&](const HttpResponse& head) {
         opened = head.status >= 200 && head.status < 300;
         uv_stop(&loop_);
       },
       nullptr});
  while (!result && !opened) uv_run(&loop_, UV_RUN_ONCE);
  if (!result) {
    http_->Cancel(id);
    result = ApiResult{std::nullopt, nullptr};
  }
  return std::move(*result);
}

}  // namespace kube
