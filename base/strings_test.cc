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

}  // namespace
}  // namespace base
