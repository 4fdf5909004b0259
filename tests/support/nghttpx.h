// Loopback helpers for tests and benches that need a port or an HTTP/2 front: a free port on
// 127.0.0.1, a wait until something listens there, and nghttpx (Debian nghttp2-proxy) as the TLS
// + HTTP/2 front of tests/apiserver/kube-test-apiserver, run as bench/cluster_bench.py runs it.
#ifndef VOLUMEMANAGER_TESTS_SUPPORT_NGHTTPX_H_
#define VOLUMEMANAGER_TESTS_SUPPORT_NGHTTPX_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/apiserver/test_apiserver_process.h"

extern char** environ;

namespace vmtest {

// A port on 127.0.0.1 that was free a moment ago.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Whether something accepts connections on 127.0.0.1:`port` within 10 s.
inline bool Listening(int port) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// nghttpx on 127.0.0.1 in front of the test server: TLS + HTTP/2 with the test PKI's server
// certificate, at most 100 streams per connection, one worker, HTTP/1.1 + TLS to the backend,
// read timeouts of an hour so idle watches stay open. Stopped (SIGTERM) when destroyed.
class Nghttpx {
 public:
  explicit Nghttpx(const kube_testing::TestApiServerProcess& backend) : port_(FreePort()) {
    const std::string url = backend.url();
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    std::vector<std::string> args = {
        "/usr/sbin/nghttpx",
        "--conf=/dev/null",
        "--frontend=127.0.0.1," + std::to_string(port_),
        "--backend=127.0.0.1," + url.substr(url.rfind(':') + 1) + ";;tls",
        "--insecure",
        "--workers=1",
        "--frontend-http2-max-concurrent-streams=100",
        "--backend-read-timeout=1h",
        "--frontend-http2-read-timeout=1h",
        "--backend-write-timeout=1h",
        "--backend-connect-timeout=1m",
        "--rlimit-nofile=" + std::to_string(limit.rlim_max),
        "--log-level=WARN",
        "--no-ocsp",
        "--errorlog-file=/dev/null",
        backend.pki("server.key"),
        backend.pki("server.crt")};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Quiet: it prints a notice before it reads --errorlog-file.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Nghttpx() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  Nghttpx(const Nghttpx&) = delete;
  Nghttpx& operator=(const Nghttpx&) = delete;

  int port() const { return port_; }
  // Whether it accepts connections within 10 s.
  bool Listening() const { return pid_ > 0 && vmtest::Listening(port_); }

 private:
  int port_;
  pid_t pid_ = -1;
};

}  // namespace vmtest

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_NGHTTPX_H_
