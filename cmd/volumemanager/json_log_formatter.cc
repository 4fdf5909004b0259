#include "cmd/volumemanager/json_log_formatter.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/rfc3339.h"
#include "logging/structured_log.h"

namespace volumemanager {
namespace {

// A field's value as JSON: integers and booleans as numbers and booleans, names as strings.
nlohmann::ordered_json JsonValue(const logging::Value& v) {
  switch (v.type()) {
    case logging::Value::Type::kInt:
      return v.int_value();
    case logging::Value::Type::kUint:
      return v.uint_value();
    case logging::Value::Type::kBool:
      return v.uint_value() != 0;
    case logging::Value::Type::kString:
    case logging::Value::Type::kPath:
    case logging::Value::Type::kAbsent:
      break;
  }
  return logging::StringValue(v);
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
  // The structured line's own fields (set by logging::Emit on this thread for this payload); the
  // payload's text is never read back.
  if (const logging::Record* record = logging::CurrentRecord(payload)) {
    j["msg"] = std::string(record->msg);
    for (const logging::Field& f : record->fields) {
      if (f.value.type() == logging::Value::Type::kAbsent) continue;  // as the text form
      const std::string key(f.key.name());
      if (j.contains(key)) continue;  // the first of a repeated key wins
      j[key] = JsonValue(f.value);
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
