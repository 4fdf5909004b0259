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
  for (const auto& e : events) {
    out.push_back(e.type == WatchEventType::kBookmark
                      ? e.resource_version
                      : e.object["metadata"]["resourceVersion"].get<std::string>());
  }
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

// A BOOKMARK is read without building its document: what a reader takes from it (the type and
// object.metadata.resourceVersion) is what the full parse gives, for the API server's spelling,
// the test server's (spaces), extra fields and a resourceVersion deeper down; anything unusual
// (a repeated key, a value of another type) goes to the full parse, which words its errors.
TEST(WatchDecoderTest, BookmarksDecodeAsTheFullParseDoes) {
  struct Case {
    std::string name;
    std::string input;
    std::string rv;  // "": none
  };
  const std::vector<Case> cases = {
      {"API server",
       R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":)"
       R"({"resourceVersion":"12","creationTimestamp":null,"annotations":)"
       R"({"k8s.io/initial-events-end":"true"}}}})",
       "12"},
      {"spaces", R"({ "type" : "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}})",
       "7"},
      {"object first", R"({"object":{"metadata":{"resourceVersion":"8"}},"type":"BOOKMARK"})", "8"},
      {"deeper resourceVersion ignored",
       R"({"type":"BOOKMARK","object":{"spec":{"metadata":{"resourceVersion":"9"}},)"
       R"("metadata":{"resourceVersion":"3"}}})",
       "3"},
      {"no resourceVersion", R"({"type":"BOOKMARK","object":{"metadata":{}}})", ""},
      {"no metadata", R"({"type":"BOOKMARK","object":{}})", ""},
      {"repeated object",
       R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1"}},)"
       R"("object":{"metadata":{"resourceVersion":"2"}}})",
       ""},
      {"repeated resourceVersion",
       R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1","resourceVersion":"2"}}})",
       ""},
      {"numeric resourceVersion",
       R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":5}}})", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    ASSERT_TRUE(decoder.Feed(c.input, events).ok());
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].type, WatchEventType::kBookmark);
    // The reference: the document the full parse builds.
    const nlohmann::json full = nlohmann::json::parse(c.input)["object"];
    const auto meta = full.find("metadata");
    std::string want;
    if (meta != full.end() && meta->is_object()) {
      const auto rv = meta->find("resourceVersion");
      if (rv != meta->end() && rv->is_string()) want = *rv;
    }
    if (!c.rv.empty()) {
      EXPECT_EQ(want, c.rv);
    }
    EXPECT_EQ(events[0].resource_version, want);
    EXPECT_TRUE(events[0].object.is_null()) << "a bookmark keeps no document";
  }
  // Errors are the full parse's.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"type":"BOOKMARK","object":{"metadata":]})", "invalid JSON"},
      {R"({"type":"BOOKMARK","object":"x"})", "not an object"},
      {R"({"type":"BOOKMARK","object":[]})", "not an object"},
      {R"({"type":"BOOKMARK"})", "not an object"},
      {R"({"type":"BOOKMARK","type":"SURPRISE","object":{}})", "unknown event type"},
  };
  for (const auto& [input, error] : bad) {
    SCOPED_TRACE(input);
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    const base::Status s = decoder.Feed(input, events);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr(error));
  }
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
