#include "volumemanager/state/desired_state_of_world.h"

#include <gtest/gtest.h>

#include <vector>

namespace volumemanager {
namespace {

kube::ObjectRef ConfigMap(const std::string& name) {
  return kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", name};
}

DesiredVolume Reading(std::vector<kube::ObjectRef> objects) {
  DesiredVolume v;
  v.objects = std::move(objects);
  return v;
}

// The index by object points at the volumes' own keys: it must follow every replacement and
// removal, list the readers in key order, and forget an object nobody reads any more.
TEST(DesiredStateOfWorldTest, TheIndexByObjectFollowsEveryReplacementAndRemoval) {
  DesiredStateOfWorld dsw;
  const VolumeKey a{"uid-a", "cfg"};
  const VolumeKey b{"uid-b", "cfg"};
  const VolumeKey c{"uid-c", "both"};
  dsw.Set(b, Reading({ConfigMap("app")}));
  dsw.Set(a, Reading({ConfigMap("app")}));
  // One volume naming an object twice (a projected volume can) is one reader.
  dsw.Set(c, Reading({ConfigMap("app"), ConfigMap("other"), ConfigMap("app")}));
  EXPECT_EQ(dsw.VolumesReading(ConfigMap("app")), (std::vector<VolumeKey>{a, b, c}));
  EXPECT_EQ(dsw.VolumesReading(ConfigMap("other")), std::vector<VolumeKey>{c});
  EXPECT_EQ(dsw.read_object_count(), 2u);

  // Replaced: it now reads "other" only.
  dsw.Set(a, Reading({ConfigMap("other")}));
  EXPECT_EQ(dsw.VolumesReading(ConfigMap("app")), (std::vector<VolumeKey>{b, c}));
  EXPECT_EQ(dsw.VolumesReading(ConfigMap("other")), (std::vector<VolumeKey>{a, c}));

  dsw.Remove(c);
  dsw.Remove(c);  // twice: nothing more
  EXPECT_EQ(dsw.VolumesReading(ConfigMap("app")), std::vector<VolumeKey>{b});
  EXPECT_EQ(dsw.VolumesReading(ConfigMap("other")), std::vector<VolumeKey>{a});
  dsw.Remove(a);
  dsw.Remove(b);
  EXPECT_TRUE(dsw.VolumesReading(ConfigMap("app")).empty());
  EXPECT_EQ(dsw.read_object_count(), 0u);
  EXPECT_TRUE(dsw.volumes().empty());
}

}  // namespace
}  // namespace volumemanager
