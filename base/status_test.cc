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

TEST(StatusTest, OkHasCodeOk) {
  EXPECT_EQ(Status().code(), StatusCode::kOk);
  EXPECT_EQ(Status::OK().code(), StatusCode::kOk);
}

TEST(StatusTest, ErrorWithoutACodeIsUnknown) {
  EXPECT_EQ(Status::Error("boom").code(), StatusCode::kUnknown);
  EXPECT_EQ(Status::Error("boom", EIO).code(), StatusCode::kUnknown);
}

TEST(StatusTest, ErrorCarriesItsCode) {
  Status s = Status::Error(StatusCode::kRefused, "signal actions are not enabled", EPERM);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kRefused);
  EXPECT_EQ(s.message(), "signal actions are not enabled");
  EXPECT_EQ(s.sys_errno(), EPERM);
  EXPECT_EQ(Status::Error(StatusCode::kNotSent, "gone").code(), StatusCode::kNotSent);
  EXPECT_EQ(Status::Error(StatusCode::kUnavailable, "x").sys_errno(), 0);
}

TEST(StatusTest, AFailureIsNeverOk) {
  Status s = Status::Error(StatusCode::kOk, "made with kOk");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnknown);
  EXPECT_EQ(Status::Error("x").WithCode(StatusCode::kOk).code(), StatusCode::kUnknown);
}

TEST(StatusTest, TheCodeIsNotReadFromTheMessage) {
  // What the text says is no kind: only a producer's code is.
  EXPECT_EQ(Status::Error("refused: not allowed").code(), StatusCode::kUnknown);
  EXPECT_EQ(Status::Error(StatusCode::kRefused, "the address is not allowed").code(),
            StatusCode::kRefused);
}

TEST(StatusTest, WithCodeKeepsTheRestAndLeavesOkAlone) {
  Status s = Status::Error("read x: I/O error", EIO)
                 .WithApiStatus(404, "NotFound")
                 .WithCode(StatusCode::kUnavailable);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "read x: I/O error");
  EXPECT_EQ(s.sys_errno(), EIO);
  EXPECT_EQ(s.api_code(), 404);
  EXPECT_EQ(s.api_reason(), "NotFound");
  EXPECT_TRUE(Status::OK().WithCode(StatusCode::kUnavailable).ok());
  EXPECT_EQ(Status::OK().WithCode(StatusCode::kUnavailable).code(), StatusCode::kOk);
}

TEST(StatusTest, WithContextAndWithApiStatusKeepTheCode) {
  Status s = Status::Error(StatusCode::kNotSent, "the pod is terminating", ESRCH)
                 .WithContext("reload")
                 .WithApiStatus(410, "Gone");
  EXPECT_EQ(s.code(), StatusCode::kNotSent);
  EXPECT_EQ(s.message(), "reload: the pod is terminating");
  EXPECT_EQ(s.sys_errno(), ESRCH);
}

TEST(StatusTest, CopiesKeepTheCode) {
  Status a = Status::Error(StatusCode::kUnimplemented, "not served");
  Status b = a;
  Status c = std::move(a);
  EXPECT_EQ(b.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(c.code(), StatusCode::kUnimplemented);
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

TEST(ResultTest, StatusKeepsTheCode) {
  Result<int> good = 7;
  EXPECT_EQ(good.status().code(), StatusCode::kOk);
  Result<int> refused = Status::Error(StatusCode::kRefused, "no");
  EXPECT_EQ(refused.status().code(), StatusCode::kRefused);
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(3);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 3);
}

}  // namespace
}  // namespace base
