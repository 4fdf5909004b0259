// BlockingApiClient: one API request at a time on a private libuv loop, for the work done before
// the daemon's loop runs or instead of it (`volumemanager preflight`, the identity look-up at
// start). Each call returns when the answer is in or the request timed out. Never used on the
// daemon's loop thread once that loop runs. Not thread-safe.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_BLOCKING_API_CLIENT_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_BLOCKING_API_CLIENT_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "kubeclient/api_client.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/transport/http_client.h"

namespace volumemanager {

class BlockingApiClient {
 public:
  // `timeout` bounds each request (and its connection); no transient retries, at most two
  // Retry-After waits of up to 2 s.
  BlockingApiClient(const kubeclient::Credentials& credentials, std::chrono::milliseconds timeout);
  ~BlockingApiClient();
  BlockingApiClient(const BlockingApiClient&) = delete;
  BlockingApiClient& operator=(const BlockingApiClient&) = delete;

  // Why the client could not be made (then every call must be skipped); empty when it was.
  const std::string& error() const { return error_; }

  kubeclient::ApiResult Call(
      const std::function<void(kubeclient::ApiClient&, kubeclient::ApiCallback)>& start);

  // Opens a watch and reports its status as soon as the headers arrive (then cancels it).
  kubeclient::ApiResult Watch(const std::string& path);

 private:
  uv_loop_t loop_;
  std::unique_ptr<kubeclient::HttpClient> http_;
  std::unique_ptr<kubeclient::ApiClient> api_;
  std::string error_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_BLOCKING_API_CLIENT_H_
