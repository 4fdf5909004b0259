#include "config/go_duration.h"

#include <gtest/gtest.h>

namespace config {
namespace {

using std::chrono::nanoseconds;

TEST(GoDurationTest, Parses) {
  const struct {
    const char* in;
    int64_t ns;
  } cases[] = {
      {"0", 0},
      {"0s", 0},
      {"500ms", 500000000},
      {"10s", 10000000000},
      {"1m", 60000000000},
      {"1m30s", 90000000000},
      {"1.5h", 5400000000000},
      {"2h45m", 9900000000000},
      {"100us", 100000},
      {"100\xC2\xB5s", 100000},
      {"3ns", 3},
      {".5s", 500000000},
      {"1.s", 1000000000},
      {"+5s", 5000000000},
      // Exact to the nanosecond up to the int64 limit, as Go (a long double sum was 1 ns off
      // here; found by go_duration_fuzzer).
      {"9223372036.854775801s", 9223372036854775801},
      {"2562047h47m16.854775807s", 9223372036854775807},
      // Below a nanosecond Go truncates.
      {"1.9ns", 1},
      {"0.1234567899s", 123456789},
      // Go's fraction step, float64(f) * (unit / 10^k) with the trailing zeros counted in f and
      // k, is inexact when 10^k does not divide the unit: 59 ns and 0 ns in Go, not 60 and 1
      // (go_duration_fuzzer's reference expected the exact values).
      {".00000000100000m", 59},
      {"0.00000100000000000ms", 0},
      {"1h.00000000100000m0.000000001s0m0.000000001s0001s", 3601000000061},
  };
  for (const auto& c : cases) {
    auto d = ParseGoDuration(c.in);
    ASSERT_TRUE(d.ok()) << c.in << ": " << d.status().message();
    EXPECT_EQ(d->count(), c.ns) << c.in;
  }
}

TEST(GoDurationTest, RejectsWithAClearMessage) {
  const struct {
    const char* in;
    const char* error;
  } cases[] = {
      {"", "invalid duration \"\": want a number with a unit, e.g. 500ms, 10s, 1m30s"},
      {"10", "invalid duration \"10\": missing unit"},
      {"10x", "invalid duration \"10x\": unknown unit \"x\""},
      {"-1s", "invalid duration \"-1s\": must not be negative"},
      {"s", "invalid duration \"s\": want a number with a unit, e.g. 500ms, 10s, 1m30s"},
      {"1m.", "invalid duration \"1m.\": want a number with a unit, e.g. 500ms, 10s, 1m30s"},
      {"99999999999h", "invalid duration \"99999999999h\": too large"},
      {"2562047h47m16.854775808s", "invalid duration \"2562047h47m16.854775808s\": too large"},
      {"9223372036854775808ns", "invalid duration \"9223372036854775808ns\": too large"},
      // Two terms of 2^63 ns: Go's uint64 sum wraps to 0 and accepts it; too large here
      // (found by go_duration_fuzzer).
      {"9223372036854775808ns9223372036854775808ns",
       "invalid duration \"9223372036854775808ns9223372036854775808ns\": too large"},
      // Out of range whatever the unit (go_duration_fuzzer's 128-bit reference overflowed here).
      {"1m1m854775809223378547758054775807s",
       "invalid duration \"1m1m854775809223378547758054775807s\": too large"},
  };
  for (const auto& c : cases) {
    auto d = ParseGoDuration(c.in);
    ASSERT_FALSE(d.ok()) << c.in;
    EXPECT_EQ(d.status().message(), c.error);
  }
}

TEST(GoDurationTest, Formats) {
  EXPECT_EQ(FormatGoDuration(nanoseconds(0)), "0s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(500000000)), "500ms");
  EXPECT_EQ(FormatGoDuration(nanoseconds(1500000)), "1.5ms");
  EXPECT_EQ(FormatGoDuration(nanoseconds(1500000000)), "1.5s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(60000000000)), "1m");
  EXPECT_EQ(FormatGoDuration(nanoseconds(90000000000)), "1m30s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(3600000000000)), "1h");
  EXPECT_EQ(FormatGoDuration(nanoseconds(122000000000)), "2m2s");
}

}  // namespace
}  // namespace config
