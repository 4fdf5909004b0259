#include "logging/go_quote.h"

#include <gtest/gtest.h>

namespace logging {
namespace {

TEST(GoQuoteTest, MatchesStrconvQuote) {
  const struct {
    const char* name;
    std::string in;
    const char* out;
  } cases[] = {
      {"plain", "value1", R"("value1")"},
      {"empty", "", R"("")"},
      {"quote_backslash", "a\"b\\c", R"("a\"b\\c")"},
      {"short_escapes", "\a\b\f\n\r\t\v", R"("\a\b\f\n\r\t\v")"},
      {"control", std::string("\x01\x1f\x7f", 3), R"("\x01\x1f\x7f")"},
      {"nul", std::string("a\0b", 3), R"("a\x00b")"},
      {"utf8_printable", "h\xc3\xa9llo \xe4\xb8\x96", "\"h\xc3\xa9llo \xe4\xb8\x96\""},
      {"emoji", "\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},
      {"invalid_utf8", "\xff\xc3", R"("\xff\xc3")"},
      {"overlong", "\xc0\xaf", R"("\xc0\xaf")"},
      {"c1_control", "\xc2\x85", R"("\u0085")"},
      {"nbsp", "\xc2\xa0", R"("\u00a0")"},
      {"zero_width_space", "\xe2\x80\x8b", R"("\u200b")"},
      {"bom", "\xef\xbb\xbf", R"("\ufeff")"},
      {"line_separator", "\xe2\x80\xa8", R"("\u2028")"},
      {"private_plane", "\xf3\xb0\x80\x80", R"("\U000f0000")"},
      {"json_value", R"({"a": [1, 2]})", R"("{\"a\": [1, 2]}")"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(GoQuote(c.in), c.out);
  }
}

}  // namespace
}  // namespace logging
