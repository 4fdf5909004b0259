#include "base/redacted_url.h"

#include <gtest/gtest.h>

namespace base {
namespace {

TEST(RedactedUrlTest, HidesPasswordsAndQueries) {
  const struct {
    const char* in;
    const char* out;
  } cases[] = {
      {"http://127.0.0.1:8080/pods.yaml", "http://127.0.0.1:8080/pods.yaml"},
      {"https://user:s3cr3t@host/p", "https://xxxxx@host/p"},
      {"https://ghp_token@host/p", "https://xxxxx@host/p"},
      {"https://host/p?sig=abc&exp=1", "https://host/p?xxxxx"},
      {"https://u:p@host:443/a/b?x=1#frag", "https://xxxxx@host:443/a/b?xxxxx#frag"},
      {"https://host?x=1", "https://host?xxxxx"},
      {"https://host/p#a?b", "https://host/p#a?b"},
      {"https://a:b@c@host/p", "https://xxxxx@host/p"},
  };
  for (const auto& c : cases) EXPECT_EQ(RedactedUrl(c.in), c.out) << c.in;
}

}  // namespace
}  // namespace base
