// The floor under cluster mode's idle CPU: what one wake-up of a process costs on this machine,
// before it does anything with what woke it.
//
// An idle daemon in cluster mode is woken by each bookmark the API server sends on each of its
// watches (one a minute a watch: 16.7 a second for 1,000 watched objects). Whatever it does with a
// bookmark, it first returns from epoll_wait and reads the bytes; this bench measures that alone:
// a child process writes a 150-byte message (about a bookmark's TLS record) to a socket pair every
// `--interval-us`, and the parent, blocked in epoll_wait, wakes, reads it with recv, and reads
// again until EAGAIN (as a reader that does not know how much came must). The parent's CPU time
// (CLOCK_THREAD_CPUTIME_ID: user and system, the kernel's wake-up path included) over the
// messages is the cost of a wake-up; "without the EAGAIN read" is the same with one recv.
//
// Usage: build/bin/bench_wakeup [--messages N] [--interval-us U] [--rounds R]
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

constexpr size_t kMessageBytes = 150;

long long ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

// CPU microseconds per wake-up of one round.
double Round(int messages, int interval_us, bool read_until_eagain) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("socketpair");
    std::exit(1);
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (child == 0) {
    close(sv[0]);
    char message[kMessageBytes];
    std::memset(message, 'b', sizeof(message));
    for (int i = 0; i < messages; ++i) {
      usleep(static_cast<useconds_t>(interval_us));
      if (write(sv[1], message, sizeof(message)) != static_cast<ssize_t>(sizeof(message))) {
        _exit(1);
      }
    }
    _exit(0);
  }
  close(sv[1]);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = sv[0];
  epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
  std::vector<char> buffer(16384);
  size_t received = 0;
  int wakeups = 0;
  const long long start = ThreadCpuNs();
  while (received < static_cast<size_t>(messages) * kMessageBytes) {
    epoll_event out[8];
    if (epoll_wait(ep, out, 8, -1) <= 0) continue;
    ++wakeups;
    for (;;) {
      const ssize_t n = recv(sv[0], buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n <= 0) break;
      received += static_cast<size_t>(n);
      if (!read_until_eagain) break;
    }
  }
  const long long spent = ThreadCpuNs() - start;
  close(ep);
  close(sv[0]);
  waitpid(child, nullptr, 0);
  return spent / 1000.0 / std::max(wakeups, 1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int messages = 500;
  int interval_us = 10000;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--messages") {
      messages = value;
    } else if (flag == "--interval-us") {
      interval_us = value;
    } else if (flag == "--rounds") {
      rounds = value;
    } else {
      std::fprintf(stderr, "usage: %s [--messages N] [--interval-us U] [--rounds R]\n", argv[0]);
      return 2;
    }
  }
  if (messages <= 0 || interval_us < 0 || rounds <= 0) {
    std::fprintf(stderr, "--messages and --rounds must be positive\n");
    return 2;
  }
  std::vector<double> with_eagain;
  std::vector<double> without;
  for (int r = 0; r < rounds; ++r) {  // alternated, so that both see the same machine
    with_eagain.push_back(Round(messages, interval_us, true));
    without.push_back(Round(messages, interval_us, false));
  }
  auto show = [](const char* what, std::vector<double> v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const double median = Median(v);
    // 1,000 watches with a bookmark a minute each: 1000 / 60 wake-ups a second.
    std::printf("| %s | %.1f (%.1f-%.1f) | %.4f %% |\n", what, median, *lo, *hi,
                median * (1000.0 / 60.0) / 1e6 * 100.0);
  };
  std::printf(
      "# one wake-up: epoll_wait woken by a %zu-byte message; %d messages %d us apart, "
      "median of %d rounds (spread); load %.2f\n",
      kMessageBytes, messages, interval_us, rounds, [] {
        double load = 0;
        getloadavg(&load, 1);
        return load;
      }());
  std::printf(
      "| wake-up | CPU us | at 16.7 a second (1,000 watches, a bookmark a minute each) |\n");
  std::printf("|---|---:|---:|\n");
  show("epoll_wait, recv, recv until EAGAIN", with_eagain);
  show("epoll_wait, recv", without);
  return 0;
}
