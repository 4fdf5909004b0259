// TestApiServerProcess: runs tests/apiserver/kube-test-apiserver for a C++ test, on 127.0.0.1
// with port 0, and talks to it synchronously (the admin endpoint, plus API calls for test set-up)
// with blocking libcurl calls on the test's own thread.
//
// The server process gets a pipe as stdin and exits when it closes, so a crashed test never leaves
// it running; the destructor also waits for it (and kills it after 10 s).
#ifndef VOLUMEMANAGER_TESTS_APISERVER_TEST_APISERVER_PROCESS_H_
#define VOLUMEMANAGER_TESTS_APISERVER_TEST_APISERVER_PROCESS_H_

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace kube_testing {

struct HttpReply {
  long code = 0;
  nlohmann::json body;  // null when the body is not JSON
  std::string raw;
};

class TestApiServerProcess {
 public:
  TestApiServerProcess() = default;
  ~TestApiServerProcess();
  TestApiServerProcess(const TestApiServerProcess&) = delete;
  TestApiServerProcess& operator=(const TestApiServerProcess&) = delete;

  base::Status Start(const std::string& token = "test-token",
                     const std::vector<std::string>& extra_args = {});
  // Stops the server now (its port then refuses connections).
  void Stop();

  const std::string& url() const { return url_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return kubeconfig_ + ".pki/ca.crt"; }
  std::string pki(const std::string& name) const { return kubeconfig_ + ".pki/" + name; }
  const std::string& token() const { return token_; }

  // POST/GET/DELETE /_admin/<command>; aborts the test binary's expectations through the reply.
  HttpReply Admin(const std::string& method, const std::string& command,
                  const nlohmann::json& body = nullptr) const;
  // An API call with the current token, e.g. Api("POST", "/api/v1/namespaces/a/configmaps", cm).
  HttpReply Api(const std::string& method, const std::string& path,
                const nlohmann::json& body = nullptr) const;
  // Replaces the accepted token (the old one gets 401) and remembers it for Api().
  void RotateToken(const std::string& token);

 private:
  HttpReply Call(const std::string& method, const std::string& path, const nlohmann::json& body,
                 bool with_token) const;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  std::string dir_;
  std::string kubeconfig_;
  std::string url_;
  std::string token_;
};

}  // namespace kube_testing

#endif  // VOLUMEMANAGER_TESTS_APISERVER_TEST_APISERVER_PROCESS_H_
