// The event recorder against kube-test-apiserver: what it creates, how repeats and similar events
// reach the server (PATCHed count, combined message), the rate limit, a 4xx, a 5xx and a
// transport failure, and that nothing it writes or logs carries text the caller did not pass.
#include "kubeclient/events/event_recorder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kubeclient/auth/credentials.h"
#include "tests/apiserver/test_apiserver_process.h"
#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace kubeclient {
namespace {

using kube_testing::TestApiServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using vmtest::TestLoop;

const std::string kEvents = "/api/v1/namespaces/shop/events";
const EventTime kT0 = EventTime{} + std::chrono::seconds(1'740'823'200);  // 2025-03-01T10:00:00Z

InvolvedObject Pod(const std::string& name = "web-0") {
  return {"Pod", "v1", "shop", name, "3b1f6c2e-" + name, "48190"};
}

class EventRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    auto creds = LoadKubeconfig({server_.kubeconfig()});
    ASSERT_TRUE(creds.ok());
    creds_ = *creds;
  }

  void TearDown() override {
    recorder_.reset();
    api_.reset();
    http_.reset();
    EXPECT_TRUE(runner_.Close()) << "a libuv handle was left open";
  }

  void StartRecorder(Credentials creds, int max_tries = 12) {
    auto http = HttpClient::Create(runner_.get(), creds);
    ASSERT_TRUE(http.ok());
    http_ = std::move(*http);
    RetryPolicy policy;
    policy.max_transient_retries = 0;
    api_ = std::make_unique<ApiClient>(http_.get(), policy);
    EventRecorderOptions options;
    options.host = "node-1";
    options.max_tries = max_tries;
    options.retry_interval = std::chrono::milliseconds(20);
    options.clock = [this] { return now_; };
    recorder_ = std::make_unique<EventRecorder>(api_.get(), options);
  }
  void StartRecorder() { StartRecorder(creds_); }

  bool WaitIdle() {
    return runner_.RunUntil([&] { return recorder_->pending() == 0; });
  }

  std::vector<nlohmann::json> ServerEvents() {
    const kube_testing::HttpReply reply = server_.Api("GET", kEvents);
    std::vector<nlohmann::json> events;
    for (const auto& e : reply.body["items"]) events.push_back(e);
    return events;
  }

  // "METHOD path" of the event writes the server answered, with their codes.
  std::vector<std::string> EventWrites() {
    std::vector<std::string> writes;
    const kube_testing::HttpReply reply = server_.Admin("GET", "requests");
    for (const auto& r : reply.body["requests"]) {
      const std::string path = r["path"];
      if (r["method"] == "GET" || !path.starts_with(kEvents)) continue;
      writes.push_back(r["method"].get<std::string>() + " " + r["content_type"].get<std::string>() +
                       " " + std::to_string(r.value("code", 0)));
    }
    return writes;
  }

  TestApiServerProcess server_;
  TestLoop runner_;
  Credentials creds_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<ApiClient> api_;
  std::unique_ptr<EventRecorder> recorder_;
  EventTime now_ = kT0;
  vmtest::LogCapture log_;
};

TEST_F(EventRecorderTest, CreatesTheEventOfTheSpec) {
  StartRecorder();
  const std::string message =
      "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app-config\" not found";
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().created, 1);
  auto events = ServerEvents();
  ASSERT_EQ(events.size(), 1u);
  nlohmann::json e = events[0];
  EXPECT_EQ(e["metadata"]["name"], EventName("web-0", kT0));  // web-0.<nanoseconds in hex>
  EXPECT_EQ(e["metadata"]["namespace"], "shop");
  EXPECT_EQ(e["involvedObject"], (nlohmann::json{{"kind", "Pod"},
                                                 {"apiVersion", "v1"},
                                                 {"namespace", "shop"},
                                                 {"name", "web-0"},
                                                 {"uid", "3b1f6c2e-web-0"},
                                                 {"resourceVersion", "48190"}}));
  EXPECT_EQ(e["reason"], "FailedMount");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["message"], message);
  EXPECT_EQ(e["source"], (nlohmann::json{{"component", "volumemanager"}, {"host", "node-1"}}));
  EXPECT_EQ(e["reportingComponent"], "volumemanager");
  EXPECT_EQ(e["reportingInstance"], "node-1");
  EXPECT_EQ(e["firstTimestamp"], "2025-03-01T10:00:00Z");
  EXPECT_EQ(e["lastTimestamp"], "2025-03-01T10:00:00Z");
  EXPECT_EQ(e["count"], 1);
  // Nothing the spec says to leave unset.
  for (const char* unset : {"eventTime", "series", "action", "related"}) {
    EXPECT_FALSE(e.contains(unset)) << unset;
  }
}

TEST_F(EventRecorderTest, RepeatsArePatchedCountsAndAnExpiredEventIsCreatedAgain) {
  StartRecorder();
  const std::string message =
      "MountVolume.SetUp failed for volume \"cfg\" : configmap \"a\" not found";
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);
  ASSERT_TRUE(WaitIdle());
  for (int i = 1; i <= 2; ++i) {
    now_ = kT0 + std::chrono::seconds(30 * i);
    recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);
    ASSERT_TRUE(WaitIdle());
  }
  auto events = ServerEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 3);
  EXPECT_EQ(events[0]["firstTimestamp"], "2025-03-01T10:00:00Z");
  EXPECT_EQ(events[0]["lastTimestamp"], "2025-03-01T10:01:00Z");
  EXPECT_EQ(recorder_->stats().created, 1);
  EXPECT_EQ(recorder_->stats().patched, 2);
  EXPECT_THAT(EventWrites(),
              ::testing::ElementsAre("POST application/json 201",
                                     "PATCH application/strategic-merge-patch+json 200",
                                     "PATCH application/strategic-merge-patch+json 200"));

  // The event expires on the server: the next repeat's PATCH gets 404 and it is created again
  // under the same name, with the count it has reached.
  const std::string name = events[0]["metadata"]["name"];
  ASSERT_EQ(server_.Api("DELETE", kEvents + "/" + name).code, 200);
  server_.Admin("DELETE", "requests");
  now_ = kT0 + std::chrono::seconds(90);
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);
  ASSERT_TRUE(WaitIdle());
  events = ServerEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["metadata"]["name"], name);
  EXPECT_EQ(events[0]["count"], 4);
  EXPECT_THAT(EventWrites(),
              ::testing::ElementsAre("PATCH application/strategic-merge-patch+json 404",
                                     "POST application/json 201"));
}

TEST_F(EventRecorderTest, SimilarEventsAreCombined) {
  StartRecorder();
  for (int i = 1; i <= 12; ++i) {
    now_ = kT0 + std::chrono::seconds(i);
    recorder_->Record(Pod(), EventType::kWarning, "FailedMount",
                      "MountVolume.SetUp failed for volume \"v" + std::to_string(i) + "\"");
  }
  ASSERT_TRUE(WaitIdle());
  std::map<std::string, int> counts;  // message -> count
  for (const auto& e : ServerEvents()) counts[e["message"]] = e["count"];
  EXPECT_EQ(counts.size(), 10u);  // 9 single events and one combined one
  EXPECT_EQ(
      counts.at("(combined from similar events): MountVolume.SetUp failed for volume \"v12\""), 3);
  EXPECT_EQ(counts.at("MountVolume.SetUp failed for volume \"v9\""), 1);
  EXPECT_EQ(counts.count("MountVolume.SetUp failed for volume \"v10\""), 0u);
}

TEST_F(EventRecorderTest, RateLimitedPerObject) {
  StartRecorder();
  for (int i = 0; i < 30; ++i) {
    recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "m");
    recorder_->Record(Pod("web-1"), EventType::kWarning, "FailedMount", "m");
  }
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().rate_limited, 10);
  auto events = ServerEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["count"], 25);
  EXPECT_EQ(events[1]["count"], 25);
  // Five minutes later, one more per object gets through.
  now_ = kT0 + std::chrono::seconds(300);
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "m");
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "m");
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().rate_limited, 11);
  for (const auto& e : ServerEvents()) {
    if (e["involvedObject"]["name"] == "web-0") {
      EXPECT_EQ(e["count"], 31);  // the skipped ones were counted too, as in client-go
    }
  }
}

TEST_F(EventRecorderTest, A4xxDropsTheEventWithoutRetrying) {
  StartRecorder();
  server_.Admin("POST", "faults",
                {{"verb", "create"}, {"resource", "events"}, {"status", 403}, {"times", 1}});
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "first");
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "second");
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().rejected, 1);
  EXPECT_EQ(recorder_->stats().retries, 0);
  auto events = ServerEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["message"], "second");
  EXPECT_THAT(EventWrites(),
              ::testing::ElementsAre("POST application/json 403", "POST application/json 201"));
}

TEST_F(EventRecorderTest, A5xxIsRetriedUntilItIsWritten) {
  StartRecorder();
  server_.Admin("POST", "faults",
                {{"verb", "create"}, {"resource", "events"}, {"status", 503}, {"times", 3}});
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "m");
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().retries, 3);
  EXPECT_EQ(recorder_->stats().created, 1);
  EXPECT_EQ(ServerEvents().size(), 1u);
}

TEST_F(EventRecorderTest, ATransportFailureIsTriedTwelveTimesThenDropped) {
  server_.Stop();  // its port now refuses connections
  StartRecorder(creds_);
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", "m");
  recorder_->Record(Pod("web-1"), EventType::kWarning, "FailedMount", "m");
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().retries, 2 * 11);
  EXPECT_EQ(recorder_->stats().gave_up, 2);
  EXPECT_EQ(recorder_->stats().created, 0);
}

TEST_F(EventRecorderTest, LogsNameReasonAndObjectButNeverTheMessage) {
  StartRecorder(creds_, 3);
  const std::string message = "volume \"cfg\": marker-7f3a9c";
  server_.Admin("POST", "faults",
                {{"verb", "create"}, {"resource", "events"}, {"status", 422}, {"times", 1}});
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);  // rejected
  server_.Admin("POST", "faults",
                {{"verb", "create"}, {"resource", "events"}, {"status", 503}, {"times", 1}});
  recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);  // retried, written
  for (int i = 0; i < 30; ++i) {
    recorder_->Record(Pod(), EventType::kWarning, "FailedMount", message);  // rate-limited
  }
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(recorder_->stats().rejected, 1);
  EXPECT_GE(recorder_->stats().retries, 1);
  EXPECT_GE(recorder_->stats().rate_limited, 1);
  const std::string log = log_.text();
  EXPECT_THAT(log, HasSubstr("object=\"pod/shop/web-0\" reason=\"FailedMount\""));
  EXPECT_THAT(log, Not(HasSubstr("marker-7f3a9c")));
  // What reached the server is the caller's message, as given.
  for (const auto& e : ServerEvents()) EXPECT_EQ(e["message"], message);
}

TEST_F(EventRecorderTest, DestroyedWithWritesPendingLeavesNothingRunning) {
  StartRecorder();
  server_.Admin("POST", "faults", {{"verb", "create"}, {"resource", "events"}, {"delay", 0.5}});
  for (int i = 0; i < 5; ++i) {
    recorder_->Record(Pod("p" + std::to_string(i)), EventType::kNormal, "Started", "m");
  }
  runner_.RunFor(std::chrono::milliseconds(50));
  EXPECT_EQ(recorder_->pending(), 5u);
  recorder_.reset();  // TearDown checks the loop closes with no handle left
}

}  // namespace
}  // namespace kubeclient
