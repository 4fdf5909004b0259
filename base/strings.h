// String helpers shared by every module: joining a list with a separator, splitting on one
// character, ASCII case and hex digits (locale-free, for protocol text), and the NUL-byte check
// every string bound for a system call passes. Nothing here knows about paths, URLs or Kubernetes.
#ifndef VOLUMEMANAGER_BASE_STRINGS_H_
#define VOLUMEMANAGER_BASE_STRINGS_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace base {

// "a<sep>b<sep>c"; "" for no parts. `parts`: any range of strings or string views.
template <typename Parts>
std::string Join(const Parts& parts, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& part : parts) {
    if (!first) out += sep;
    first = false;
    out += part;
  }
  return out;
}
inline std::string Join(std::initializer_list<std::string_view> parts, std::string_view sep) {
  return Join<std::initializer_list<std::string_view>>(parts, sep);
}

// Every piece between separators, empty ones included: "a//b" is {"a", "", "b"}, "" is {""}.
// The views point into `s`.
inline std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

// The value of a hex digit (0-9, a-f, A-F), or -1 for any other character.
inline int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `c` with A-Z mapped to a-z; every other byte as it is (no locale).
inline char AsciiLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Whether `a` and `b` are equal but for ASCII case (HTTP header names and tokens).
inline bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

// Whether `s` holds a NUL byte. A C string ends at its first NUL, so a name holding one is cut
// there by every system call: "a/..\0x" would be opened as "a/..". No file or directory name,
// path, key or name that becomes one may hold a NUL (the kernel could not store it either); each
// is refused where it enters the daemon, and again before any system call.
inline bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// `s` with each NUL byte written as the four characters `\x00`, for messages (a raw NUL would
// cut the log line, or hide what follows it).
inline std::string ShowNul(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\0') {
      out += "\\x00";
    } else {
      out += c;
    }
  }
  return out;
}

// OK unless `value` holds a NUL byte; then "<what>: must not contain a NUL byte" (the value itself
// is not shown: it may be anything, even a secret).
inline Status CheckNoNul(std::string_view value, std::string_view what) {
  if (!HasNul(value)) return Status::OK();
  return Status::Error(std::string(what) + ": must not contain a NUL byte");
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_STRINGS_H_
