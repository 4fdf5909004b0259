#include "kubeclient/api_health.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/log_capture.h"

namespace kubeclient {
namespace {

using std::chrono::seconds;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

ApiError Unauthorized() {
  return ParseApiError(401, {}, R"({"kind":"Status","reason":"Unauthorized","code":401})");
}

class ApiHealthTest : public ::testing::Test {
 protected:
  ApiHealthOptions Options() {
    ApiHealthOptions options;
    options.server = "https://127.0.0.1:6443";
    options.clock = [this] { return now_; };
    return options;
  }
  std::chrono::steady_clock::time_point now_{};
};

TEST(ClassifyApiErrorTest, TrustCredentialsAndCertificatesArePermanentOutagesTransient) {
  struct Case {
    ApiError error;
    FailureClass failure_class;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {TransportError("not trusted", TransportFault::kUntrustedServer), FailureClass::kPermanent,
       "untrusted_server"},
      {TransportError("bad key", TransportFault::kClientCertificate), FailureClass::kPermanent,
       "client_certificate"},
      {Unauthorized(), FailureClass::kPermanent, "unauthorized"},
      {TransportError("connection refused"), FailureClass::kTransient, "unreachable"},
      {ParseApiError(503, {}, "unavailable"), FailureClass::kTransient, "server_error"},
      {ParseApiError(429, {}, "slow down"), FailureClass::kTransient, "throttled"},
      {ParseApiError(403, {}, "forbidden"), FailureClass::kAnswered, ""},
      {ParseApiError(404, {}, ""), FailureClass::kAnswered, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error.ToString());
    const FailureKind kind = ClassifyApiError(c.error);
    EXPECT_EQ(kind.failure_class, c.failure_class);
    EXPECT_EQ(kind.reason, c.reason);
  }
  // A transport failure made without a kind is never taken for "answered".
  EXPECT_EQ(ClassifyApiError(TransportError("x", TransportFault::kNone)).failure_class,
            FailureClass::kTransient);
}

TEST_F(ApiHealthTest, APermanentFailureBeforeTheServerWasReachedGoesToTheHandlerOnce) {
  ApiHealth health(Options());
  int told = 0;
  health.SetOnPermanentBeforeReach([&](const ApiHealth::Problem& problem) {
    ++told;
    EXPECT_EQ(problem.reason, "untrusted_server");
  });
  health.OnOutcome(TransportError("connection refused"));  // transient: not told
  EXPECT_EQ(told, 0);
  health.OnOutcome(TransportError("not trusted", TransportFault::kUntrustedServer));
  health.OnOutcome(TransportError("not trusted", TransportFault::kUntrustedServer));
  EXPECT_EQ(told, 1);
  EXPECT_FALSE(health.reached());
}

TEST_F(ApiHealthTest, APermanentFailureAfterAStartIsAnErrorRateLimitedAndAnAnswerClearsIt) {
  vmtest::LogCapture log;
  ApiHealth health(Options());
  int told = 0;
  health.SetOnPermanentBeforeReach([&](const ApiHealth::Problem&) { ++told; });
  int first_answers = 0;
  health.SetOnFirstAnswer([&] { ++first_answers; });
  health.OnOutcome(std::nullopt);
  health.OnOutcome(std::nullopt);
  EXPECT_EQ(first_answers, 1);
  ASSERT_TRUE(health.reached());

  for (int i = 0; i < 50; ++i) {
    health.OnOutcome(Unauthorized());
    now_ += seconds(1);
  }
  EXPECT_EQ(told, 0);  // reached once: never the start-up handler
  ASSERT_TRUE(health.permanent());
  EXPECT_EQ(health.problem()->reason, "unauthorized");
  EXPECT_EQ(health.problem()->attempts, 50u);
  EXPECT_EQ(Count(log.text(), "[error]"), 1u) << log.text();
  EXPECT_NE(log.text().find("reason=\"unauthorized\""), std::string::npos) << log.text();
  // A connection refused meanwhile does not hide it.
  health.OnOutcome(TransportError("connection refused"));
  EXPECT_TRUE(health.permanent());
  now_ += seconds(300);
  health.OnOutcome(Unauthorized());
  EXPECT_EQ(Count(log.text(), "[error]"), 2u) << log.text();
  EXPECT_NE(health.Describe().find("permanent API failure (unauthorized)"), std::string::npos)
      << health.Describe();

  health.OnOutcome(std::nullopt);
  EXPECT_FALSE(health.problem().has_value());
  EXPECT_EQ(health.Describe(), "");
  EXPECT_NE(log.text().find("The API server answers again"), std::string::npos) << log.text();
  EXPECT_EQ(health.failures().at({"permanent", "unauthorized"}), 51u);
  EXPECT_EQ(health.failures().at({"transient", "unreachable"}), 1u);
  EXPECT_EQ(first_answers, 1);
}

TEST_F(ApiHealthTest, AnOutageIsAWarningOnlyOnceItLasts) {
  vmtest::LogCapture log;
  ApiHealth health(Options());
  health.OnOutcome(std::nullopt);
  for (int i = 0; i < 29; ++i) {
    health.OnOutcome(TransportError("connection refused"));
    now_ += seconds(1);
  }
  EXPECT_EQ(Count(log.text(), "[warning]"), 0u) << log.text();
  EXPECT_FALSE(health.permanent());
  ASSERT_TRUE(health.problem().has_value());
  for (int i = 0; i < 10; ++i) {
    health.OnOutcome(TransportError("connection refused"));
    now_ += seconds(1);
  }
  EXPECT_EQ(Count(log.text(), "[warning]"), 1u) << log.text();
  EXPECT_NE(log.text().find("failedForSeconds=30"), std::string::npos) << log.text();
  // A permanent failure replaces it at once.
  health.OnOutcome(TransportError("not trusted", TransportFault::kUntrustedServer));
  EXPECT_TRUE(health.permanent());
  EXPECT_EQ(Count(log.text(), "[error]"), 1u) << log.text();
}

}  // namespace
}  // namespace kubeclient
