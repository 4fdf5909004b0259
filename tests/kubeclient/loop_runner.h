// LoopRunner: a libuv loop owned by a test, run until a condition holds or a deadline passes.
#ifndef VOLUMEMANAGER_TESTS_KUBECLIENT_LOOP_RUNNER_H_
#define VOLUMEMANAGER_TESTS_KUBECLIENT_LOOP_RUNNER_H_

#include <uv.h>

#include <chrono>
#include <functional>

namespace kube_testing {

class LoopRunner {
 public:
  LoopRunner() { uv_loop_init(&loop_); }
  ~LoopRunner() {
    // Let closing handles finish, then close the loop.
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }
  uv_loop_t* loop() { return &loop_; }

  // Runs the loop until `done()` or `timeout`; returns done().
  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    uv_timer_t tick;
    uv_timer_init(&loop_, &tick);
    uv_timer_start(
        &tick, [](uv_timer_t*) {}, 5, 5);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) uv_run(&loop_, UV_RUN_ONCE);
    uv_timer_stop(&tick);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    return done();
  }
  // Runs the loop for `duration` regardless.
  void RunFor(std::chrono::milliseconds duration) {
    auto end = std::chrono::steady_clock::now() + duration;
    RunUntil([&] { return std::chrono::steady_clock::now() >= end; }, duration * 2);
  }

 private:
  uv_loop_t loop_;
};

}  // namespace kube_testing

#endif  // VOLUMEMANAGER_TESTS_KUBECLIENT_LOOP_RUNNER_H_
