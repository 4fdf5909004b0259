#include "base/strings.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "base/errno_error.h"

namespace base {
namespace {

using Views = std::vector<std::string_view>;

TEST(StringsTest, Join) {
  EXPECT_EQ(Join({}, ", "), "");
  EXPECT_EQ(Join({"a"}, ", "), "a");
  EXPECT_EQ(Join({"a", "", "c"}, "&"), "a&&c");
}

TEST(StringsTest, SplitKeepsEmptyPieces) {
  EXPECT_EQ(Split("", '/'), Views{""});
  EXPECT_EQ(Split("a", '/'), Views{"a"});
  EXPECT_EQ(Split("a//b/", '/'), (Views{"a", "", "b", ""}));
  EXPECT_EQ(Split("/a", '/'), (Views{"", "a"}));
}

TEST(ErrnoErrorTest, NamesTheCallThePathAndKeepsTheErrno) {
  Status s = ErrnoError("rename ..data_tmp to", "..data", ENOSPC);
  EXPECT_EQ(s.message(), "rename ..data_tmp to ..data: No space left on device");
  EXPECT_EQ(s.sys_errno(), ENOSPC);
}

TEST(StringsTest, HexDigitValue) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  for (char c : {'g', 'G', '/', ':', '@', '`', '\0', ' ', '\xff'}) {
    EXPECT_EQ(HexDigitValue(c), -1) << int(c);
  }
}

TEST(StringsTest, AsciiCaseOnly) {
  EXPECT_EQ(AsciiLower('A'), 'a');
  EXPECT_EQ(AsciiLower('z'), 'z');
  EXPECT_EQ(AsciiLower('@'), '@');
  EXPECT_EQ(AsciiLower('\xc4'), '\xc4');  // no locale: a byte above ASCII is left alone
  EXPECT_TRUE(EqualsIgnoreAsciiCase("Content-Length", "content-LENGTH"));
  EXPECT_FALSE(EqualsIgnoreAsciiCase("Content-Length", "Content-Lengt"));
  EXPECT_FALSE(EqualsIgnoreAsciiCase("a[", "A{"));  // '[' and '{' differ by the case bit
}

TEST(StringsTest, NulBytesAreFoundShownAndRefused) {
  using namespace std::string_literals;
  EXPECT_FALSE(HasNul(""));
  EXPECT_FALSE(HasNul("a/../b"));
  EXPECT_TRUE(HasNul("a/..\0x/PWNED"s));
  EXPECT_TRUE(HasNul("\0"s));
  EXPECT_TRUE(HasNul("x\0"s));
  EXPECT_EQ(ShowNul("a/..\0x\0"s), "a/..\\x00x\\x00");
  EXPECT_EQ(ShowNul("plain"), "plain");
  EXPECT_TRUE(CheckNoNul("/var/lib/kubelet", "--root-dir").ok());
  const Status bad = CheckNoNul("/var/lib\0/x"s, "--root-dir");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "--root-dir: must not contain a NUL byte");
}

}  // namespace
}  // namespace base
