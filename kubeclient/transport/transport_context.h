// TransportContext: what a transport takes from the HttpClient in front of it: the loop, the
// server's credentials, the bearer token, the CA and client certificate current when a request or
// connection starts (the client's, which follow their files and the exec plugin), and the options
// both transports share.
#ifndef VOLUMEMANAGER_KUBECLIENT_TRANSPORT_TRANSPORT_CONTEXT_H_
#define VOLUMEMANAGER_KUBECLIENT_TRANSPORT_TRANSPORT_CONTEXT_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "kubeclient/auth/client_cert_source.h"
#include "kubeclient/auth/credentials.h"
#include "kubeclient/auth/token_source.h"

namespace kubeclient {

struct TransportContext {
  uv_loop_t* loop = nullptr;
  // Both outlive the transport (the HttpClient's).
  const Credentials* credentials = nullptr;
  TokenSource* tokens = nullptr;
  // The CA to verify a new connection against (empty: the system's roots), and the client
  // certificate to present (null: none).
  std::function<std::shared_ptr<const std::string>()> current_ca;
  std::function<std::shared_ptr<const ClientCertPair>()> current_cert;
  std::chrono::milliseconds connect_timeout{10000};
  // Total time for a non-streaming request that sets no timeout of its own.
  std::chrono::milliseconds request_timeout{60000};
  long max_streams_per_connection = 100;
  std::string user_agent;
  // Fault injection for tests: called at the start of every callback body of the loop's and the
  // HTTP library's with the callback's name; it may throw.
  std::function<void(const char* callback)> callback_fault;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_TRANSPORT_TRANSPORT_CONTEXT_H_
