// Test support shared by unit tests of loop-thread modules (podconfig/, cache/, ...): a libuv
// loop that runs until a condition holds, temporary directories, and file writes as editors do
// them.
#ifndef VOLUMEMANAGER_TESTS_SUPPORT_TEST_LOOP_H_
#define VOLUMEMANAGER_TESTS_SUPPORT_TEST_LOOP_H_

#include <stdlib.h>
#include <uv.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace vmtest {

class TestLoop {
 public:
  TestLoop() { uv_loop_init(&loop_); }
  ~TestLoop() { Close(); }
  uv_loop_t* get() { return &loop_; }

  // Runs the loop until nothing is left to do (closing handles finish) and closes it. False when
  // a handle was left open: the code under test leaked one. Idempotent.
  bool Close() {
    if (closed_) return true;
    uv_run(&loop_, UV_RUN_DEFAULT);
    closed_ = uv_loop_close(&loop_) == 0;
    return closed_;
  }

  // Runs the loop until `done` holds or `limit` passed (an upper bound against hangs, not a
  // timing assertion). Returns done().
  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    uv_timer_t tick;
    uv_timer_init(&loop_, &tick);
    uv_timer_start(
        &tick, [](uv_timer_t*) {}, 5, 5);
    while (!done() && std::chrono::steady_clock::now() < deadline) uv_run(&loop_, UV_RUN_ONCE);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    return done();
  }

  // Calls `step(0)` .. `step(count - 1)` from a timer `gap` apart while the loop runs, so the
  // events of each step reach the loop's handlers before the next step, as in a real burst; returns
  // after the last step.
  void RunSteps(int count, std::chrono::milliseconds gap, const std::function<void(int)>& step) {
    struct Steps {
      int next = 0;
      int count;
      const std::function<void(int)>* step;
    } steps{0, count, &step};
    uv_timer_t timer;
    uv_timer_init(&loop_, &timer);
    timer.data = &steps;
    const auto every = static_cast<uint64_t>(gap.count());
    uv_timer_start(
        &timer,
        [](uv_timer_t* t) {
          auto* s = static_cast<Steps*>(t->data);
          if (s->next < s->count) (*s->step)(s->next++);
        },
        0, every == 0 ? 1 : every);
    while (steps.next < count) uv_run(&loop_, UV_RUN_ONCE);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
  }

  // Runs the loop until it has nothing left to do (no active handle or request, nothing closing)
  // or `limit` passed. Returns whether it ran out of work.
  bool RunUntilIdle(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    uv_timer_t tick;  // wakes the loop to check the deadline without keeping it alive
    uv_timer_init(&loop_, &tick);
    uv_timer_start(
        &tick, [](uv_timer_t*) {}, 5, 5);
    uv_unref(reinterpret_cast<uv_handle_t*>(&tick));
    while (uv_loop_alive(&loop_) && std::chrono::steady_clock::now() < deadline) {
      uv_run(&loop_, UV_RUN_ONCE);
    }
    const bool idle = !uv_loop_alive(&loop_);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    return idle;
  }

  // Runs the loop for `d` (to show that nothing happens).
  void RunFor(std::chrono::milliseconds d) {
    RunUntil([] { return false; }, d);
  }

 private:
  uv_loop_t loop_;
  bool closed_ = false;
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "vm-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The whole file ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes a temporary file beside `path` and renames it over `path`, as editors and kubectl cp do.
inline void ReplaceFile(const std::string& path, const std::string& bytes) {
  WriteFile(path + ".tmp~", bytes);
  std::filesystem::rename(path + ".tmp~", path);
}

}  // namespace vmtest

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_TEST_LOOP_H_
