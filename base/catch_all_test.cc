#include "base/catch_all.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

namespace base {
namespace {

TEST(CatchAllTest, ABodyThatReturnsNothingIsOk) {
  int calls = 0;
  EXPECT_TRUE(CatchAll("timer", [&] { ++calls; }).ok());
  EXPECT_EQ(calls, 1);
}

TEST(CatchAllTest, ABodyStatusIsPassedThrough) {
  Status s = CatchAll("timer", [] { return Status::Error("disk full", 28); });
  EXPECT_EQ(s.message(), "disk full");
  EXPECT_EQ(s.sys_errno(), 28);
}

TEST(CatchAllTest, AnExceptionBecomesAFailureNamingTheCallback) {
  struct Case {
    const char* name;
    void (*body)();
    const char* message;
  };
  const Case cases[] = {
      {"std exception", [] { throw std::runtime_error("boom"); },
       "http header callback threw: boom"},
      {"bad_alloc", [] { throw std::bad_alloc(); }, "http header callback threw: std::bad_alloc"},
      {"not a std exception", [] { throw 42; },
       "http header callback threw a non-standard exception"},
  };
  for (const Case& c : cases) {
    Status s = CatchAll("http header callback", c.body);
    EXPECT_FALSE(s.ok()) << c.name;
    EXPECT_EQ(s.message(), c.message) << c.name;
  }
}

TEST(CatchAllTest, IsNoexcept) {
  static_assert(noexcept(CatchAll("x", [] { throw 1; })));
}

}  // namespace
}  // namespace base
