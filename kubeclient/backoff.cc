#include "kubeclient/backoff.h"

#include <algorithm>

namespace kubeclient {

Backoff::Backoff(BackoffOptions options, Clock clock, std::function<double()> random01)
    : options_(options),
      clock_(clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); }),
      current_(options.initial) {
  if (random01) {
    random01_ = std::move(random01);
  } else {
    // One engine per thread for every Backoff on it (2.5 KiB of state each: the daemon holds two
    // Backoffs per watched object).
    random01_ = [] {
      thread_local std::mt19937_64 engine{std::random_device{}()};
      return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    };
  }
}

std::chrono::milliseconds Backoff::Next() {
  auto now = clock_();
  if (last_ && now - *last_ > options_.reset_after) current_ = options_.initial;
  last_ = now;
  auto base = current_;
  auto wait = base + std::chrono::milliseconds(static_cast<long long>(
                         static_cast<double>(base.count()) * options_.jitter * random01_()));
  current_ = std::min(options_.cap, std::chrono::milliseconds(static_cast<long long>(
                                        static_cast<double>(current_.count()) * options_.factor)));
  return wait;
}

void Backoff::Reset() {
  current_ = options_.initial;
  last_.reset();
}

}  // namespace kubeclient
