#include "tests/apiserver/test_apiserver_process.h"

#include <curl/curl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

extern char** environ;

namespace kube_testing {

TestApiServerProcess::~TestApiServerProcess() {
  Stop();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

void TestApiServerProcess::Stop() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
  if (pid_ > 0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }
}

base::Status TestApiServerProcess::Start(const std::string& token,
                                         const std::vector<std::string>& extra_args) {
  token_ = token;
  char tmpl[] = "/tmp/kube-test-apiserver-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return base::Status::Error("mkdtemp failed", errno);
  dir_ = tmpl;
  kubeconfig_ = dir_ + "/kubeconfig";
  int in_pipe[2], out_pipe[2];
  if (pipe(in_pipe) != 0 || pipe(out_pipe) != 0) return base::Status::Error("pipe", errno);
  std::vector<std::string> args = {
      "/usr/bin/python3", VM_TEST_APISERVER, "--listen", "127.0.0.1:0",          "--kubeconfig-out",
      kubeconfig_,        "--token",         token,      "--exit-on-stdin-close"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_addclose(&actions, in_pipe[1]);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  stdin_fd_ = in_pipe[1];
  if (rc != 0) return base::Status::Error("cannot start kube-test-apiserver", rc);
  FILE* out = fdopen(out_pipe[0], "r");
  char line[1024] = {0};
  bool got = fgets(line, sizeof(line), out) != nullptr;
  fclose(out);
  std::string text = got ? std::string(line) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.rfind("ready ", 0) != 0) {
    return base::Status::Error("kube-test-apiserver did not start: '" + text + "'");
  }
  url_ = text.substr(6);
  return base::Status::OK();
}

namespace {
size_t Append(char* data, size_t size, size_t count, void* userp) {
  static_cast<std::string*>(userp)->append(data, size * count);
  return size * count;
}
}  // namespace

HttpReply TestApiServerProcess::Call(const std::string& method, const std::string& path,
                                     const nlohmann::json& body, bool with_token) const {
  HttpReply reply;
  CURL* curl = curl_easy_init();
  std::string url = url_ + path;
  std::string payload = body.is_null() ? "" : body.dump();
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  if (with_token) headers = curl_slist_append(headers, ("Authorization: Bearer " + token_).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  std::string ca = ca_file();
  curl_easy_setopt(curl, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!payload.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.raw);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  if (curl_easy_perform(curl) == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.code);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  reply.body = nlohmann::json::parse(reply.raw, nullptr, false);
  if (reply.body.is_discarded()) reply.body = nullptr;
  return reply;
}

HttpReply TestApiServerProcess::Admin(const std::string& method, const std::string& command,
                                      const nlohmann::json& body) const {
  std::string prefix_free = "/_admin/" + command;
  return Call(method, prefix_free, body, false);
}

HttpReply TestApiServerProcess::Api(const std::string& method, const std::string& path,
                                    const nlohmann::json& body) const {
  return Call(method, path, body, true);
}

void TestApiServerProcess::RotateToken(const std::string& token) {
  Admin("POST", "rotate-token", {{"token", token}});
  token_ = token;
}

}  // namespace kube_testing
