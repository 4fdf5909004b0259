#include "logging/structured_log.h"

#include <spdlog/fmt/fmt.h>

namespace logging {
namespace {

constexpr char kHex[] = "0123456789abcdef";

template <typename Out>
void AppendByteEscape(Out& out, unsigned char c) {
  const char esc[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
  out.append(esc, esc + 4);
}

template <typename Out>
void AppendRuneEscape(Out& out, uint32_t rune) {
  const char esc[6] = {'\\',
                       'u',
                       kHex[(rune >> 12) & 0xf],
                       kHex[(rune >> 8) & 0xf],
                       kHex[(rune >> 4) & 0xf],
                       kHex[rune & 0xf]};
  out.append(esc, esc + 6);
}

// The length of the valid UTF-8 sequence at s[i] (0 if there is none) and its code point.
size_t DecodeRune(std::string_view s, size_t i, uint32_t* rune) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xc0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0xc2 && c <= 0xdf && cont(1)) {
    *rune = ((c & 0x1fu) << 6) | (b(1) & 0x3fu);
    return 2;
  }
  if (c >= 0xe0 && c <= 0xef && cont(1) && cont(2)) {
    *rune = ((c & 0x0fu) << 12) | ((b(1) & 0x3fu) << 6) | (b(2) & 0x3fu);
    // Overlong forms and UTF-16 surrogates are not valid UTF-8.
    if (*rune < 0x800 || (*rune >= 0xd800 && *rune <= 0xdfff)) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4 && cont(1) && cont(2) && cont(3)) {
    *rune = ((c & 0x07u) << 18) | ((b(1) & 0x3fu) << 12) | ((b(2) & 0x3fu) << 6) | (b(3) & 0x3fu);
    if (*rune < 0x10000 || *rune > 0x10ffff) return 0;
    return 4;
  }
  return 0;
}

// The inside of a quoted string (no quotes).
template <typename Out>
void AppendEscaped(Out& out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (c < 0x80) {
      static constexpr char kShort[] = "\a\b\f\n\r\t\v";
      static constexpr char kLetter[] = "abfnrtv";
      bool done = false;
      for (int k = 0; kShort[k] != '\0'; ++k) {
        if (c == static_cast<unsigned char>(kShort[k])) {
          out.push_back('\\');
          out.push_back(kLetter[k]);
          done = true;
          break;
        }
      }
      if (!done) AppendByteEscape(out, c);
      ++i;
      continue;
    }
    uint32_t rune = 0;
    const size_t n = DecodeRune(s, i, &rune);
    if (n == 0) {
      AppendByteEscape(out, c);
      ++i;
    } else if (rune <= 0x9f || rune == 0x2028 || rune == 0x2029 || rune == 0xfeff) {
      AppendRuneEscape(out, rune);
      i += n;
    } else {
      out.append(s.data() + i, s.data() + i + n);
      i += n;
    }
  }
}

template <typename Out>
void AppendValue(Out& out, const Value& v) {
  switch (v.type()) {
    case Value::Type::kString:
      out.push_back('"');
      AppendEscaped(out, v.a());
      out.push_back('"');
      return;
    case Value::Type::kPath:
      out.push_back('"');
      for (bool first = true; std::string_view part : {v.a(), v.b(), v.c()}) {
        if (part.empty()) continue;
        if (!first) out.push_back('/');
        first = false;
        AppendEscaped(out, part);
      }
      out.push_back('"');
      return;
    case Value::Type::kInt:
      fmt::format_to(std::back_inserter(out), "{}", v.int_value());
      return;
    case Value::Type::kUint:
      fmt::format_to(std::back_inserter(out), "{}", v.uint_value());
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
  out.push_back('"');
  AppendEscaped(out, msg);
  out.push_back('"');
  for (const Field& f : fields) {
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

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string& out, uint32_t rune) {
  if (rune < 0x80) {
    out.push_back(static_cast<char>(rune));
  } else if (rune < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (rune >> 6)));
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
    } else if (e == 'x' && i + 3 < s.size() && HexDigit(s[i + 2]) >= 0 && HexDigit(s[i + 3]) >= 0) {
      out->push_back(static_cast<char>(HexDigit(s[i + 2]) * 16 + HexDigit(s[i + 3])));
      i += 4;
    } else if (e == 'u' && i + 5 < s.size()) {
      uint32_t rune = 0;
      for (size_t j = 2; j < 6; ++j) {
        const int d = HexDigit(s[i + j]);
        if (d < 0) return false;
        rune = rune * 16 + static_cast<uint32_t>(d);
      }
      AppendUtf8(*out, rune);
      i += 6;
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

void AppendQuoted(std::string& out, std::string_view s) {
  StringOut o{out};
  o.push_back('"');
  AppendEscaped(o, s);
  o.push_back('"');
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
