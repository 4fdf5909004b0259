#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace base {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.sys_errno(), 0);
}

TEST(StatusTest, ErrorCarriesMessageAndErrno) {
  Status s = Status::Error("rename ..data_tmp: No space left on device", ENOSPC);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "rename ..data_tmp: No space left on device");
  EXPECT_EQ(s.sys_errno(), ENOSPC);
}

TEST(StatusTest, WithContextPrefixesFailuresOnly) {
  EXPECT_TRUE(Status::OK().WithContext("write").ok());
  Status s = Status::Error("boom", EIO).WithContext("write volume");
  EXPECT_EQ(s.message(), "write volume: boom");
  EXPECT_EQ(s.sys_errno(), EIO);
}

TEST(ResultTest, HoldsValueOrError) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  EXPECT_TRUE(good.status().ok());

  Result<int> bad = Status::Error("nope");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "nope");
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(3);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 3);
}

}  // namespace
}  // namespace base
