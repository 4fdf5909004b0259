#include "base/sha256.h"

#include <gtest/gtest.h>

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

TEST(Sha256Test, FieldsDoNotRunIntoEachOther) {
  EXPECT_NE(Sha256().AddField("ab").AddField("c").Finish(),
            Sha256().AddField("a").AddField("bc").Finish());
  EXPECT_NE(Sha256().AddNumber(1).Finish(), Sha256().AddNumber(2).Finish());
}

}  // namespace
}  // namespace base
