#include "kube/quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace kube {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct ValueCase {
  const char* name;
  const char* text;
  int64_t value;
  int64_t milli;
};

TEST(QuantityTest, ParsesAsKubernetes) {
  const ValueCase cases[] = {
      {"zero", "0", 0, 0},
      {"plain", "128", 128, 128000},
      {"milli", "500m", 1, 500},
      {"milli_exact", "1500m", 2, 1500},
      {"fraction", "0.1", 1, 100},
      {"decimal_kilo", "1k", 1000, 1000000},
      {"mebi", "64Mi", 67108864, 67108864000},
      {"kibi", "2Ki", 2048, 2048000},
      {"exponent", "1e3", 1000, 1000000},
      {"exponent_upper_negative", "5E-2", 1, 50},
      {"exa", "1E", 1000000000000000000, kMax},
      {"giga_fraction", "1.5G", 1500000000, 1500000000000},
      {"binary_fraction", "1.5Gi", 1610612736, 1610612736000},
      {"nano_rounds_up", "1n", 1, 1},
      {"below_nano_rounds_up", "0.0000000001", 1, 1},
      {"micro", "1u", 1, 1},
      {"leading_zeros", "007", 7, 7000},
      {"plus_sign", "+5", 5, 5000},
      {"negative", "-1500m", -1, -1500},
      {"trailing_dot", "1.", 1, 1000},
      {"only_dot", ".", 0, 0},
      {"only_sign", "-", 0, 0},
      {"leading_dot", ".5", 1, 500},
      {"capped", "10E", kMax, kMax},
      {"capped_binary", "9Ei", kMax, kMax},
      {"huge_exponent", "1e100", kMax, kMax},
      {"tiny_exponent", "1e-100", 1, 1},
      {"many_digits", "123456789012345678901234567890", kMax, kMax},
  };
  for (const ValueCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto q = Quantity::Parse(c.text);
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_EQ(q->Value(), c.value);
    EXPECT_EQ(q->MilliValue(), c.milli);
  }
}

// Exact values (in nanos) of inputs upstream's own parser tests cover, including its rounding.
TEST(QuantityTest, ExactValuesInNanos) {
  constexpr Int128 kUnit = 1'000'000'000;
  const struct {
    const char* text;
    Int128 nanos;
  } cases[] = {
      {"0n", 0},
      {"0Ki", 0},
      {"5n", 5},
      {"4u", 4'000},
      {"3m", 3'000'000},
      {"50k", 50'000 * kUnit},
      {"3Ei", Int128{3} * (Int128{1} << 60) * kUnit},
      {"100.035k", 100'035 * kUnit},
      {"0.0005k", 500'000'000},
      {"0.5e-2", 5'000'000},
      {"1.3E+6", 1'300'000 * kUnit},
      {"10.035M", 10'035'000 * kUnit},
      {"6.987654321G", Int128{6'987'654'321} * kUnit},
      {"3.001n", 4},
      {"1.1E-9", 2},
      {"0.0000000005", 1},
      {"0.9n", 1},
      {"0.00000012345", 124},
      {"0.00000012354", 124},
      {"100.035Ki", Int128{102'435'840'000'000}},
      {"0.5Mi", 524'288 * kUnit},
      {"0.05Gi", Int128{53'687'091'200'000'000}},
      {"0.025Ti", Int128{27'487'790'694} * kUnit + 400'000'000},
      {"0.000000000001Ki", 2},
      {".0001k", 100'000'000},
      {"1.G", 1'000'000'000 * kUnit},
      {"-3.001n", -4},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto q = Quantity::Parse(c.text);
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_TRUE(q->nanos() == c.nanos) << static_cast<double>(q->nanos());
  }
}

TEST(QuantityTest, EqualValuesCompareEqual) {
  EXPECT_EQ(*Quantity::Parse("1k"), *Quantity::Parse("1000"));
  EXPECT_EQ(*Quantity::Parse("1Ki"), *Quantity::Parse("1024"));
  EXPECT_EQ(*Quantity::Parse("1e3"), *Quantity::Parse("1k"));
  EXPECT_EQ(*Quantity::Parse("0.5"), *Quantity::Parse("500m"));
  EXPECT_FALSE(*Quantity::Parse("1k") == *Quantity::Parse("1Ki"));
  EXPECT_TRUE(Quantity::Parse("0")->IsZero());
  EXPECT_EQ(Quantity::FromInt(3), *Quantity::Parse("3"));
}

TEST(QuantityTest, RejectsMalformed) {
  const struct {
    const char* name;
    const char* text;
    const char* error;
  } cases[] = {
      {"empty", "", "quantities must match the regular expression"},
      {"letters", "abc", "quantities must match the regular expression"},
      {"space_in_suffix", "1 Ki", "quantities must match the regular expression"},
      {"trailing_garbage", "1Kix", "quantities must match the regular expression"},
      {"two_dots", "1.5.5", "quantities must match the regular expression"},
      {"unknown_suffix", "1Ki2", "unable to parse quantity's suffix"},
      {"lone_e", "1e", "unable to parse quantity's suffix"},
      {"e_sign_only", "1e+", "unable to parse quantity's suffix"},
      {"bad_letters", "1mm", "unable to parse quantity's suffix"},
      {"lower_kibi", "1ki", "unable to parse quantity's suffix"},
      {"exponent_overflow", "1e99999999999999999999", "unable to parse quantity's suffix"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto q = Quantity::Parse(c.text);
    ASSERT_FALSE(q.ok());
    EXPECT_NE(q.status().message().find(c.error), std::string::npos) << q.status().message();
  }
}

TEST(QuantityTest, LongFractionStaysExact) {
  // 0.5 followed by many zeros and a final 1: just above half a unit.
  std::string text = "0.5" + std::string(5000, '0') + "1";
  auto q = Quantity::Parse(text);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->MilliValue(), 501);  // rounded up to the next nano, then up to the next milli
  EXPECT_EQ(q->Value(), 1);
  auto b = Quantity::Parse("0.0000000000000000000001Ki");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->nanos(), 1);
}

}  // namespace
}  // namespace kube
