#include "plugins/aggregate_error.h"

#include <gtest/gtest.h>

namespace plugins {
namespace {

TEST(AggregateErrorTest, FormatsAsUtilErrorsAggregate) {
  using base::Status;
  const struct {
    const char* name;
    std::vector<Status> errors;
    const char* expected;  // nullptr: OK
  } cases[] = {
      {"none", {}, nullptr},
      {"only_ok", {Status::OK()}, nullptr},
      {"one", {Status::OK(), Status::Error("a")}, "a"},
      {"two", {Status::Error("a"), Status::Error("b")}, "[a, b]"},
      {"repeats_dropped", {Status::Error("a"), Status::Error("b"), Status::Error("a")}, "[a, b]"},
      {"all_same", {Status::Error("a"), Status::Error("a")}, "a"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Status s = AggregateError(c.errors);
    if (c.expected == nullptr) {
      EXPECT_TRUE(s.ok());
    } else {
      EXPECT_EQ(s.message(), c.expected);
    }
  }
}

TEST(AggregateErrorTest, KeepsTheApiStatusAllErrorsShare) {
  using base::Status;
  const Status a = Status::Error("a").WithApiStatus(403, "Forbidden");
  const Status b = Status::Error("b").WithApiStatus(403, "Forbidden");
  const Status c = Status::Error("c").WithApiStatus(404, "NotFound");
  EXPECT_EQ(AggregateError({a}).api_code(), 403);
  const Status both = AggregateError({a, b});
  EXPECT_EQ(both.message(), "[a, b]");
  EXPECT_EQ(both.api_code(), 403);
  EXPECT_EQ(both.api_reason(), "Forbidden");
  EXPECT_EQ(AggregateError({a, c}).api_code(), 0) << "two different answers are neither";
  EXPECT_EQ(AggregateError({a, Status::Error("x")}).api_code(), 0);
}

}  // namespace
}  // namespace plugins
