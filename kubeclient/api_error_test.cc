#include "kubeclient/api_error.h"

#include <gtest/gtest.h>

namespace kubeclient {
namespace {

struct Case {
  std::string name;
  long code;
  std::map<std::string, std::string> headers;
  std::string body;
  std::string method;
  std::string reason;
  int retry_after;
};

TEST(ParseApiErrorTest, StatusBodiesAndCodeClassification) {
  const std::vector<Case> cases = {
      {"Status body",
       404,
       {},
       R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"configmaps"},"code":404})",
       "GET",
       "NotFound",
       -1},
      {"text 429 with Retry-After",
       429,
       {{"retry-after", "1"}},
       "Too many requests, please try again later.\n",
       "GET",
       "TooManyRequests",
       1},
      {"HTML 502", 502, {}, "<html>bad gateway</html>", "GET", "InternalError", -1},
      {"empty 409 on POST", 409, {}, "", "POST", "AlreadyExists", -1},
      {"empty 409 on PUT", 409, {}, "", "PUT", "Conflict", -1},
      {"410 Gone is Expired",
       410,
       {},
       R"({"kind":"Status","status":"Failure","reason":"Gone","code":410})",
       "GET",
       "Expired",
       -1},
      {"410 without reason",
       410,
       {},
       R"({"kind":"Status","status":"Failure","code":410})",
       "GET",
       "Expired",
       -1},
      {"details.retryAfterSeconds",
       500,
       {},
       R"({"kind":"Status","reason":"ServerTimeout","details":{"retryAfterSeconds":3},"code":500})",
       "GET",
       "ServerTimeout",
       3},
      {"non-integer Retry-After ignored",
       503,
       {{"retry-after", "soon"}},
       "",
       "GET",
       "ServiceUnavailable",
       -1},
      {"415", 415, {}, "", "PATCH", "UnsupportedMediaType", -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ApiError err = ParseApiError(c.code, c.headers, c.body, c.method);
    EXPECT_EQ(err.code, c.code);
    EXPECT_EQ(err.reason, c.reason);
    EXPECT_EQ(err.retry_after_seconds, c.retry_after);
    EXPECT_FALSE(err.message.empty());
  }
}

TEST(ParseApiErrorTest, TooLargeResourceVersionAndContinueToken) {
  ApiError err = ParseApiError(
      504, {{"retry-after", "1"}},
      R"({"kind":"Status","reason":"Timeout","code":504,"details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1}})");
  EXPECT_TRUE(err.IsTooLargeResourceVersion());
  ApiError expired = ParseApiError(
      410, {}, R"({"kind":"Status","metadata":{"continue":"abc"},"reason":"Expired","code":410})");
  EXPECT_TRUE(expired.IsExpired());
  EXPECT_EQ(expired.continue_token, "abc");
}

TEST(ApiErrorFromStatusObjectTest, WatchErrorEvent) {
  ApiError err = ApiErrorFromStatusObject(
      500,
      R"({"kind":"Status","status":"Failure","message":"too old","reason":"Expired","code":410})");
  EXPECT_TRUE(err.IsExpired());
  EXPECT_EQ(ApiErrorFromStatusObject(500, "\"nonsense\"").code, 500);
}

}  // namespace
}  // namespace kubeclient
