// VolumeKey and PodUid: a shared UID orders and compares as its string does.
#include "volumemanager/state/volume_key.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

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
