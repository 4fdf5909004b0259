#include "base/rfc3339.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace base {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;
using std::chrono::system_clock;
using Time = system_clock::time_point;

Time At(int64_t unix_seconds, int64_t nanos = 0) {
  return Time(std::chrono::duration_cast<system_clock::duration>(seconds(unix_seconds) +
                                                                 nanoseconds(nanos)));
}

TEST(FormatRfc3339Test, Seconds) {
  EXPECT_EQ(FormatRfc3339(At(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(At(1740823200)), "2025-03-01T10:00:00Z");
  EXPECT_EQ(FormatRfc3339(At(1735689599)), "2024-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(At(1740823200, 999999999)), "2025-03-01T10:00:00Z");  // truncated
}

TEST(FormatRfc3339Test, EachPrecisionTruncates) {
  const Time t = At(1740823212, 345678999);
  EXPECT_EQ(FormatRfc3339(t, 0), "2025-03-01T10:00:12Z");
  EXPECT_EQ(FormatRfc3339(t, 1), "2025-03-01T10:00:12.3Z");
  EXPECT_EQ(FormatRfc3339(t, 3), "2025-03-01T10:00:12.345Z");
  EXPECT_EQ(FormatRfc3339(t, 6), "2025-03-01T10:00:12.345678Z");
  EXPECT_EQ(FormatRfc3339(t, 9), "2025-03-01T10:00:12.345678999Z");
  // Zeros are written, not trimmed (metav1.MicroTime always has six digits).
  EXPECT_EQ(FormatRfc3339(At(1740823200), 6), "2025-03-01T10:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339(At(1740823200, 1000), 3), "2025-03-01T10:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(At(1740823200, 1000), 6), "2025-03-01T10:00:00.000001Z");
  // Out of range: clamped.
  EXPECT_EQ(FormatRfc3339(t, -1), "2025-03-01T10:00:12Z");
  EXPECT_EQ(FormatRfc3339(t, 12), "2025-03-01T10:00:12.345678999Z");
}

TEST(FormatRfc3339Test, Before1970FloorsAsGoDoes) {
  EXPECT_EQ(FormatRfc3339(At(-1)), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(At(0, -1), 9), "1969-12-31T23:59:59.999999999Z");
  EXPECT_EQ(FormatRfc3339(At(0, -1), 0), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(At(-14182940, 250000000), 3), "1969-07-20T20:17:40.250Z");
  EXPECT_EQ(FormatRfc3339(At(-2203891200)), "1900-03-01T00:00:00Z");
}

TEST(FormatRfc3339Test, LeapDays) {
  EXPECT_EQ(FormatRfc3339(At(951782400)), "2000-02-29T00:00:00Z");  // 400 divides 2000
  EXPECT_EQ(FormatRfc3339(At(951782400 - 1)), "2000-02-28T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(At(-2203891200 - 1)), "1900-02-28T23:59:59Z");  // 1900: no 29th
  EXPECT_EQ(FormatRfc3339(At(4107542399 + 1)), "2100-03-01T00:00:00Z");   // 2100: no 29th
}

TEST(FormatRfc3339Test, TheEndsOfTheClock) {
  EXPECT_EQ(FormatRfc3339(Time::min(), 9), "1677-09-21T00:12:43.145224192Z");
  EXPECT_EQ(FormatRfc3339(Time::max(), 9), "2262-04-11T23:47:16.854775807Z");
  EXPECT_EQ(FormatRfc3339(At(9223286400)), "2262-04-11T00:00:00Z");
}

TEST(FormatRfc3339Test, FormatToWritesTheSameTextUnterminated) {
  char buf[kRfc3339MaxSize + 1];
  buf[kRfc3339MaxSize] = '#';
  const size_t n = FormatRfc3339To(Time::min(), 9, buf);
  EXPECT_EQ(std::string(buf, n), FormatRfc3339(Time::min(), 9));
  EXPECT_LE(n, kRfc3339MaxSize);
  EXPECT_EQ(buf[kRfc3339MaxSize], '#');
}

// The seconds as the C library's gmtime_r and strftime wrote them at every former site: equal
// over the clock's whole range.
TEST(FormatRfc3339Test, MatchesGmtimeOverTheWholeRange) {
  std::mt19937_64 random(42);
  const int64_t lo = -9223372036, hi = 9223372035;
  std::uniform_int_distribution<int64_t> pick(lo, hi);
  for (int i = 0; i < 200000; ++i) {
    const time_t s = i < 1000 ? 1700000000 + i * 86399 : pick(random);
    tm utc{};
    ASSERT_NE(gmtime_r(&s, &utc), nullptr);
    char want[64];
    strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%SZ", &utc);
    ASSERT_EQ(FormatRfc3339(At(s)), want) << s;
  }
}

TEST(ParseRfc3339Test, Utc) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z"), At(0));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00Z"), At(1740823200));
  EXPECT_EQ(ParseRfc3339("2024-12-31T23:59:59Z"), At(1735689599));
  EXPECT_EQ(ParseRfc3339("0000-01-01T00:00:00Z"), std::nullopt);  // valid, not representable
}

TEST(ParseRfc3339Test, OffsetsAreApplied) {
  // 10:00 at +02:00 is 08:00 UTC.
  EXPECT_EQ(ParseRfc3339("2026-01-01T10:00:00+02:00"), At(1767254400));
  EXPECT_EQ(ParseRfc3339("2026-01-01T03:30:00-04:30"), At(1767254400));
  EXPECT_EQ(ParseRfc3339("2026-01-01T08:00:00+00:00"), At(1767254400));
  EXPECT_EQ(ParseRfc3339("2026-01-01T08:00:00-00:00"), At(1767254400));
  EXPECT_EQ(ParseRfc3339("2026-01-02T07:59:00+23:59"), At(1767254400));
  EXPECT_EQ(ParseRfc3339("2025-12-31T08:01:00-23:59"), At(1767254400));
  // Across a year: 2027-01-15T08:00:00.5+01:00 is 07:00:00.5Z.
  EXPECT_EQ(ParseRfc3339("2027-01-15T08:00:00.5+01:00"), At(1799996400, 500000000));
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00+00:01"), At(-60));
}

TEST(ParseRfc3339Test, Fractions) {
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.1Z"), At(1740823200, 100000000));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.123Z"), At(1740823200, 123000000));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.123456Z"), At(1740823200, 123456000));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.123456789Z"), At(1740823200, 123456789));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.000000000Z"), At(1740823200));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.999999999-01:00"), At(1740823200 + 3600, 999999999));
  // Past the ninth digit: read and ignored, as Go does (truncated, not rounded).
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.1234567899Z"), At(1740823200, 123456789));
  EXPECT_EQ(ParseRfc3339("2025-03-01T10:00:00.00000000099999Z"), At(1740823200));
}

TEST(ParseRfc3339Test, LeapYears) {
  EXPECT_EQ(ParseRfc3339("2000-02-29T00:00:00Z"), At(951782400));
  EXPECT_EQ(ParseRfc3339("2024-02-29T12:00:00Z"), At(1709208000));
  EXPECT_EQ(ParseRfc3339("1900-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("2100-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("2023-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("2023-02-28T00:00:00Z"), At(1677542400));
}

TEST(ParseRfc3339Test, Before1970AndFarFuture) {
  EXPECT_EQ(ParseRfc3339("1969-12-31T23:59:59Z"), At(-1));
  EXPECT_EQ(ParseRfc3339("1969-12-31T23:59:59.999999999Z"), At(0, -1));
  EXPECT_EQ(ParseRfc3339("1969-07-20T20:17:40Z"), At(-14182940));
  EXPECT_EQ(ParseRfc3339("1900-03-01T00:00:00Z"), At(-2203891200));
  EXPECT_EQ(ParseRfc3339("2100-02-28T23:59:59Z"), At(4107542399));
  EXPECT_EQ(ParseRfc3339("2200-01-01T00:00:00Z"), At(7258118400));
  // The clock's two ends, to the nanosecond, and one past each.
  EXPECT_EQ(ParseRfc3339("1677-09-21T00:12:43.145224192Z"), Time::min());
  EXPECT_EQ(ParseRfc3339("2262-04-11T23:47:16.854775807Z"), Time::max());
  EXPECT_EQ(ParseRfc3339("1677-09-21T00:12:43.145224191Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("2262-04-11T23:47:16.854775808Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("2262-04-11T22:47:16.854775808-01:00"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("9999-12-31T23:59:59Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("1000-01-01T00:00:00Z"), std::nullopt);
}

TEST(ParseRfc3339Test, RejectsEverythingElse) {
  for (const char* text : {
           "",
           "2025-03-01",
           "2025-03-01T10:00:00",   // no zone
           "2025-03-01T10:00:00z",  // lower case, as Go refuses it
           "2025-03-01t10:00:00Z",
           "2025-03-01 10:00:00Z",
           "2025-03-01T10:00:00ZZ",
           "2025-03-01T10:00:00Z ",
           " 2025-03-01T10:00:00Z",
           "2025-03-01T10:00:00UTC",
           "2025-03-01T10:00:00.Z",  // a '.' with no digit
           "2025-03-01T10:00:00,5Z",
           "2025-03-01T10:00:00.5",
           "2025-03-01T10:00:00+0200",
           "2025-03-01T10:00:00+02",
           "2025-03-01T10:00:00+2:00",
           "2025-03-01T10:00:00+02:00Z",
           "2025-03-01T10:00:00 +02:00",
           "2025-03-01T10:00:00+24:00",
           "2025-03-01T10:00:00+02:60",
           "2025-03-01T10:00:00*02:00",
           "2025-03-01T10:00:00+02-00",
           "2025-03-01T10:00:00+0a:00",
           "2025-3-01T10:00:00Z",
           "2025-03-1T10:00:00Z",
           "2025-03-01T1:00:00Z",
           "25-03-01T10:00:00Z",
           "+2025-03-01T10:00:00Z",
           "-2025-03-01T10:00:00Z",
           "20250-03-01T10:00:00Z",
           "2025/03/01T10:00:00Z",
           "2025-03-01T10.00.00Z",
           "2025-00-01T10:00:00Z",
           "2025-13-01T10:00:00Z",
           "2025-03-00T10:00:00Z",
           "2025-03-32T10:00:00Z",
           "2025-04-31T10:00:00Z",
           "2025-06-31T10:00:00Z",
           "2025-09-31T10:00:00Z",
           "2025-11-31T10:00:00Z",
           "2025-03-01T24:00:00Z",
           "2025-03-01T10:60:00Z",
           "2025-03-01T10:00:60Z",  // a leap second: Go refuses it too
           "2016-12-31T23:59:60Z",
           "2025-03-01T10:00:-1Z",
           "2025-03-01T1a:00:00Z",
           "２０２５-03-01T10:00:00Z",
       }) {
    EXPECT_EQ(ParseRfc3339(text), std::nullopt) << text;
  }
  EXPECT_EQ(ParseRfc3339(std::string_view("2025-03-01T10:00:00Z\0", 21)), std::nullopt);
}

TEST(ParseRfc3339Test, EveryDayOfEveryMonth) {
  for (int year : {1999, 2000, 2023, 2024}) {
    for (int month = 1; month <= 12; ++month) {
      for (int day = 1; day <= 32; ++day) {
        tm want{};
        want.tm_year = year - 1900;
        want.tm_mon = month - 1;
        want.tm_mday = day;
        const time_t s = timegm(&want);
        const bool exists = want.tm_mday == day;  // timegm normalised a day past the month's end
        char text[64];
        snprintf(text, sizeof(text), "%04d-%02d-%02dT00:00:00Z", year, month, day);
        if (exists) {
          EXPECT_EQ(ParseRfc3339(text), At(s)) << text;
        } else {
          EXPECT_EQ(ParseRfc3339(text), std::nullopt) << text;
        }
      }
    }
  }
}

TEST(Rfc3339Test, RoundTrips) {
  std::mt19937_64 random(7);
  // Two seconds in from the clock's start: flooring to a whole second must stay on the clock.
  std::uniform_int_distribution<int64_t> pick(std::numeric_limits<int64_t>::min() + 2000000000,
                                              std::numeric_limits<int64_t>::max());
  for (int i = 0; i < 100000; ++i) {
    const Time t{system_clock::duration(pick(random))};
    ASSERT_EQ(ParseRfc3339(FormatRfc3339(t, 9)), t) << FormatRfc3339(t, 9);
    const Time micros = std::chrono::floor<std::chrono::microseconds>(t);
    ASSERT_EQ(ParseRfc3339(FormatRfc3339(t, 6)), micros);
    const Time secs = std::chrono::floor<seconds>(t);
    ASSERT_EQ(ParseRfc3339(FormatRfc3339(t, 0)), secs);
  }
  for (const char* text :
       {"2025-03-01T10:00:00Z", "1969-12-31T23:59:59.999999Z", "2262-04-11T23:47:16.854775807Z"}) {
    const auto t = ParseRfc3339(text);
    ASSERT_TRUE(t.has_value()) << text;
    EXPECT_EQ(FormatRfc3339(*t, std::string(text).find('.') == std::string::npos
                                    ? 0
                                    : static_cast<int>(std::string(text).size() - 21)),
              text);
  }
}

}  // namespace
}  // namespace base
