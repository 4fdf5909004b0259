#include "logging/structured_log.h"

#include <spdlog/fmt/fmt.h>

#include "base/strings.h"
#include "logging/go_quote.h"

namespace logging {
namespace {

// A quoted string (Go's strconv.Quote).
template <typename Out>
void AppendQuoted(Out& out, std::string_view s) {
  const std::string quoted = GoQuote(s);
  out.append(quoted.data(), quoted.data() + quoted.size());
}

template <typename Out>
void AppendValue(Out& out, const Value& v) {
  switch (v.type()) {
    case Value::Type::kString:
      AppendQuoted(out, v.a());
      return;
    case Value::Type::kPath: {
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
      AppendQuoted(out, path);
      return;
    }
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

void AppendUtf8(std::string& out, uint32_t rune) {
  if (rune < 0x80) {
    out.push_back(static_cast<char>(rune));
  } else if (rune < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (rune >> 6)));
    out.push_back(static_cast<char>(0x80 | (rune & 0x3f)));
  } else if (rune >= 0x10000) {
    out.push_back(static_cast<char>(0xf0 | (rune >> 18)));
    out.push_back(static_cast<char>(0x80 | ((rune >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((rune >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (rune & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xe0 | (rune >> 12)));
    out.push_back(static_cast<char>(0x80 | ((rune >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (rune & 0x3f)));
  }
}

// Reads a quoted string at s[*pos] (which must be '"'), unescaped into *out.
bool ReadQuoted(std::string_view s, size_t* pos, std::string* out) {
  size_t i = *pos;
  if (i >= s.size() || s[i] != '"') return false;
  ++i;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"') {
      *pos = i + 1;
      return true;
    }
    if (static_cast<unsigned char>(c) < 0x20) return false;
    if (c != '\\') {
      out->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= s.size()) return false;
    const char e = s[i + 1];
    static constexpr std::string_view kLetters = "abfnrtv\"\\";
    static constexpr std::string_view kBytes = "\a\b\f\n\r\t\v\"\\";
    if (const size_t k = kLetters.find(e); k != std::string_view::npos) {
      out->push_back(kBytes[k]);
      i += 2;
    } else if (e == 'x' && i + 3 < s.size() && base::HexDigitValue(s[i + 2]) >= 0 &&
               base::HexDigitValue(s[i + 3]) >= 0) {
      out->push_back(
          static_cast<char>(base::HexDigitValue(s[i + 2]) * 16 + base::HexDigitValue(s[i + 3])));
      i += 4;
    } else if ((e == 'u' || e == 'U') && i + (e == 'u' ? 5 : 9) < s.size()) {
      const size_t digits = e == 'u' ? 4 : 8;
      uint32_t rune = 0;
      for (size_t j = 2; j < 2 + digits; ++j) {
        const int d = base::HexDigitValue(s[i + j]);
        if (d < 0) return false;
        rune = rune * 16 + static_cast<uint32_t>(d);
      }
      if (rune > 0x10ffff) return false;
      AppendUtf8(*out, rune);
      i += 2 + digits;
    } else {
      return false;
    }
  }
  return false;  // no closing quote
}

bool IsBareValue(std::string_view v) {
  if (v == "true" || v == "false") return true;
  size_t i = (!v.empty() && v[0] == '-') ? 1 : 0;
  if (i == v.size()) return false;
  for (; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return false;
  }
  return true;
}

}  // namespace

void Emit(spdlog::level::level_enum level, std::string_view msg,
          std::initializer_list<Field> fields) {
  spdlog::logger* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  spdlog::memory_buf_t buf;  // inline storage: a usual line needs no allocation here
  AppendLine(buf, msg, fields);
  logger->log(level, std::string_view(buf.data(), buf.size()));
}

std::string FormatStructuredLine(std::string_view msg, std::initializer_list<Field> fields) {
  std::string s;
  StringOut out{s};
  AppendLine(out, msg, fields);
  return s;
}

std::optional<ParsedLine> ParseStructuredLine(std::string_view payload) {
  ParsedLine line;
  size_t pos = 0;
  if (!ReadQuoted(payload, &pos, &line.msg)) return std::nullopt;
  while (pos < payload.size()) {
    if (payload[pos] != ' ') return std::nullopt;
    ++pos;
    const size_t eq = payload.find('=', pos);
    if (eq == std::string_view::npos) return std::nullopt;
    ParsedField field;
    field.key = std::string(payload.substr(pos, eq - pos));
    if (!Key::Valid(field.key)) return std::nullopt;
    pos = eq + 1;
    if (pos < payload.size() && payload[pos] == '"') {
      if (!ReadQuoted(payload, &pos, &field.value)) return std::nullopt;
    } else {
      const size_t end = std::min(payload.find(' ', pos), payload.size());
      field.value = std::string(payload.substr(pos, end - pos));
      if (!IsBareValue(field.value)) return std::nullopt;
      field.quoted = false;
      pos = end;
    }
    line.fields.push_back(std::move(field));
  }
  return line;
}

}  // namespace logging
