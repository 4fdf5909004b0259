#include "logging/structured_log.h"

#include <spdlog/fmt/fmt.h>

#include "logging/go_quote.h"

namespace logging {
namespace {

// A quoted string (Go's strconv.Quote).
template <typename Out>
void AppendQuoted(Out& out, std::string_view s) {
  const std::string quoted = GoQuote(s);
  out.append(quoted.data(), quoted.data() + quoted.size());
}

// "a/b/c" with the empty parts left out, the first part lowered for a kind.
std::string PathString(const Value& v) {
  std::string path;
  for (std::string_view part : {v.a(), v.b(), v.c()}) {
    if (part.empty()) continue;
    if (!path.empty()) path.push_back('/');
    path.append(part);
  }
  if (v.lower_a()) {
    for (size_t i = 0; i < v.a().size(); ++i) {
      if (path[i] >= 'A' && path[i] <= 'Z') path[i] = static_cast<char>(path[i] - 'A' + 'a');
    }
  }
  return path;
}

template <typename Out>
void AppendValue(Out& out, const Value& v) {
  switch (v.type()) {
    case Value::Type::kString:
      AppendQuoted(out, v.a());
      return;
    case Value::Type::kPath:
      AppendQuoted(out, PathString(v));
      return;
    case Value::Type::kInt:
      fmt::format_to(std::back_inserter(out), "{}", v.int_value());
      return;
    case Value::Type::kUint:
      fmt::format_to(std::back_inserter(out), "{}", v.uint_value());
      return;
    case Value::Type::kAbsent:
      return;
    case Value::Type::kBool:
      if (v.uint_value() != 0) {
        out.append(std::string_view("true"));
      } else {
        out.append(std::string_view("false"));
      }
      return;
  }
}

template <typename Out>
void AppendLine(Out& out, std::string_view msg, std::initializer_list<Field> fields) {
  AppendQuoted(out, msg);
  for (const Field& f : fields) {
    if (f.value.type() == Value::Type::kAbsent) continue;
    out.push_back(' ');
    out.append(f.key.name());
    out.push_back('=');
    AppendValue(out, f.value);
  }
}

// std::string as an output with the memory buffer's append(string_view).
struct StringOut {
  std::string& s;
  void push_back(char c) { s.push_back(c); }
  void append(const char* b, const char* e) { s.append(b, e); }
  void append(std::string_view v) { s.append(v); }
  using value_type = char;
};

// The record Emit is writing on this thread (constant-initialized: no guard, no allocation).
thread_local const Record* t_current_record = nullptr;

class CurrentRecordScope {
 public:
  explicit CurrentRecordScope(const Record* record) : outer_(t_current_record) {
    t_current_record = record;
  }
  ~CurrentRecordScope() { t_current_record = outer_; }
  CurrentRecordScope(const CurrentRecordScope&) = delete;
  CurrentRecordScope& operator=(const CurrentRecordScope&) = delete;

 private:
  const Record* outer_;
};

}  // namespace

void Emit(spdlog::level::level_enum level, std::string_view msg,
          std::initializer_list<Field> fields) {
  spdlog::logger* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  spdlog::memory_buf_t buf;  // inline storage: a usual line needs no allocation here
  AppendLine(buf, msg, fields);
  // The record is this thread's current one for the duration of the call: spdlog's logger is
  // synchronous, its sinks format on this thread before log() returns. Nested (a sink that
  // logs), the outer record comes back when the inner line is done.
  const Record record{msg, fields, std::string_view(buf.data(), buf.size())};
  const CurrentRecordScope scope(&record);
  logger->log(level, record.payload);
}

const Record* CurrentRecord(std::string_view payload) {
  const Record* r = t_current_record;
  if (r == nullptr || r->payload.data() != payload.data() || r->payload.size() != payload.size()) {
    return nullptr;
  }
  return r;
}

std::string StringValue(const Value& value) {
  switch (value.type()) {
    case Value::Type::kString:
      return std::string(value.a());
    case Value::Type::kPath:
      return PathString(value);
    case Value::Type::kInt:
    case Value::Type::kUint:
    case Value::Type::kBool:
    case Value::Type::kAbsent:
      return {};
  }
  return {};
}

std::string FormatStructuredLine(std::string_view msg, std::initializer_list<Field> fields) {
  std::string s;
  StringOut out{s};
  AppendLine(out, msg, fields);
  return s;
}

}  // namespace logging
