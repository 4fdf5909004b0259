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

}  // namespace
}  // namespace plugins
