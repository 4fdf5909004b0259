// The applications of bench/reload_bench.py, in one process and at little CPU cost: listens on
// PORT at each address given (one per pod), answers every request head with 200 and closes, and
// prints "<address index> <CLOCK_MONOTONIC ns>" for each arrival (stdout, a line each, flushed).
// A head that is not HTTP/1.x (base::ParseHttpRequestHead) is not answered: the connection closes.
//
// Usage: reload_listener PORT ADDRESS...
// Prints "ready" once every listener is bound. Runs until stdin closes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/http_head.h"

namespace {

struct Conn {
  int index = 0;  // the address it came to
  std::string head;
};

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: reload_listener PORT ADDRESS...\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  std::unordered_map<int, int> listeners;  // fd -> address index
  for (int i = 2; i < argc; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, argv[i], &a.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 128) != 0) {
      std::fprintf(stderr, "reload_listener: %s:%d: %s\n", argv[i], port, std::strerror(errno));
      return 1;
    }
    listeners[fd] = i - 2;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  epoll_event in{};
  in.events = EPOLLIN;
  in.data.fd = 0;
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in);
  std::printf("ready\n");
  std::fflush(stdout);

  std::unordered_map<int, Conn> conns;
  static const char kAnswer[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  std::vector<epoll_event> events(256);
  for (;;) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 1;
    for (int e = 0; e < n; ++e) {
      const int fd = events[e].data.fd;
      if (fd == 0) {
        char buf[64];
        if (read(0, buf, sizeof(buf)) <= 0) return 0;  // the bench is done
        continue;
      }
      if (auto l = listeners.find(fd); l != listeners.end()) {
        for (;;) {
          const int c = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          conns[c].index = l->second;
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
        }
        continue;
      }
      Conn& conn = conns[fd];
      char buf[4096];
      const ssize_t got = read(fd, buf, sizeof(buf));
      if (got > 0) conn.head.append(buf, static_cast<size_t>(got));
      base::HttpRequestHead head;
      std::string why;
      const base::HttpHeadParse parsed =
          got > 0 ? base::ParseHttpRequestHead(conn.head, &head, &why) : base::HttpHeadParse::kBad;
      if (parsed == base::HttpHeadParse::kIncomplete) continue;
      if (parsed == base::HttpHeadParse::kComplete) {
        std::printf("%d %lld\n", conn.index, static_cast<long long>(NowNs()));
        std::fflush(stdout);
        const ssize_t w = write(fd, kAnswer, sizeof(kAnswer) - 1);
        (void)w;
      }
      epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
      close(fd);
      conns.erase(fd);
    }
  }
}
