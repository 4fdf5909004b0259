#include "kubeclient/rate_limiter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "base/catch_all.h"
#include "base/uv_timer.h"

namespace kubeclient {

RateLimiterOptions ClientGoRateLimits(double qps, int burst) {
  RateLimiterOptions options;
  options.qps = qps == 0 ? 5.0 : qps;       // rest.DefaultQPS
  options.burst = burst == 0 ? 10 : burst;  // rest.DefaultBurst
  if (options.qps < 0) options.qps = 0;     // no limiter
  return options;
}

RateLimiter::RateLimiter(uv_loop_t* loop, RateLimiterOptions options)
    : options_(std::move(options)), alive_(std::make_shared<bool>(true)) {
  options_.burst = std::max(1, options_.burst);
  tokens_ = options_.burst;
  refilled_at_ = Now();
  timer_ = base::NewTimer(loop, this);
}

RateLimiter::~RateLimiter() {
  *alive_ = false;
  base::CloseTimer(timer_);
}

RateLimiter::Clock::time_point RateLimiter::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

void RateLimiter::Refill() {
  const Clock::time_point now = Now();
  if (now <= refilled_at_) return;
  const double seconds = std::chrono::duration<double>(now - refilled_at_).count();
  tokens_ = std::min<double>(options_.burst, tokens_ + seconds * options_.qps);
  refilled_at_ = now;
}

RateLimiter::Ticket RateLimiter::Acquire(std::function<void()> go) {
  if (!limited()) {
    go();
    return 0;
  }
  if (queue_.empty()) {
    Refill();
    if (tokens_ >= 1) {
      tokens_ -= 1;
      go();
      return 0;
    }
  }
  const Ticket ticket = next_ticket_++;
  queue_.push_back(Waiter{ticket, std::move(go)});
  if (queue_.size() == 1) ArmTimer();
  return ticket;
}

void RateLimiter::Cancel(Ticket ticket) {
  if (ticket == 0) return;
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [ticket](const Waiter& w) { return w.ticket == ticket; });
  if (it == queue_.end()) return;
  queue_.erase(it);
  if (queue_.empty()) uv_timer_stop(timer_);
}

void RateLimiter::Drain() {
  std::shared_ptr<bool> alive = alive_;
  Refill();
  while (!queue_.empty() && (!limited() || tokens_ >= 1)) {
    if (limited()) tokens_ -= 1;
    std::function<void()> go = std::move(queue_.front().go);
    queue_.pop_front();
    base::Status s = base::CatchAll("rate-limited request", go);
    if (!*alive) return;  // `go` destroyed the limiter's owner
    if (!s.ok()) spdlog::error("{}", s.message());
    Refill();
  }
  if (!queue_.empty()) ArmTimer();
}

void RateLimiter::SetLimits(double qps, int burst) {
  if (limited()) Refill();
  options_.qps = qps;
  options_.burst = std::max(1, burst);
  tokens_ = std::min<double>(tokens_, options_.burst);
  refilled_at_ = Now();
  if (queue_.empty()) return;
  // From the timer, as no caller expects a `go` to run inside this call.
  StartTimer(limited() ? WaitMs() : 0);
}

uint64_t RateLimiter::WaitMs() const {
  // The wait until the bucket holds one whole token again (at least 1 ms: libuv's resolution).
  const double missing = std::max(0.0, 1.0 - tokens_);
  return static_cast<uint64_t>(std::max(1.0, std::ceil(missing * 1000.0 / options_.qps)));
}

void RateLimiter::ArmTimer() { StartTimer(WaitMs()); }

void RateLimiter::StartTimer(uint64_t ms) {
  uv_timer_start(
      timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<RateLimiter*>(t->data);
        base::Status s = base::CatchAll("rate limiter timer", [self] { self->Drain(); });
        if (!s.ok()) spdlog::error("{}", s.message());
      },
      ms, 0);
}

}  // namespace kubeclient
