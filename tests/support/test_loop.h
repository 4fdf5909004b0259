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
#include <string>

namespace vmtest {

class TestLoop {
 public:
  TestLoop() { uv_loop_init(&loop_); }
  ~TestLoop() {
    uv_run(&loop_, UV_RUN_DEFAULT);  // lets closed handles finish
    uv_loop_close(&loop_);
  }
  uv_loop_t* get() { return &loop_; }

  // Runs the loop until `done` holds or `limit` passed (an upper bound against hangs, not a
  // timing assertion). Returns done().
  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
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

  // Runs the loop for `d` (to show that nothing happens).
  void RunFor(std::chrono::milliseconds d) {
    RunUntil([] { return false; }, d);
  }

 private:
  uv_loop_t loop_;
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

// Writes a temporary file beside `path` and renames it over `path`, as editors and kubectl cp do.
inline void ReplaceFile(const std::string& path, const std::string& bytes) {
  WriteFile(path + ".tmp~", bytes);
  std::filesystem::rename(path + ".tmp~", path);
}

}  // namespace vmtest

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_TEST_LOOP_H_
