#include "kubeclient/events/event_correlator.h"

#include <gtest/gtest.h>

#include <string>

namespace kubeclient {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const EventTime kT0 = EventTime{} + seconds(1'740'823'200);  // 2025-03-01T10:00:00Z

InvolvedObject Pod(const std::string& name = "web-0") {
  return {"Pod", "v1", "shop", name, "uid-" + name, "48190"};
}

Event MakeEvent(const std::string& message, const InvolvedObject& object = Pod(),
                const std::string& reason = "FailedMount", EventTime at = kT0) {
  Event e;
  e.name = EventName(object.name, at);
  e.namespace_ = object.namespace_;
  e.involved_object = object;
  e.type = "Warning";
  e.reason = reason;
  e.message = message;
  e.component = "volumemanager";
  e.host = "node-1";
  e.first_timestamp = at;
  e.last_timestamp = at;
  return e;
}

TEST(EventCorrelatorTest, AnIdenticalRepeatIsACountedUpdateOfTheSameEvent) {
  EventCorrelator c;
  auto first = c.Correlate(MakeEvent("configmap \"a\" not found"), kT0);
  ASSERT_FALSE(first.skip);
  EXPECT_FALSE(first.is_repeat);
  EXPECT_EQ(first.event.count, 1);
  first.event.resource_version = "7";
  c.UpdateState(first.key, first.event);

  const EventTime later = kT0 + seconds(30);
  auto second =
      c.Correlate(MakeEvent("configmap \"a\" not found", Pod(), "FailedMount", later), later);
  ASSERT_FALSE(second.skip);
  EXPECT_TRUE(second.is_repeat);
  EXPECT_EQ(second.event.name, first.event.name);
  EXPECT_EQ(second.event.count, 2);
  EXPECT_EQ(second.event.first_timestamp, kT0);
  EXPECT_EQ(second.event.last_timestamp, later);
  EXPECT_EQ(second.event.resource_version, "7");
  EXPECT_EQ(second.event.RepeatPatch(), (nlohmann::json{{"count", 2},
                                                        {"lastTimestamp", "2025-03-01T10:00:30Z"},
                                                        {"message", "configmap \"a\" not found"}}));

  // Another message, reason or object is a new event.
  EXPECT_FALSE(c.Correlate(MakeEvent("configmap \"b\" not found"), kT0).is_repeat);
  EXPECT_FALSE(c.Correlate(MakeEvent("configmap \"a\" not found", Pod(), "Other"), kT0).is_repeat);
  EXPECT_FALSE(c.Correlate(MakeEvent("configmap \"a\" not found", Pod("web-1")), kT0).is_repeat);
}

TEST(EventCorrelatorTest, TheTenthSimilarMessageWithinTenMinutesIsCombined) {
  EventCorrelator c;
  EventTime t = kT0;
  for (int i = 1; i <= 9; ++i) {
    auto r = c.Correlate(MakeEvent("volume \"v" + std::to_string(i) + "\" failed"), t);
    EXPECT_FALSE(r.skip);
    EXPECT_FALSE(r.is_repeat);
    EXPECT_EQ(r.event.message, "volume \"v" + std::to_string(i) + "\" failed") << i;
    t += seconds(30);
  }
  auto tenth = c.Correlate(MakeEvent("volume \"v10\" failed"), t);
  EXPECT_EQ(tenth.event.message, "(combined from similar events): volume \"v10\" failed");
  EXPECT_FALSE(tenth.is_repeat);
  EXPECT_EQ(tenth.event.count, 1);
  c.UpdateState(tenth.key, tenth.event);
  // Every later similar one updates the combined event, with the latest message.
  auto eleventh = c.Correlate(MakeEvent("volume \"v11\" failed"), t + seconds(1));
  EXPECT_TRUE(eleventh.is_repeat);
  EXPECT_EQ(eleventh.event.name, tenth.event.name);
  EXPECT_EQ(eleventh.event.count, 2);
  EXPECT_EQ(eleventh.event.message, "(combined from similar events): volume \"v11\" failed");
  // Another reason is not similar.
  EXPECT_EQ(c.Correlate(MakeEvent("x", Pod(), "FailedUnMount"), t).event.message, "x");
}

TEST(EventCorrelatorTest, SimilarEventsFurtherApartThanTheWindowAreNotCombined) {
  EventCorrelator c;
  EventTime t = kT0;
  for (int i = 1; i <= 30; ++i) {
    auto r = c.Correlate(MakeEvent("m" + std::to_string(i)), t);
    EXPECT_EQ(r.event.message, "m" + std::to_string(i));
    t += minutes(10) + seconds(1);
  }
}

TEST(EventCorrelatorTest, TokenBucketPerSourceAndObject) {
  EventCorrelator c;
  // Identical repeats draw from the bucket too: 25 pass, then nothing for this object.
  for (int i = 1; i <= 25; ++i) EXPECT_FALSE(c.Correlate(MakeEvent("m"), kT0).skip) << i;
  auto skipped = c.Correlate(MakeEvent("m"), kT0);
  EXPECT_TRUE(skipped.skip);
  EXPECT_EQ(skipped.event.count, 26);  // counted before the filter, as in client-go
  EXPECT_TRUE(c.Correlate(MakeEvent("other reason", Pod(), "Other"), kT0).skip);
  // Another object has its own bucket.
  EXPECT_FALSE(c.Correlate(MakeEvent("m", Pod("web-1")), kT0).skip);
  // One token every 5 minutes.
  EXPECT_TRUE(c.Correlate(MakeEvent("m"), kT0 + seconds(299)).skip);
  EXPECT_FALSE(c.Correlate(MakeEvent("m"), kT0 + seconds(301)).skip);
  EXPECT_TRUE(c.Correlate(MakeEvent("m"), kT0 + seconds(302)).skip);
  EXPECT_FALSE(c.Correlate(MakeEvent("m"), kT0 + seconds(301 + 300)).skip);
}

TEST(EventCorrelatorTest, CachesAreBoundedLeastRecentlyUsedFirst) {
  EventCorrelatorOptions options;
  options.cache_size = 8;
  EventCorrelator c(options);
  for (int i = 0; i < 100; ++i) {
    auto r = c.Correlate(MakeEvent("m", Pod("pod-" + std::to_string(i))), kT0);
    c.UpdateState(r.key, r.event);
  }
  EXPECT_EQ(c.sizes().aggregate, 8u);
  EXPECT_EQ(c.sizes().observed, 8u);
  EXPECT_EQ(c.sizes().spam, 8u);
  // The most recent objects are still known (a repeat), the oldest forgotten (a new event).
  EXPECT_TRUE(c.Correlate(MakeEvent("m", Pod("pod-99")), kT0).is_repeat);
  EXPECT_FALSE(c.Correlate(MakeEvent("m", Pod("pod-0")), kT0).is_repeat);
}

TEST(EventCorrelatorTest, LruMapEvictsTheLeastRecentlyUsed) {
  LruMap<int> m(2);
  m.Put("a", 1);
  m.Put("b", 2);
  ASSERT_NE(m.Get("a"), nullptr);  // "b" is now the least recently used
  m.Put("c", 3);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.Get("b"), nullptr);
  EXPECT_EQ(*m.Get("a"), 1);
  EXPECT_EQ(*m.Get("c"), 3);
}

TEST(EventNameTest, ObjectNameDotHexNanosElseARandomUuid) {
  const EventTime t = EventTime{} + std::chrono::nanoseconds(0x18a2b3c4d5e6f708LL);
  EXPECT_EQ(EventName("web-0", t), "web-0.18a2b3c4d5e6f708");
  for (const std::string& bad : {std::string(250, 'a'), std::string("Web_0"), std::string("")}) {
    std::string name = EventName(bad, t);
    EXPECT_EQ(name.size(), 36u) << name;
    EXPECT_EQ(name[14], '4') << name;  // version 4
    EXPECT_NE(name, EventName(bad, t));
  }
}

TEST(EventMessageTest, CappedBelowOneKibAtACharacterBoundary) {
  EXPECT_EQ(CapEventMessage("short"), "short");
  std::string exact(kMaxEventMessageBytes, 'x');
  EXPECT_EQ(CapEventMessage(exact), exact);
  std::string capped = CapEventMessage(std::string(5000, 'x'));
  EXPECT_EQ(capped.size(), kMaxEventMessageBytes);
  EXPECT_TRUE(capped.ends_with("..."));
  // Two-byte characters: the cut never splits one.
  std::string utf8;
  for (int i = 0; i < 1000; ++i) utf8 += "\xc3\xa9";  // é
  capped = CapEventMessage(utf8);
  EXPECT_LE(capped.size(), kMaxEventMessageBytes);
  EXPECT_EQ((capped.size() - 3) % 2, 0u);
  // The combined prefix does not push a long message over the cap.
  EventCorrelator c;
  for (int i = 0; i < 10; ++i) {
    auto r = c.Correlate(MakeEvent(std::to_string(i) + std::string(2000, 'y')), kT0);
    EXPECT_LE(r.event.message.size(), kMaxEventMessageBytes);
  }
}

TEST(EventTest, TheBodyCarriesTheCallersFieldsAndNothingElse) {
  Event e = MakeEvent("MountVolume.SetUp failed for volume \"cfg\" : configmap \"a\" not found");
  e.count = 1;
  nlohmann::json body = e.ToJson();
  EXPECT_EQ(body, nlohmann::json::parse(R"({
    "apiVersion":"v1","kind":"Event",
    "metadata":{"name":")" + e.name + R"(","namespace":"shop"},
    "involvedObject":{"kind":"Pod","apiVersion":"v1","namespace":"shop","name":"web-0",
                      "uid":"uid-web-0","resourceVersion":"48190"},
    "reason":"FailedMount","type":"Warning",
    "message":"MountVolume.SetUp failed for volume \"cfg\" : configmap \"a\" not found",
    "source":{"component":"volumemanager","host":"node-1"},
    "reportingComponent":"volumemanager","reportingInstance":"node-1",
    "firstTimestamp":"2025-03-01T10:00:00Z","lastTimestamp":"2025-03-01T10:00:00Z","count":1})"));
}

}  // namespace
}  // namespace kubeclient
