#include "kube/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace kube {
namespace {

TEST(Base64Test, DecodesStandardPadded) {
  const struct {
    const char* name;
    const char* in;
    std::string out;
  } cases[] = {
      {"empty", "", ""},
      {"one_byte", "YQ==", "a"},
      {"two_bytes", "YWI=", "ab"},
      {"three_bytes", "YWJj", "abc"},
      {"binary", "AP8A", std::string("\0\xff\0", 3)},
      {"newlines_ignored", "YW\r\nJj\n", "abc"},
      {"plus_slash", "+/8=", "\xfb\xff"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = DecodeBase64(c.in);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, c.out);
    EXPECT_EQ(*DecodeBase64(EncodeBase64(c.out)), c.out);
  }
}

TEST(Base64Test, RejectsInvalidNamingOffsetOnly) {
  const struct {
    const char* name;
    const char* in;
    const char* error;
  } cases[] = {
      {"bad_char", "YW*j", "illegal base64 data at input byte 2"},
      {"missing_padding", "YQ", "illegal base64 data at input byte 2"},
      {"half_padding", "YQ=", "illegal base64 data at input byte 3"},
      {"url_safe", "-_8=", "illegal base64 data at input byte 0"},
      {"data_after_padding", "YQ==YQ==", "illegal base64 data at input byte 4"},
      {"early_padding", "Y===", "illegal base64 data at input byte 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = DecodeBase64(c.in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), c.error);
  }
}

}  // namespace
}  // namespace kube
