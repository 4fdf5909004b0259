// libFuzzer target for Go durations (ParseGoDuration / FormatGoDuration). Whatever the text:
//  * parsing never crashes, an error says why, and a parsed duration is not negative;
//  * the parse is exact: it equals a reference computed in 128-bit integers whenever Go's own
//    float64 step for each fraction is exact (10^digits divides the unit), and both agree on
//    whether the text is valid;
//  * formatting round-trips: ParseGoDuration(FormatGoDuration(d)) == d for the parsed duration
//    and for any non-negative duration made of the input's first 8 bytes.
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "config/go_duration.h"

namespace {

__extension__ typedef __int128 Int128;

enum class Ref { kValid, kInvalid, kUnknown };

// The value of `text` in nanoseconds by exact integer arithmetic; kUnknown when Go's float64 step
// for a fraction is not exact (it truncates there; this target does not judge that rounding).
Ref Reference(std::string_view s, int64_t* out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (!s.empty() && s[0] == '-') return Ref::kInvalid;
  if (s == "0") {
    *out = 0;
    return Ref::kValid;
  }
  if (s.empty()) return Ref::kInvalid;
  Int128 total = 0;
  bool unknown = false;
  constexpr Int128 kMax = std::numeric_limits<int64_t>::max();
  while (!s.empty()) {
    size_t i = 0;
    Int128 whole = 0;
    bool digits = false, huge = false;
    // Past int64's range the text is invalid whatever its unit (Go's leadingInt fails there
    // too); stopping the digits there keeps whole * nanos below 2^110, far inside Int128.
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (whole <= kMax)
        whole = whole * 10 + (s[i] - '0');
      else
        huge = true;
      digits = true;
    }
    std::string frac;
    if (i < s.size() && s[i] == '.') {
      for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) frac += s[i];
      digits = digits || !frac.empty();
    }
    if (!digits) return Ref::kInvalid;
    s.remove_prefix(i);
    size_t n = 0;
    while (n < s.size() && s[n] != '.' && !(s[n] >= '0' && s[n] <= '9')) ++n;
    const std::string_view unit = s.substr(0, n);
    s.remove_prefix(n);
    int64_t nanos = 0;
    if (unit == "ns")
      nanos = 1;
    else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs")
      nanos = 1000;
    else if (unit == "ms")
      nanos = 1000000;
    else if (unit == "s")
      nanos = 1000000000;
    else if (unit == "m")
      nanos = 60000000000;
    else if (unit == "h")
      nanos = 3600000000000;
    else
      return Ref::kInvalid;
    if (huge) return Ref::kInvalid;  // far beyond the maximum
    total += whole * nanos;
    // Go adds a fraction of k digits (trailing zeros included), read as the integer f, as
    // float64(f) * (float64(unit) / 10^k), truncated. That is exact when 10^k divides the unit:
    // unit / 10^k is then whole, and the product (below the unit) is below 2^53. Otherwise the
    // quotient is inexact and Go may land one below (".00000000100000m" is 59 ns in Go, not 60):
    // not judged here. An all-zero fraction adds nothing.
    if (frac.find_first_not_of('0') != std::string::npos) {
      int64_t scale = 1;
      for (size_t k = 0; k < frac.size() && scale <= nanos; ++k) scale *= 10;
      if (frac.size() <= 12 && nanos % scale == 0) {
        Int128 f = 0;
        for (char c : frac) f = f * 10 + (c - '0');
        total += f * (nanos / scale);
      } else {
        unknown = true;
      }
    }
    if (total > kMax) return Ref::kInvalid;
  }
  if (unknown) return Ref::kUnknown;
  *out = static_cast<int64_t>(total);
  return Ref::kValid;
}

void CheckRoundTrip(std::chrono::nanoseconds d) {
  const std::string text = config::FormatGoDuration(d);
  auto back = config::ParseGoDuration(text);
  if (!back.ok() || *back != d) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto d = config::ParseGoDuration(text);
  if (!d.ok() && d.status().message().empty()) __builtin_trap();
  if (d.ok() && d->count() < 0) __builtin_trap();

  int64_t expected = 0;
  switch (Reference(text, &expected)) {
    case Ref::kValid:
      if (!d.ok() || d->count() != expected) __builtin_trap();
      break;
    case Ref::kInvalid:
      if (d.ok()) __builtin_trap();
      break;
    case Ref::kUnknown:
      break;
  }
  if (d.ok()) CheckRoundTrip(*d);

  if (size >= 8) {
    uint64_t bits;
    std::memcpy(&bits, data, 8);
    CheckRoundTrip(std::chrono::nanoseconds(static_cast<int64_t>(bits >> 1)));
  }
  return 0;
}
