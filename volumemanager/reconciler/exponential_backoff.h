// ExponentialBackoff: the kubelet's per-operation retry delay (docs/kubelet-behavior.md §6.5): 500
// ms after the first failure, doubling with each consecutive failure, capped at 2 min 2 s; success
// resets it. A plain value, no clock of its own: callers pass the time.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_EXPONENTIAL_BACKOFF_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_EXPONENTIAL_BACKOFF_H_

#include <chrono>

namespace volumemanager {

class ExponentialBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kInitial{500};
  static constexpr std::chrono::milliseconds kMax{122000};

  // Records a failure at `now`; returns the delay before the next attempt.
  std::chrono::milliseconds RecordFailure(Clock::time_point now) {
    delay_ = delay_.count() == 0 ? kInitial : std::min(delay_ * 2, kMax);
    retry_at_ = now + delay_;
    return delay_;
  }
  void Reset() {
    delay_ = std::chrono::milliseconds{0};
    retry_at_ = Clock::time_point{};
  }
  // Ends the current wait but keeps the delay: the input that failed changed, so the next attempt
  // may run at once; should it fail again, the delay still grows.
  void AllowNow() { retry_at_ = Clock::time_point{}; }
  // True when no failure is being waited out at `now`.
  bool Ready(Clock::time_point now) const { return now >= retry_at_; }
  Clock::time_point retry_at() const { return retry_at_; }
  std::chrono::milliseconds delay() const { return delay_; }

 private:
  std::chrono::milliseconds delay_{0};
  Clock::time_point retry_at_{};
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_EXPONENTIAL_BACKOFF_H_
