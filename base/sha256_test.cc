#include "base/sha256.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace base {
namespace {

std::string Hex(const std::string& raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

TEST(Sha256Test, KnownDigests) {
  EXPECT_EQ(Hex(Sha256Of("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256().Add("a").Add("bc").Finish(), Sha256Of("abc"));
}

// Bytes 0, 1, ..., 250, 0, 1, ...: inputs of any length that are not all one byte.
std::string Pattern(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += static_cast<char>(i % 251);
  return out;
}

// Lengths on each side of the padding's block boundaries (55/56 bytes: the length still fits in
// the last block or not; 64: a whole block), digests from Python's hashlib.
TEST(Sha256Test, LengthsAroundTheBlockBoundaries) {
  const std::vector<std::pair<size_t, std::string>> cases = {
      {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
      {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
      {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
      {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
      {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
      {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
      {120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"},
      {1000, "4e4c294b331f7a2099a379bec34b9f9fc03dc46ab465d998f4d683da53487e6d"},
  };
  for (const auto& [n, want] : cases) {
    const std::string input = Pattern(n);
    EXPECT_EQ(Hex(Sha256Of(input)), want) << n << " bytes";
    // The same bytes in uneven pieces (a partial block carried over between Adds).
    Sha256 pieces;
    for (size_t at = 0, step = 1; at < n; at += step, step = step * 2 + 1) {
      pieces.Add(std::string_view(input).substr(at, step));
    }
    EXPECT_EQ(Hex(pieces.Finish()), want) << n << " bytes in pieces";
  }
  // FIPS 180-2's long example: a million 'a'.
  EXPECT_EQ(Hex(Sha256Of(std::string(1'000'000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, FieldsDoNotRunIntoEachOther) {
  EXPECT_NE(Sha256().AddField("ab").AddField("c").Finish(),
            Sha256().AddField("a").AddField("bc").Finish());
  EXPECT_NE(Sha256().AddNumber(1).Finish(), Sha256().AddNumber(2).Finish());
}

// The x86 SHA extensions' compression against the portable one: random states and blocks, one to
// five blocks a call (the extensions' version keeps the state in registers between blocks).
TEST(Sha256Test, ShaExtensionsFoldAsThePortableCode) {
  const sha256_internal::BlocksFn fast = sha256_internal::ShaExtensionBlocksFn();
  if (fast == nullptr) GTEST_SKIP() << "this CPU has no SHA extensions: the portable code serves";
  const sha256_internal::BlocksFn portable = sha256_internal::PortableBlocksFn();
  std::mt19937_64 random(48);
  for (int round = 0; round < 2000; ++round) {
    uint32_t state[8];
    for (uint32_t& word : state) word = static_cast<uint32_t>(random());
    const size_t blocks = 1 + round % 5;
    std::vector<unsigned char> data(64 * blocks + 1);
    for (unsigned char& byte : data) byte = static_cast<unsigned char>(random());
    uint32_t want[8], got[8];
    std::memcpy(want, state, sizeof(state));
    std::memcpy(got, state, sizeof(state));
    // Unaligned input too: the data starts one byte into the vector on odd rounds.
    const unsigned char* at = data.data() + round % 2;
    portable(want, at, blocks);
    fast(got, at, blocks);
    ASSERT_EQ(0, std::memcmp(want, got, sizeof(want))) << "round " << round;
  }
}

}  // namespace
}  // namespace base
