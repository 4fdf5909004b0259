// Backoff: client-go's wait.Backoff as the reflector uses it: each Next() returns a wait in
// [d, d + jitter*d) and then doubles d (factor) up to the cap; after `reset_after` without a
// Next() the delay starts again from `initial` (docs/kubernetes-api.md §4.7: 800 ms, x2,
// cap 30 s, jitter 1.0, reset after 2 min). Single-threaded; the clock and random source are
// injectable for tests.
#ifndef VOLUMEMANAGER_KUBECLIENT_BACKOFF_H_
#define VOLUMEMANAGER_KUBECLIENT_BACKOFF_H_

#include <chrono>
#include <functional>
#include <optional>
#include <random>

namespace kubeclient {

struct BackoffOptions {
  std::chrono::milliseconds initial{800};
  double factor = 2.0;
  std::chrono::milliseconds cap{30000};
  double jitter = 1.0;
  std::chrono::milliseconds reset_after{120000};
};

class Backoff {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `random01` returns values in [0, 1).
  explicit Backoff(BackoffOptions options = {}, Clock clock = nullptr,
                   std::function<double()> random01 = nullptr);

  std::chrono::milliseconds Next();
  void Reset();
  const BackoffOptions& options() const { return options_; }

 private:
  BackoffOptions options_;
  Clock clock_;
  std::function<double()> random01_;
  std::chrono::milliseconds current_;
  std::optional<std::chrono::steady_clock::time_point> last_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_BACKOFF_H_
