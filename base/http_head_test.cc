#include "base/http_head.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace base {
namespace {

std::vector<std::pair<std::string, std::string>> All(const HttpFields& fields) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const HttpField& f : fields) out.emplace_back(f.name, f.value);
  return out;
}

TEST(HttpHeadTest, ARequestHead) {
  const std::string in = "\r\nGET /a?b HTTP/1.1\r\nHost: x\r\nAccept:  */* \t\r\n\r\nNEXT";
  HttpRequestHead head;
  std::string why;
  ASSERT_EQ(ParseHttpRequestHead(in, &head, &why), HttpHeadParse::kComplete) << why;
  EXPECT_EQ(head.method, "GET");
  EXPECT_EQ(head.target, "/a?b");
  EXPECT_EQ(head.major, 1);
  EXPECT_EQ(head.minor, 1);
  EXPECT_EQ(in.substr(head.size), "NEXT");
  using Fields = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(All(head.fields), (Fields{{"Host", "x"}, {"Accept", "*/*"}}));
  EXPECT_EQ(head.fields.Find("host"), "x");
  EXPECT_EQ(head.fields.Find("ACCEPT"), "*/*");
  EXPECT_EQ(head.fields.Find("Connection"), std::nullopt);
}

TEST(HttpHeadTest, IncompleteUntilTheEmptyLine) {
  const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string resp = "HTTP/1.1 200 OK\nContent-Length: 0\n\n";
  HttpRequestHead rh;
  HttpResponseHead sh;
  std::string why;
  for (size_t n = 0; n < req.size(); ++n) {
    EXPECT_EQ(ParseHttpRequestHead(req.substr(0, n), &rh, &why), HttpHeadParse::kIncomplete) << n;
  }
  for (size_t n = 0; n < resp.size(); ++n) {
    EXPECT_EQ(ParseHttpResponseHead(resp.substr(0, n), &sh, &why), HttpHeadParse::kIncomplete) << n;
  }
  EXPECT_EQ(ParseHttpRequestHead(req, &rh, &why), HttpHeadParse::kComplete);
  ASSERT_EQ(ParseHttpResponseHead(resp, &sh, &why), HttpHeadParse::kComplete);
  EXPECT_EQ(sh.size, resp.size());
}

TEST(HttpHeadTest, AResponseHead) {
  const std::string in = "HTTP/1.0 503 Service Unavailable\r\nretry-after: 5\r\n\r\nbody";
  HttpResponseHead head;
  std::string why;
  ASSERT_EQ(ParseHttpResponseHead(in, &head, &why), HttpHeadParse::kComplete) << why;
  EXPECT_EQ(head.status_line.major, 1);
  EXPECT_EQ(head.status_line.minor, 0);
  EXPECT_EQ(head.status_line.status, 503);
  EXPECT_EQ(head.status_line.reason, "Service Unavailable");
  EXPECT_EQ(head.fields.Find("Retry-After"), "5");
  EXPECT_EQ(in.substr(head.size), "body");
  // No empty line may come before a status line.
  EXPECT_EQ(ParseHttpResponseHead("\r\n" + in, &head, &why), HttpHeadParse::kBad);
}

TEST(HttpHeadTest, StatusLines) {
  HttpStatusLine s;
  std::string why;
  EXPECT_TRUE(ParseHttpStatusLine("HTTP/1.1 200", &s, &why));
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.reason, "");
  EXPECT_TRUE(ParseHttpStatusLine("HTTP/1.1 204 ", &s, &why));
  EXPECT_TRUE(ParseHttpStatusLine("HTTP/2 200 ", &s, &why));  // as libcurl writes HTTP/2's
  EXPECT_EQ(s.major, 2);
  EXPECT_TRUE(ParseHttpStatusLine("HTTP/1.1 999 Whatever", &s, &why));
  for (const char* bad : {"HTTP/1.1 099 Low", "HTTP/1.1 20 OK", "HTTP/1.1 2000", "HTTP/1.x 200",
                          "HTTP/1 200", "HTTP/4 200", "http/1.1 200", "HTTP/1.1  200",
                          "HTTP/1.1 200 O\x01K", "HTTP/1.1 200\rX", "SSH-2.0-OpenSSH", ""}) {
    EXPECT_FALSE(ParseHttpStatusLine(bad, &s, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
}

TEST(HttpHeadTest, BadFieldLines) {
  const std::pair<const char*, const char*> cases[] = {
      {"Host x", "a header line has no colon"},
      {"Host : x", "a header name is not a token"},
      {": x", "a header name is not a token"},
      {" c", "a header line is folded (obsolete line folding)"},
      {"\tc", "a header line is folded (obsolete line folding)"},
      {"A: b\x01", "a header value holds a control character"},
      {"A: b\rc", "a header value holds a control character"},
  };
  for (const auto& [line, text] : cases) {
    HttpField f;
    std::string why;
    EXPECT_FALSE(ParseHttpField(line, &f, &why)) << line;
    EXPECT_EQ(why, text) << line;
  }
  HttpField f;
  std::string why;
  ASSERT_TRUE(ParseHttpField("X-A:\t v \xff ", &f, &why));
  EXPECT_EQ(f.name, "X-A");
  EXPECT_EQ(f.value, "v \xff");  // obs-text is kept
}

TEST(HttpHeadTest, ABadFieldKeepsTheLinesBeforeIt) {
  HttpRequestHead head;
  std::string why;
  ASSERT_EQ(ParseHttpRequestHead("GET /x HTTP/2.0\r\nA: 1\r\nB : 2\r\nC: 3\r\n\r\n", &head, &why),
            HttpHeadParse::kBad);
  EXPECT_TRUE(head.bad_field);
  EXPECT_EQ(head.major, 2);
  EXPECT_EQ(head.target, "/x");
  EXPECT_EQ(why, "a header name is not a token");
  using Fields = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(All(head.fields), (Fields{{"A", "1"}}));

  ASSERT_EQ(ParseHttpRequestHead("GET /x HTTP/1.1 y\r\nA: 1\r\n\r\n", &head, &why),
            HttpHeadParse::kBad);
  EXPECT_FALSE(head.bad_field);
  EXPECT_EQ(why, "the request line is not METHOD TARGET VERSION");
}

TEST(HttpHeadTest, TokensAndContentLength) {
  HttpRequestHead head;
  std::string why;
  ASSERT_EQ(ParseHttpRequestHead("POST / HTTP/1.1\nConnection: upgrade, Close\nconnection: x\n"
                                 "Content-Length: 3\ncontent-length: 3\n\n",
                                 &head, &why),
            HttpHeadParse::kComplete);
  EXPECT_TRUE(head.fields.HasToken("connection", "close"));
  EXPECT_TRUE(head.fields.HasToken("Connection", "x"));
  EXPECT_FALSE(head.fields.HasToken("connection", "keep-alive"));
  std::optional<uint64_t> length;
  ASSERT_TRUE(HttpContentLength(head.fields, &length, &why));
  EXPECT_EQ(length, 3u);

  for (const char* in : {"GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
                         "GET / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
                         "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                         "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"}) {
    ASSERT_EQ(ParseHttpRequestHead(in, &head, &why), HttpHeadParse::kComplete) << in;
    EXPECT_FALSE(HttpContentLength(head.fields, &length, &why)) << in;
  }
  ASSERT_EQ(ParseHttpRequestHead("GET / HTTP/1.1\r\n\r\n", &head, &why), HttpHeadParse::kComplete);
  EXPECT_TRUE(head.fields.empty());
  ASSERT_TRUE(HttpContentLength(head.fields, &length, &why));
  EXPECT_EQ(length, std::nullopt);
}

TEST(HttpHeadTest, FirstLine) {
  EXPECT_EQ(HttpFirstLine("HTTP/1.1 200 OK\r\nA: b\r\n"), "HTTP/1.1 200 OK");
  EXPECT_EQ(HttpFirstLine("HTTP/1.1 200 OK\nA: b"), "HTTP/1.1 200 OK");
  EXPECT_EQ(HttpFirstLine("HTTP/1.1 200 OK\r"), "HTTP/1.1 200 OK");
  EXPECT_EQ(HttpFirstLine("HTTP/1.1 200"), "HTTP/1.1 200");
  EXPECT_EQ(HttpFirstLine(""), "");
}

}  // namespace
}  // namespace base
