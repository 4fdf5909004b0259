// RateLimiter: the client-side token bucket that client-go puts in front of every request
// (flowcontrol.NewTokenBucketRateLimiter, over golang.org/x/time/rate): the bucket starts full
// with `burst` tokens and refills at `qps` tokens per second up to `burst`; each request takes one
// token, and requests that find the bucket empty wait their turn in arrival order.
//
// Waits run on a libuv timer: Acquire never blocks the loop. `go` runs on the loop thread, either
// inside Acquire (a token was free and nobody was waiting) or later from the timer; never after
// Cancel of its ticket or after the limiter is destroyed. qps <= 0 means no limit (every Acquire
// runs `go` at once). Not thread-safe.
#ifndef VOLUMEMANAGER_KUBECLIENT_RATE_LIMITER_H_
#define VOLUMEMANAGER_KUBECLIENT_RATE_LIMITER_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

namespace kubeclient {

struct RateLimiterOptions {
  // Tokens per second; <= 0: no limit.
  double qps = 0;
  // Bucket size (at least 1 when limited).
  int burst = 1;
  // Time source; steady_clock::now when empty (tests inject a fake clock).
  std::function<std::chrono::steady_clock::time_point()> clock;
};

// The limits a client-go rest.Config with these QPS and Burst gets: QPS 0 means client-go's
// DefaultQPS (5) and Burst 0 its DefaultBurst (10); a negative QPS means no limiter at all. The
// kubelet passes --kube-api-qps (default 50) and --kube-api-burst (default 100) this way.
RateLimiterOptions ClientGoRateLimits(double qps, int burst);

class RateLimiter {
 public:
  using Ticket = std::uint64_t;

  RateLimiter(uv_loop_t* loop, RateLimiterOptions options);
  ~RateLimiter();
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Runs `go` once a token is available. Returns 0 when `go` already ran, else a ticket for
  // Cancel. An exception from `go` is logged and swallowed (a timer callback is a wall).
  Ticket Acquire(std::function<void()> go);
  // `go` of that ticket will not run. Unknown or finished tickets are ignored.
  void Cancel(Ticket ticket);

  // New limits for a running limiter (dynamic config): tokens earned so far are kept, up to the
  // new burst; waiters are served at the new rate (all at once when no longer limited).
  void SetLimits(double qps, int burst);

  bool limited() const { return options_.qps > 0; }
  // Requests waiting for a token now.
  size_t waiting() const { return queue_.size(); }
  const RateLimiterOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiter {
    Ticket ticket;
    std::function<void()> go;
  };

  Clock::time_point Now() const;
  // Adds the tokens earned since the last refill.
  void Refill();
  // Runs the waiters the bucket can serve now, then arms the timer for the next one.
  void Drain();
  void ArmTimer();
  uint64_t WaitMs() const;
  void StartTimer(uint64_t ms);

  RateLimiterOptions options_;
  uv_timer_t* timer_ = nullptr;  // heap: closed asynchronously
  double tokens_;
  Clock::time_point refilled_at_;
  std::deque<Waiter> queue_;
  Ticket next_ticket_ = 1;
  std::shared_ptr<bool> alive_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_RATE_LIMITER_H_
