// An HTTP listener for tests of the reload actions: a thread accepts on a loopback address, each
// connection gets a thread of its own that records the request's head and answers with a fixed
// text (or, with an empty one, holds the connection until Release()). Its users link
// base_http_head (the head's end is found by base::ParseHttpRequestHead).
#ifndef VOLUMEMANAGER_TESTS_SUPPORT_HTTP_LISTENER_H_
#define VOLUMEMANAGER_TESTS_SUPPORT_HTTP_LISTENER_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/http_head.h"

namespace vmtest {

// A listener on a loopback address (127.0.0.1 unless told) that answers each connection from a
// thread of its own with `answer` (with `hold`, only once released; empty: closes without answering
// once released), and records each request's head.
class Listener {
 public:
  // `hold`: a non-empty answer is sent only after Release().
  explicit Listener(std::string answer, const char* address = "127.0.0.1", bool hold = false)
      : answer_(std::move(answer)), hold_(hold || answer_.empty()) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, address, &a.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 64);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Listener() {
    Release();
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (auto& t : workers_) t.join();
  }
  uint16_t port() const { return port_; }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }
  int max_open() const { return max_open_; }
  int connections() const { return connections_; }

 private:
  void Serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      workers_.emplace_back([this, c] { Handle(c); });
    }
  }
  void Handle(int c) {
    const int open = ++open_;
    int seen = max_open_;
    while (open > seen && !max_open_.compare_exchange_weak(seen, open)) {
    }
    std::string head;
    char buf[1024];
    base::HttpRequestHead parsed;
    std::string why;
    // Read to the end of the head (a bad one ends too: it is recorded as it came).
    while (base::ParseHttpRequestHead(head, &parsed, &why) == base::HttpHeadParse::kIncomplete) {
      ssize_t n = read(c, buf, sizeof(buf));
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    {
      std::unique_lock<std::mutex> l(mu_);
      requests_.push_back(head);
      if (hold_) cv_.wait(l, [this] { return released_; });
    }
    if (!answer_.empty()) {
      ssize_t w = write(c, answer_.data(), answer_.size());
      (void)w;
    }
    --open_;
    close(c);
  }

  std::string answer_;
  bool hold_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stop_{false};
  std::atomic<int> open_{0};
  std::atomic<int> max_open_{0};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<std::string> requests_;
};

}  // namespace vmtest

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_HTTP_LISTENER_H_
