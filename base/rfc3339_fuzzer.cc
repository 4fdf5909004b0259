// libFuzzer target for RFC 3339 time text (ParseRfc3339 / FormatRfc3339). Whatever the text:
//  * a parsed text has the grammar's shape (digits where digits go, "T", ':', a "Z" or ±HH:MM
//    zone), and its whole seconds equal the C library's timegm of its fields, less the offset;
//  * parse(format(parse(x))) == parse(x) at nine digits, and the text formatted at 0, 3 and 6
//    digits parses to the time floored to that precision;
//  * a parsed "Z" text with no fraction or nine digits is its own format;
//  * any time made of the input's first 8 bytes formats to text that parses back to it.
// Built only with -DVM_FUZZ=ON (clang).
#include <time.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "base/rfc3339.h"

namespace {

using Clock = std::chrono::system_clock;

bool Digits(std::string_view s, size_t at, size_t n) {
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

int Num(std::string_view s, size_t at, size_t n) {
  int v = 0;
  for (size_t i = at; i < at + n; ++i) v = v * 10 + (s[i] - '0');
  return v;
}

void CheckParsed(std::string_view text, Clock::time_point t) {
  if (text.size() < 20 || !Digits(text, 0, 4) || text[4] != '-' || !Digits(text, 5, 2) ||
      text[7] != '-' || !Digits(text, 8, 2) || text[10] != 'T' || !Digits(text, 11, 2) ||
      text[13] != ':' || !Digits(text, 14, 2) || text[16] != ':' || !Digits(text, 17, 2)) {
    __builtin_trap();
  }
  size_t at = 19, fraction = 0;
  if (text[at] == '.') {
    while (at + 1 + fraction < text.size() && Digits(text, at + 1 + fraction, 1)) ++fraction;
    if (fraction == 0) __builtin_trap();
    at += 1 + fraction;
  }
  const std::string_view zone = text.substr(at);
  long offset = 0;
  if (zone != "Z") {
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || !Digits(zone, 1, 2) ||
        zone[3] != ':' || !Digits(zone, 4, 2)) {
      __builtin_trap();
    }
    offset = (zone[0] == '+' ? 1 : -1) * (Num(zone, 1, 2) * 3600L + Num(zone, 4, 2) * 60L);
  }
  tm fields{};
  fields.tm_year = Num(text, 0, 4) - 1900;
  fields.tm_mon = Num(text, 5, 2) - 1;
  fields.tm_mday = Num(text, 8, 2);
  fields.tm_hour = Num(text, 11, 2);
  fields.tm_min = Num(text, 14, 2);
  fields.tm_sec = Num(text, 17, 2);
  const tm given = fields;
  const time_t seconds = timegm(&fields);
  // timegm normalises out-of-range fields: a parsed text had none.
  if (fields.tm_mon != given.tm_mon || fields.tm_mday != given.tm_mday ||
      fields.tm_hour != given.tm_hour || fields.tm_min != given.tm_min ||
      fields.tm_sec != given.tm_sec) {
    __builtin_trap();
  }
  if (std::chrono::floor<std::chrono::seconds>(t).time_since_epoch().count() != seconds - offset) {
    __builtin_trap();
  }
  if (zone == "Z" && (fraction == 0 || fraction == 9) &&
      base::FormatRfc3339(t, static_cast<int>(fraction)) != text) {
    __builtin_trap();
  }
}

void CheckRoundTrip(Clock::time_point t) {
  if (base::ParseRfc3339(base::FormatRfc3339(t, 9)) != t) __builtin_trap();
  // Floored to a coarser precision only where that stays on the clock.
  if (t < Clock::time_point::min() + std::chrono::seconds(2)) return;
  if (base::ParseRfc3339(base::FormatRfc3339(t, 0)) != std::chrono::floor<std::chrono::seconds>(t))
    __builtin_trap();
  if (base::ParseRfc3339(base::FormatRfc3339(t, 3)) !=
      std::chrono::floor<std::chrono::milliseconds>(t))
    __builtin_trap();
  if (base::ParseRfc3339(base::FormatRfc3339(t, 6)) !=
      std::chrono::floor<std::chrono::microseconds>(t))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const std::optional<Clock::time_point> t = base::ParseRfc3339(text)) {
    CheckParsed(text, *t);
    CheckRoundTrip(*t);
  }
  if (size >= 8) {
    int64_t ticks;
    std::memcpy(&ticks, data, 8);
    CheckRoundTrip(Clock::time_point(Clock::duration(ticks)));
  }
  return 0;
}
