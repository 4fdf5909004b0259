#include "base/rfc3339.h"

#include <cstdint>

namespace base {
namespace {

using Clock = std::chrono::system_clock;
using Rep = Clock::duration::rep;
using Period = Clock::duration::period;
static_assert(Period::num == 1 && Period::den <= 1000000000 && 1000000000 % Period::den == 0,
              "system_clock ticks must divide a second into a whole number of nanoseconds");
constexpr Rep kTicksPerSecond = Period::den;
constexpr int64_t kNanosPerTick = 1000000000 / Period::den;

// Days since 1970-01-01 of a proleptic Gregorian date, and back (Howard Hinnant's
// days_from_civil and civil_from_days: exact for every int64 day a time_point reaches).
constexpr int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                    // [0, 399]
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + doe - 719468;
}

struct Civil {
  int64_t year;
  int month;
  int day;
};

constexpr Civil CivilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;                                       // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
  const int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return Civil{yoe + era * 400 + (month <= 2), month, day};
}

static_assert(DaysFromCivil(1970, 1, 1) == 0);
static_assert(DaysFromCivil(2000, 3, 1) == 11017);
static_assert(DaysFromCivil(1969, 12, 31) == -1);
static_assert(CivilFromDays(-1).year == 1969 && CivilFromDays(-1).month == 12);
static_assert(CivilFromDays(11016).month == 2 && CivilFromDays(11016).day == 29);

constexpr bool IsLeapYear(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

constexpr int DaysIn(int month, int64_t year) {
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeapYear(year) ? 29 : kDays[month - 1];
}

// `value` as exactly `width` digits at `out` (value < 10^width).
char* PutDigits(char* out, uint64_t value, int width) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return out + width;
}

// The year as Go writes it: at least four digits, a '-' before a negative one.
char* PutYear(char* out, int64_t year) {
  uint64_t magnitude = static_cast<uint64_t>(year);
  if (year < 0) {
    *out++ = '-';
    magnitude = 0 - magnitude;
  }
  int width = 4;
  for (uint64_t limit = 10000; width < 20 && magnitude >= limit; limit *= 10) ++width;
  return PutDigits(out, magnitude, width);
}

// The digits of text[at, at + 2) as a number within [lo, hi]; -1 otherwise.
int TwoDigits(std::string_view text, size_t at, int lo, int hi) {
  const char a = text[at], b = text[at + 1];
  if (a < '0' || a > '9' || b < '0' || b > '9') return -1;
  const int v = (a - '0') * 10 + (b - '0');
  return v < lo || v > hi ? -1 : v;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

size_t FormatRfc3339To(Clock::time_point t, int fraction_digits, char* out) {
  if (fraction_digits < 0) fraction_digits = 0;
  if (fraction_digits > 9) fraction_digits = 9;
  // Whole seconds and the ticks after them, both floored (the rep's own division truncates
  // towards zero, and converting the floored seconds back to ticks could overflow).
  const Rep ticks = t.time_since_epoch().count();
  int64_t seconds = ticks / kTicksPerSecond;
  int64_t sub = ticks % kTicksPerSecond;
  if (sub < 0) {
    sub += kTicksPerSecond;
    --seconds;
  }
  int64_t days = seconds / 86400;
  int64_t second_of_day = seconds % 86400;
  if (second_of_day < 0) {
    second_of_day += 86400;
    --days;
  }
  const Civil date = CivilFromDays(days);

  char* p = PutYear(out, date.year);
  *p++ = '-';
  p = PutDigits(p, static_cast<uint64_t>(date.month), 2);
  *p++ = '-';
  p = PutDigits(p, static_cast<uint64_t>(date.day), 2);
  *p++ = 'T';
  p = PutDigits(p, static_cast<uint64_t>(second_of_day / 3600), 2);
  *p++ = ':';
  p = PutDigits(p, static_cast<uint64_t>(second_of_day / 60 % 60), 2);
  *p++ = ':';
  p = PutDigits(p, static_cast<uint64_t>(second_of_day % 60), 2);
  if (fraction_digits > 0) {
    uint64_t fraction = static_cast<uint64_t>(sub * kNanosPerTick);  // [0, 10^9)
    for (int i = fraction_digits; i < 9; ++i) fraction /= 10;
    *p++ = '.';
    p = PutDigits(p, fraction, fraction_digits);
  }
  *p++ = 'Z';
  return static_cast<size_t>(p - out);
}

std::string FormatRfc3339(Clock::time_point t, int fraction_digits) {
  char buf[kRfc3339MaxSize];
  return std::string(buf, FormatRfc3339To(t, fraction_digits, buf));
}

std::optional<Clock::time_point> ParseRfc3339(std::string_view text) {
  constexpr size_t kDateTime = sizeof("2006-01-02T15:04:05") - 1;
  if (text.size() < kDateTime + 1) return std::nullopt;
  if (text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  const int century = TwoDigits(text, 0, 0, 99), year_in_century = TwoDigits(text, 2, 0, 99);
  const int month = TwoDigits(text, 5, 1, 12);
  if (century < 0 || year_in_century < 0 || month < 0) return std::nullopt;
  const int64_t year = century * 100 + year_in_century;
  const int day = TwoDigits(text, 8, 1, DaysIn(month, year));
  const int hour = TwoDigits(text, 11, 0, 23);
  const int minute = TwoDigits(text, 14, 0, 59);
  const int second = TwoDigits(text, 17, 0, 59);
  if (day < 0 || hour < 0 || minute < 0 || second < 0) return std::nullopt;

  size_t at = kDateTime;
  int64_t nanos = 0;
  if (text[at] == '.') {
    const size_t first = ++at;
    for (; at < text.size() && IsDigit(text[at]); ++at) {
      if (at - first < 9) nanos = nanos * 10 + (text[at] - '0');
    }
    if (at == first) return std::nullopt;
    for (size_t n = at - first; n < 9; ++n) nanos *= 10;
  }

  const std::string_view zone = text.substr(at);
  int64_t offset = 0;
  if (zone != "Z") {
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') {
      return std::nullopt;
    }
    const int zone_hours = TwoDigits(zone, 1, 0, 23), zone_minutes = TwoDigits(zone, 4, 0, 59);
    if (zone_hours < 0 || zone_minutes < 0) return std::nullopt;
    offset = (zone[0] == '+' ? 1 : -1) * (zone_hours * 3600 + zone_minutes * 60);
  }

  // At most about 3.2e11 s in magnitude: no overflow before the conversion to ticks below.
  const int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset;
  // Before 1970 the fraction is taken from the next second up, so that the clock's first
  // second (its whole seconds alone beyond the rep) still converts.
  const bool borrow = seconds < 0 && nanos > 0;
  const Rep whole = static_cast<Rep>(borrow ? seconds + 1 : seconds);
  const Rep part = static_cast<Rep>(nanos / kNanosPerTick) - (borrow ? kTicksPerSecond : 0);
  Rep ticks = 0;
  if (__builtin_mul_overflow(whole, kTicksPerSecond, &ticks) ||
      __builtin_add_overflow(ticks, part, &ticks)) {
    return std::nullopt;  // valid, but beyond what a time_point holds
  }
  return Clock::time_point(Clock::duration(ticks));
}

}  // namespace base
