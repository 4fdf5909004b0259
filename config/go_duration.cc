#include "config/go_duration.h"

#include <cstdint>
#include <limits>
#include <string_view>

namespace config {
namespace {

struct Unit {
  std::string_view name;
  int64_t nanos;
};

constexpr Unit kUnits[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xC2\xB5s", 1000},  // U+00B5 micro sign
    {"\xCE\xBCs", 1000},  // U+03BC Greek mu
    {"ms", 1000 * 1000},
    {"s", 1000 * 1000 * 1000},
    {"m", 60LL * 1000 * 1000 * 1000},
    {"h", 3600LL * 1000 * 1000 * 1000},
};

base::Status Invalid(const std::string& text) {
  return base::Status::Error("invalid duration \"" + text +
                             "\": want a number with a unit, e.g. 500ms, 10s, 1m30s");
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

base::Result<std::chrono::nanoseconds> ParseGoDuration(const std::string& text) {
  std::string_view s = text;
  if (s.starts_with("+")) s.remove_prefix(1);
  if (s.starts_with("-")) {
    return base::Status::Error("invalid duration \"" + text + "\": must not be negative");
  }
  if (s == "0") return std::chrono::nanoseconds(0);
  if (s.empty()) return Invalid(text);
  long double total = 0;
  while (!s.empty()) {
    size_t i = 0;
    long double whole = 0;
    bool digits = false;
    while (i < s.size() && IsDigit(s[i])) {
      whole = whole * 10 + (s[i] - '0');
      ++i;
      digits = true;
    }
    long double frac = 0;
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < s.size() && IsDigit(s[i])) {
        frac += scale * (s[i] - '0');
        scale /= 10;
        ++i;
        digits = true;
      }
    }
    if (!digits) return Invalid(text);
    s.remove_prefix(i);
    size_t unit_len = 0;
    while (unit_len < s.size() && s[unit_len] != '.' && !IsDigit(s[unit_len])) ++unit_len;
    const std::string_view unit = s.substr(0, unit_len);
    int64_t nanos = 0;
    for (const Unit& u : kUnits) {
      if (u.name == unit) nanos = u.nanos;
    }
    if (nanos == 0) {
      if (unit.empty()) {
        return base::Status::Error("invalid duration \"" + text + "\": missing unit");
      }
      return base::Status::Error("invalid duration \"" + text + "\": unknown unit \"" +
                                 std::string(unit) + "\"");
    }
    s.remove_prefix(unit_len);
    total += (whole + frac) * static_cast<long double>(nanos);
    if (total > static_cast<long double>(std::numeric_limits<int64_t>::max())) {
      return base::Status::Error("invalid duration \"" + text + "\": too large");
    }
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(total + 0.5L));
}

std::string FormatGoDuration(std::chrono::nanoseconds d) {
  int64_t ns = d.count();
  if (ns == 0) return "0s";
  std::string out;
  if (ns < 1000000000) {
    // Below a second Go picks one unit: ns, µs (we print "us") or ms, with a fraction.
    const char* unit = "ns";
    int64_t div = 1;
    if (ns >= 1000000) {
      unit = "ms";
      div = 1000000;
    } else if (ns >= 1000) {
      unit = "us";
      div = 1000;
    }
    std::string whole = std::to_string(ns / div);
    int64_t rest = ns % div;
    if (rest != 0) {
      std::string frac = std::to_string(rest + div).substr(1);
      while (!frac.empty() && frac.back() == '0') frac.pop_back();
      whole += "." + frac;
    }
    return whole + unit;
  }
  const int64_t hours = ns / 3600000000000LL;
  ns %= 3600000000000LL;
  const int64_t minutes = ns / 60000000000LL;
  ns %= 60000000000LL;
  if (hours > 0) out += std::to_string(hours) + "h";
  if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
  std::string secs = std::to_string(ns / 1000000000);
  const int64_t rest = ns % 1000000000;
  if (rest != 0) {
    std::string frac = std::to_string(rest + 1000000000).substr(1);
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    secs += "." + frac;
  }
  out += secs + "s";
  // Go prints "1h0m0s" and "1m0s"; trim the zero tails for readability in our own messages.
  for (const char* tail : {"0m0s", "0s"}) {
    const std::string t = tail;
    if (out.size() > t.size() && out.ends_with(t) && !IsDigit(out[out.size() - t.size() - 1])) {
      out.erase(out.size() - t.size());
      break;
    }
  }
  return out;
}

}  // namespace config
