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
  // Go's algorithm (time.ParseDuration), in the same integer and float64 steps, so that every
  // value is exactly Go's: an earlier long double sum was 1 ns off near the int64 limit (found
  // by go_duration_fuzzer: "9223372036.854775801s").
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  std::string_view s = text;
  if (s.starts_with("+")) s.remove_prefix(1);
  if (s.starts_with("-")) {
    return base::Status::Error("invalid duration \"" + text + "\": must not be negative");
  }
  if (s == "0") return std::chrono::nanoseconds(0);
  if (s.empty()) return Invalid(text);
  const base::Status too_large =
      base::Status::Error("invalid duration \"" + text + "\": too large");
  uint64_t total = 0;
  while (!s.empty()) {
    if (s[0] != '.' && !IsDigit(s[0])) return Invalid(text);
    // The integer part; beyond 2^63 it is too large.
    size_t i = 0;
    uint64_t v = 0;
    for (; i < s.size() && IsDigit(s[i]); ++i) {
      if (v > kLimit / 10) return too_large;
      v = v * 10 + static_cast<uint64_t>(s[i] - '0');
      if (v > kLimit) return too_large;
    }
    const bool pre = i > 0;
    bool post = false;
    // The fraction: digits beyond what fits in an int64 are ignored, as in Go.
    uint64_t f = 0;
    double scale = 1;
    if (i < s.size() && s[i] == '.') {
      const size_t start = ++i;
      bool overflow = false;
      for (; i < s.size() && IsDigit(s[i]); ++i) {
        if (overflow) continue;
        if (f > (kLimit - 1) / 10) {
          overflow = true;
          continue;
        }
        const uint64_t y = f * 10 + static_cast<uint64_t>(s[i] - '0');
        if (y > kLimit) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = i > start;
    }
    if (!pre && !post) return Invalid(text);
    s.remove_prefix(i);
    size_t unit_len = 0;
    while (unit_len < s.size() && s[unit_len] != '.' && !IsDigit(s[unit_len])) ++unit_len;
    const std::string_view unit = s.substr(0, unit_len);
    uint64_t nanos = 0;
    for (const Unit& u : kUnits) {
      if (u.name == unit) nanos = static_cast<uint64_t>(u.nanos);
    }
    if (nanos == 0) {
      if (unit.empty()) {
        return base::Status::Error("invalid duration \"" + text + "\": missing unit");
      }
      return base::Status::Error("invalid duration \"" + text + "\": unknown unit \"" +
                                 std::string(unit) + "\"");
    }
    s.remove_prefix(unit_len);
    if (v > kLimit / nanos) return too_large;
    v *= nanos;
    if (f > 0) {
      // float64 keeps fractions of an hour nanosecond-accurate (Go's comment); truncated.
      v += static_cast<uint64_t>(static_cast<double>(f) * (static_cast<double>(nanos) / scale));
      if (v > kLimit) return too_large;
    }
    // Go adds first and compares after, so 2^63 + 2^63 wraps to 0 and
    // "9223372036854775808ns9223372036854775808ns" parses as 0 there (go_duration_fuzzer): a
    // flag meant as "forever" must not become 0. Compared before adding, it is too large.
    if (v > kLimit - total) return too_large;
    total += v;
  }
  if (total > kLimit - 1) return too_large;
  return std::chrono::nanoseconds(static_cast<int64_t>(total));
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
