#include "cache/change_detection_strategy.h"

#include <gtest/gtest.h>

#include <optional>

namespace cache {
namespace {

struct ParseCase {
  const char* name;
  const char* input;
  std::optional<ChangeDetectionStrategy> want;  // nullopt: an error
};

void PrintTo(const ParseCase& c, std::ostream* os) { *os << c.name; }

class ParseStrategyTest : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParseStrategyTest, AcceptsTheKubeletsThreeModesOnly) {
  auto got = ParseChangeDetectionStrategy(GetParam().input);
  if (GetParam().want) {
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, *GetParam().want);
    EXPECT_STREQ(ChangeDetectionStrategyName(*got), GetParam().input);
  } else {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().message(),
              std::string("unknown configmap and secret manager mode: ") + GetParam().input);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseStrategyTest,
    ::testing::Values(ParseCase{"get", "Get", ChangeDetectionStrategy::kGet},
                      ParseCase{"cache", "Cache", ChangeDetectionStrategy::kCache},
                      ParseCase{"watch", "Watch", ChangeDetectionStrategy::kWatch},
                      ParseCase{"lower_case", "watch", std::nullopt},
                      ParseCase{"empty", "", std::nullopt},
                      ParseCase{"other", "Poll", std::nullopt}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace cache
