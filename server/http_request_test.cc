#include "server/http_request.h"

#include <gtest/gtest.h>

namespace server {
namespace {

struct Parsed {
  HeadParse result;
  HttpRequest request;
  size_t head_size = 0;
  std::string why;
};

Parsed Parse(std::string_view in) {
  Parsed p;
  p.result = ParseRequestHead(in, &p.request, &p.head_size, &p.why);
  return p;
}

TEST(HttpRequestTest, AGetWithQueryAndHeaders) {
  const std::string in =
      "GET /readyz?verbose&x=1 HTTP/1.1\r\nHost: 127.0.0.1:10358\r\nAccept: */*\r\n\r\nNEXT";
  Parsed p = Parse(in);
  ASSERT_EQ(p.result, HeadParse::kComplete) << p.why;
  EXPECT_EQ(p.request.method, "GET");
  EXPECT_EQ(p.request.path, "/readyz");
  EXPECT_EQ(p.request.query, "verbose&x=1");
  EXPECT_EQ(p.request.minor_version, 1);
  EXPECT_TRUE(p.request.keep_alive);
  EXPECT_FALSE(p.request.has_body);
  EXPECT_EQ(in.substr(p.head_size), "NEXT");
}

TEST(HttpRequestTest, IncompleteUntilTheEmptyLine) {
  const std::string full = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_EQ(Parse(full.substr(0, n)).result, HeadParse::kIncomplete) << n;
  }
  EXPECT_EQ(Parse(full).result, HeadParse::kComplete);
}

TEST(HttpRequestTest, BareLineFeedsAndLeadingEmptyLines) {
  Parsed p = Parse("\r\n\nGET /metrics HTTP/1.0\nConnection: Keep-Alive\n\n");
  ASSERT_EQ(p.result, HeadParse::kComplete) << p.why;
  EXPECT_EQ(p.request.path, "/metrics");
  EXPECT_EQ(p.request.minor_version, 0);
  EXPECT_TRUE(p.request.keep_alive);
  EXPECT_EQ(p.head_size, 49u);  // 2 + 1 + 22 + 23 + 1
}

TEST(HttpRequestTest, WhenTheConnectionStaysOpen) {
  EXPECT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(Parse("GET / HTTP/1.1\r\nConnection: upgrade, Close\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(Parse("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n").request.keep_alive);
  // A body announced is never read: the connection closes after the answer.
  Parsed p = Parse("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_TRUE(p.request.has_body);
  EXPECT_FALSE(p.request.keep_alive);
  p = Parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(p.request.has_body);
  EXPECT_FALSE(p.request.keep_alive);
  p = Parse("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_FALSE(p.request.has_body);
  EXPECT_TRUE(p.request.keep_alive);
}

TEST(HttpRequestTest, ThePathIsPercentDecodedAndTheQueryIsNot) {
  Parsed p = Parse("GET /heal%74hz?a=%20 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.result, HeadParse::kComplete) << p.why;
  EXPECT_EQ(p.request.path, "/healthz");
  EXPECT_EQ(p.request.query, "a=%20");
}

TEST(HttpRequestTest, BadHeadsSayWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"GET /\r\n\r\n", "the request line is not METHOD TARGET VERSION"},
      {"GET  / HTTP/1.1\r\n\r\n", "the request line is not METHOD TARGET VERSION"},
      {"GET / HTTP/1.1 x\r\n\r\n", "the request line is not METHOD TARGET VERSION"},
      {"G(T / HTTP/1.1\r\n\r\n", "the method is not a token"},
      {"GET / HTTP/1.10\r\n\r\n", "the version is not HTTP/x.y"},
      {"GET / http/1.1\r\n\r\n", "the version is not HTTP/x.y"},
      {"GET healthz HTTP/1.1\r\n\r\n", "the target is not an absolute path"},
      {"GET http://x/healthz HTTP/1.1\r\n\r\n", "the target is not an absolute path"},
      {"GET /a%2 HTTP/1.1\r\n\r\n", "the target has a bad percent-encoding"},
      {"GET /a%zz HTTP/1.1\r\n\r\n", "the target has a bad percent-encoding"},
      {"GET /a%00 HTTP/1.1\r\n\r\n", "the target encodes a NUL"},
      {"GET /a\x01 HTTP/1.1\r\n\r\n", "the target holds a control character"},
      {"GET / HTTP/1.1\r\nHost x\r\n\r\n", "a header line has no colon"},
      {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", "a header name is not a token"},
      {"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", "a header line is folded (obsolete line folding)"},
      {"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", "a header value holds a control character"},
      {"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", "Content-Length is not a number"},
      {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "Content-Length is not a number"},
      {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
       "Content-Length is given twice, unequal"},
  };
  for (const auto& [in, why] : cases) {
    Parsed p = Parse(in);
    EXPECT_EQ(p.result, HeadParse::kBad) << in;
    EXPECT_EQ(p.why, why) << in;
  }
}

TEST(HttpRequestTest, OtherMajorVersionsAreNotServed) {
  Parsed p = Parse("GET / HTTP/2.0\r\n\r\n");
  EXPECT_EQ(p.result, HeadParse::kVersion);
  EXPECT_EQ(p.why, "only HTTP/1.x");
}

TEST(HttpRequestTest, QueryHasAKeyWithOrWithoutAValue) {
  EXPECT_TRUE(QueryHas("verbose", "verbose"));
  EXPECT_TRUE(QueryHas("a=1&verbose=", "verbose"));
  EXPECT_TRUE(QueryHas("verbose=false", "verbose"));
  EXPECT_FALSE(QueryHas("verbosely&a=verbose", "verbose"));
  EXPECT_FALSE(QueryHas("", "verbose"));
}

}  // namespace
}  // namespace server
