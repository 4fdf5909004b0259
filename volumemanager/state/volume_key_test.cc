// VolumeKey and PodUid: a shared UID orders and compares as its string does.
#include "volumemanager/state/volume_key.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace volumemanager {
namespace {

TEST(PodUidTest, CopiesShareOneStringAndCompareAsTheString) {
  const PodUid a(std::string(36, 'a'));
  const PodUid copy = a;  // NOLINT(performance-unnecessary-copy-initialization): the point
  EXPECT_EQ(&copy.str(), &a.str());
  const PodUid same_text(std::string(36, 'a'));
  EXPECT_NE(&same_text.str(), &a.str());
  EXPECT_EQ(same_text, a);
  EXPECT_EQ(a, std::string(36, 'a'));
  EXPECT_LT(a, PodUid(std::string(36, 'b')));
  EXPECT_GT(a, PodUid("a"));
  EXPECT_LT(PodUid(""), PodUid("a"));
  EXPECT_TRUE(PodUid().empty());
  EXPECT_EQ(PodUid(), PodUid(""));
  EXPECT_EQ(PodUid().str(), "");
}

// The inline prefix decides most comparisons; every pair must still order as its strings do:
// prefixes that differ, that are equal with the strings differing later, shorter than 8 bytes,
// NUL bytes and bytes above 0x7f (a string's bytes compare as unsigned char).
TEST(PodUidTest, OrdersEveryPairAsItsStrings) {
  const std::vector<std::string> uids = {
      "",
      std::string(1, '\0'),
      std::string("abc\0", 4),
      std::string("abc\0x", 5),
      "abc",
      "abcdefgh",
      "abcdefgh0",
      "abcdefgh1",
      "abcdefgi",
      "abcdefg\x80",
      "abcdefg\xff",
      "\xff",
      "0a1b2c3d-0000-4000-8000-000000000001",
      "0a1b2c3d-0000-4000-8000-000000000002",
      "0a1b2c3e-0000-4000-8000-000000000001",
  };
  for (const std::string& a : uids) {
    for (const std::string& b : uids) {
      const PodUid ka(a), kb(b);
      EXPECT_EQ(ka <=> kb, a.compare(b) <=> 0)
          << testing::PrintToString(a) << " vs " << testing::PrintToString(b);
      EXPECT_EQ(ka == kb, a == b);
      EXPECT_EQ(ka <=> b, a.compare(b) <=> 0);
    }
  }
}

// Copies, moves and assignments keep the one string alive exactly as long as a key holds it
// (ASan reports a use after free or a leak otherwise).
TEST(PodUidTest, CopiesAndMovesKeepTheStringAlive) {
  PodUid a(std::string(36, 'x'));
  PodUid b = a;
  PodUid c = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty, by design
  EXPECT_EQ(b, c);
  a = c;
  c = PodUid("other");
  b = std::move(c);
  EXPECT_EQ(a, std::string(36, 'x'));
  EXPECT_EQ(b, std::string("other"));
  const PodUid& same = a;
  a = same;  // self-assignment keeps the string
  EXPECT_EQ(a.str(), std::string(36, 'x'));
}

TEST(VolumeKeyTest, OrdersByPodUidThenVolumeName) {
  std::map<VolumeKey, int> m;
  m[VolumeKey{"uid-b", "v"}] = 3;
  m[VolumeKey{"uid-a", "w"}] = 2;
  m[VolumeKey{"uid-a", "v"}] = 1;
  m[VolumeKey{"uid-a", "v"}] = 4;  // the same key, from another string
  ASSERT_EQ(m.size(), 3u);
  auto it = m.begin();
  EXPECT_EQ(it->first.pod_uid, std::string("uid-a"));
  EXPECT_EQ(it->first.volume_name, "v");
  EXPECT_EQ(it->second, 4);
  EXPECT_EQ((++it)->first.volume_name, "w");
  EXPECT_EQ((++it)->first.pod_uid, std::string("uid-b"));
  // The prefix scan VolumesOfPod does: every key of one pod, and none of another.
  EXPECT_EQ(m.lower_bound(VolumeKey{"uid-a", ""})->second, 4);
  EXPECT_EQ(m.lower_bound(VolumeKey{"uid-b", ""})->second, 3);
}

}  // namespace
}  // namespace volumemanager
