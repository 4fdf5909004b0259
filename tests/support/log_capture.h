// LogCapture: while it lives, spdlog's default logger writes every level into a string the test
// can read (to check what a module logs, and that it never logs a value it must not).
#ifndef VOLUMEMANAGER_TESTS_SUPPORT_LOG_CAPTURE_H_
#define VOLUMEMANAGER_TESTS_SUPPORT_LOG_CAPTURE_H_

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace vmtest {

class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_));
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() const { return log_.str(); }

 private:
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace vmtest

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_LOG_CAPTURE_H_
