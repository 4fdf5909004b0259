#include "cmd/volumemanager/json_log_formatter.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/rfc3339.h"
#include "logging/structured_log.h"

namespace volumemanager {
namespace {

// A bare value of a structured line: an integer or a boolean (ParseStructuredLine checked that).
nlohmann::ordered_json BareValue(const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  errno = 0;
  char* end = nullptr;
  if (v[0] == '-') {
    const long long i = std::strtoll(v.c_str(), &end, 10);
    if (errno == 0 && *end == '\0') return i;
  } else {
    const unsigned long long u = std::strtoull(v.c_str(), &end, 10);
    if (errno == 0 && *end == '\0') return u;
  }
  return v;  // out of range: kept as its digits
}

}  // namespace

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  char ts[base::kRfc3339MaxSize];
  const size_t n = base::FormatRfc3339To(msg.time, 6, ts);

  nlohmann::ordered_json j;
  j["ts"] = std::string(ts, n);
  const auto level = spdlog::level::to_string_view(msg.level);
  j["level"] = std::string(level.data(), level.size());
  const std::string_view payload(msg.payload.data(), msg.payload.size());
  if (std::optional<logging::ParsedLine> parsed = logging::ParseStructuredLine(payload)) {
    j["msg"] = std::move(parsed->msg);
    for (logging::ParsedField& f : parsed->fields) {
      if (j.contains(f.key)) continue;  // the first of a repeated key wins
      j[f.key] = f.quoted ? nlohmann::ordered_json(std::move(f.value)) : BareValue(f.value);
    }
  } else {
    j["msg"] = std::string(payload);
  }
  const std::string line =
      j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace volumemanager
