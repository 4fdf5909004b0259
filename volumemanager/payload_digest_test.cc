#include "volumemanager/payload_digest.h"

#include <gtest/gtest.h>

namespace volumemanager {
namespace {

using atomicwriter::FileProjection;
using atomicwriter::Payload;

TEST(PayloadDigestTest, EveryOnDiskDifferenceChangesTheDigest) {
  const Payload base = {{"a", FileProjection{"x", 0644, std::nullopt}},
                        {"b/c", FileProjection{"yz", 0644, std::nullopt}}};
  const std::string d = PayloadDigest(base);
  EXPECT_EQ(d.size(), 32u);
  EXPECT_EQ(PayloadDigest(base), d);

  const struct {
    const char* name;
    Payload p;
  } variants[] = {
      {"bytes", {{"a", {"X", 0644, std::nullopt}}, {"b/c", {"yz", 0644, std::nullopt}}}},
      {"mode", {{"a", {"x", 0600, std::nullopt}}, {"b/c", {"yz", 0644, std::nullopt}}}},
      {"owner", {{"a", {"x", 0644, 0}}, {"b/c", {"yz", 0644, std::nullopt}}}},
      {"path", {{"a", {"x", 0644, std::nullopt}}, {"b/d", {"yz", 0644, std::nullopt}}}},
      {"boundary", {{"a", {"xy", 0644, std::nullopt}}, {"b/c", {"z", 0644, std::nullopt}}}},
      {"missing file", {{"a", {"x", 0644, std::nullopt}}}},
      {"empty", {}},
  };
  for (const auto& v : variants) EXPECT_NE(PayloadDigest(v.p), d) << v.name;
}

}  // namespace
}  // namespace volumemanager
