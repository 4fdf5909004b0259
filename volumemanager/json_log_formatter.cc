#include "volumemanager/json_log_formatter.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

namespace volumemanager {

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const auto since_epoch = msg.time.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(since_epoch - secs).count();
  const std::time_t t = secs.count();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[40];
  const size_t n = std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(ts + n, sizeof(ts) - n, ".%06lldZ", static_cast<long long>(micros));

  nlohmann::json j;
  j["ts"] = ts;
  const auto level = spdlog::level::to_string_view(msg.level);
  j["level"] = std::string(level.data(), level.size());
  j["msg"] = std::string(msg.payload.data(), msg.payload.size());
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace volumemanager
