// JsonLogFormatter: spdlog formatter for --log-format=json. Each record becomes one line holding a
// JSON object {"ts": RFC 3339 UTC with microseconds, "level", "msg", ...}. A structured line
// (logging/structured_log.h) gives its message as "msg" and each key/value pair as a field of its
// own, in order after "msg" (integers and booleans as JSON numbers and booleans, everything else as
// strings), so `jq 'select(.pod == "default/web")'` finds every line about a pod. The fields come
// from the record itself (`logging::CurrentRecord`, while logging::Emit writes the line on this
// thread), never from parsing the payload's text: any other line, even one that looks like klog's
// text form, is "msg" as written. Escaped so that any text (quotes, control characters, invalid
// UTF-8, replaced by U+FFFD) yields valid JSON.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_JSON_LOG_FORMATTER_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_JSON_LOG_FORMATTER_H_

#include <spdlog/formatter.h>

#include <memory>

namespace volumemanager {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_JSON_LOG_FORMATTER_H_
