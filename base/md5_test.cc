#include "base/md5.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace base {
namespace {

TEST(Md5HexTest, MatchesRfc1321Vectors) {
  EXPECT_EQ(Md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Md5Hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(Md5Hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(
      Md5Hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
      "57edf4a22be3c955ac49da2e2107b67a");
}

// Lengths on each side of the padding's block boundaries, digests from Python's hashlib (bytes
// 0, 1, ..., 250, 0, 1, ...).
TEST(Md5HexTest, LengthsAroundTheBlockBoundaries) {
  const std::vector<std::pair<size_t, std::string>> cases = {
      {55, "6912ee65fff2d9f9ce2508cddf8bcda0"},  {56, "51fdd1acda72405dfdfa03fcb85896d7"},
      {63, "48a6295221902e8e0938f773a7185e72"},  {64, "b2d3f56bc197fd985d5965079b5e7148"},
      {65, "8bd7053801c768420faf816fadba971c"},  {119, "1c772251899a7ff007400b888d6b2042"},
      {120, "b7ba1efc6022e9ed272f00b8831e26e6"}, {1000, "a24f1e3ef66950e1327f210e3997ba2c"},
  };
  for (const auto& [n, want] : cases) {
    std::string input;
    for (size_t i = 0; i < n; ++i) input += static_cast<char>(i % 251);
    EXPECT_EQ(Md5Hex(input), want) << n << " bytes";
  }
}

}  // namespace
}  // namespace base
