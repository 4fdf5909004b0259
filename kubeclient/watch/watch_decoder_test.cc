#include "kubeclient/watch/watch_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kubeclient {
namespace {

using ::testing::HasSubstr;

const std::string kStream =
    R"({"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"1"},"data":{"k":"v}{\"x"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"2"},"data":{"k":"[\\"}}})"
    "\n"
    R"( {"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"3","creationTimestamp":null}}})"
    R"({"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"4"}}})"
    "\n\n";

std::vector<std::string> Rvs(const std::vector<WatchEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.object["metadata"]["resourceVersion"]);
  return out;
}

TEST(WatchDecoderTest, AnyChunkingGivesTheSameEvents) {
  for (size_t chunk : {1u, 2u, 3u, 7u, 64u, 100000u}) {
    SCOPED_TRACE(chunk);
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    for (size_t i = 0; i < kStream.size(); i += chunk) {
      ASSERT_TRUE(decoder.Feed(std::string_view(kStream).substr(i, chunk), events).ok());
    }
    EXPECT_EQ(Rvs(events), (std::vector<std::string>{"1", "2", "3", "4"}));
    EXPECT_EQ(events[0].type, WatchEventType::kAdded);
    EXPECT_EQ(events[0].object["data"]["k"], "v}{\"x");
    EXPECT_EQ(events[1].object["data"]["k"], "[\\");
    EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
    EXPECT_EQ(events[3].type, WatchEventType::kDeleted);
    EXPECT_EQ(decoder.buffered_bytes(), 0u);
  }
}

TEST(WatchDecoderTest, PartialEventStaysBuffered) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  ASSERT_TRUE(decoder.Feed(kStream.substr(0, 30), events).ok());
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(decoder.buffered_bytes(), 30u);
}

struct BadCase {
  std::string name;
  std::string input;
  std::string error;
  size_t good_events_first;
};

TEST(WatchDecoderTest, UndecodableInput) {
  const std::vector<BadCase> cases = {
      {"invalid JSON", R"({"type":"ADDED","object":{"metadata":]})", "invalid JSON", 0},
      {"unknown type", R"({"type":"SURPRISE","object":{}})", "unknown event type", 0},
      {"non-object object", R"({"type":"MODIFIED","object":"x"})", "not an object", 0},
      {"null object", R"({"type":"MODIFIED","object":null})", "not an object", 0},
      {"missing type", R"({"object":{}})", "without a type", 0},
      {"top-level array", R"([1,2])", "expected a JSON object", 0},
      {"good event then garbage", R"({"type":"ADDED","object":{"metadata":{"name":"a"}}}garbage)",
       "expected a JSON object", 1},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    base::Status s = decoder.Feed(c.input, events);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr(c.error));
    EXPECT_EQ(events.size(), c.good_events_first);
    // Spent: later bytes are refused too.
    EXPECT_FALSE(decoder.Feed("{}", events).ok());
  }
}

TEST(WatchDecoderTest, OversizedEventFailsWithoutWaitingForItsEnd) {
  WatchDecoder decoder(1024);
  std::vector<WatchEvent> events;
  std::string head = R"({"type":"ADDED","object":{"data":{"big":")";
  ASSERT_TRUE(decoder.Feed(head, events).ok());
  base::Status s = decoder.Feed(std::string(2000, 'x'), events);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("larger than 1024"));
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

}  // namespace
}  // namespace kubeclient
