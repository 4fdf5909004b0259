#include "volumemanager/state/actual_state_of_world.h"

#include <gtest/gtest.h>

namespace volumemanager {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

TEST(ActualStateOfWorldTest, RemountRequestsDuringAnOperationAreKept) {
  const VolumeKey key{"uid", "cfg"};
  const auto t0 = Steady::now();
  const auto wall = std::chrono::system_clock::now();
  const struct {
    const char* name;
    bool mounted_before;      // a remount (true) or a first mount (false) is in flight
    bool request;             // a change request arrives
    milliseconds request_at;  // relative to the operation's start
    bool remount_after;       // still required once the operation is recorded
  } cases[] = {
      {"remount, change before the op read its inputs", true, true, milliseconds(-5), false},
      {"remount, change while the op ran", true, true, milliseconds(5), true},
      {"first mount, change while the op ran", false, true, milliseconds(5), true},
      {"first mount, change before the op", false, true, milliseconds(-5), false},
      {"first mount, no change", false, false, milliseconds(0), false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ActualStateOfWorld asw;
    if (c.mounted_before) asw.MarkMounted(key, "p", "..v1", wall, t0 - milliseconds(100));
    const auto op_started = t0;
    if (c.request) {
      EXPECT_EQ(asw.MarkRemountRequired(key, op_started + c.request_at), c.mounted_before);
    }
    asw.MarkMounted(key, "p", "..v2", wall, op_started);
    ASSERT_NE(asw.Find(key), nullptr);
    EXPECT_EQ(asw.Find(key)->remount_required, c.remount_after);
    EXPECT_FALSE(asw.Find(key)->uncertain);
    EXPECT_EQ(asw.TakeChanged(), std::set<VolumeKey>{key});
  }
}

TEST(ActualStateOfWorldTest, UncertainVolumesAndPods) {
  ActualStateOfWorld asw;
  asw.AddUncertain(VolumeKey{"a", "x"}, "kubernetes.io~secret");
  asw.AddUncertain(VolumeKey{"a", "y"}, "kubernetes.io~secret");
  asw.AddUncertain(VolumeKey{"ab", "z"}, "kubernetes.io~secret");
  EXPECT_TRUE(asw.Find(VolumeKey{"a", "x"})->uncertain);
  EXPECT_EQ(asw.VolumesOfPod("a").size(), 2u);
  EXPECT_TRUE(asw.HasPod("ab"));
  EXPECT_FALSE(asw.HasPod("b"));
  asw.Remove(VolumeKey{"ab", "z"});
  EXPECT_FALSE(asw.HasPod("ab"));
}

// The tmpfs bytes are a running sum: set per volume (replacing its last value), dropped with the
// volume, and a volume found at start comes with what was measured.
TEST(ActualStateOfWorldTest, TmpfsBytesAreARunningSumOfTheVolumesLiveVersions) {
  ActualStateOfWorld asw;
  const VolumeKey a{"u1", "a"}, b{"u1", "b"}, c{"u2", "c"};
  asw.MarkMounted(a, "kubernetes.io~secret", "..v1", {}, Steady::now());
  asw.MarkMounted(b, "kubernetes.io~secret", "..v1", {}, Steady::now());
  asw.SetTmpfsBytes(a, 8192, "..v1");
  asw.SetTmpfsBytes(b, 4096, "..v1");
  EXPECT_EQ(asw.tmpfs_bytes(), 12288u);
  asw.SetTmpfsBytes(a, 4096, "..v2");  // an update replaced a's version
  EXPECT_EQ(asw.tmpfs_bytes(), 8192u);
  EXPECT_EQ(asw.Find(a)->tmpfs_version(), "..v2");
  asw.SetTmpfsBytes(c, 4096, "..v1");  // not in the actual state: nothing
  EXPECT_EQ(asw.tmpfs_bytes(), 8192u);
  asw.AddUncertain(c, "kubernetes.io~projected", 16384, "..v9");
  EXPECT_EQ(asw.tmpfs_bytes(), 24576u);
  asw.Remove(a);
  EXPECT_EQ(asw.tmpfs_bytes(), 20480u);
  asw.Remove(a);  // gone already
  EXPECT_EQ(asw.tmpfs_bytes(), 20480u);
  asw.SetTmpfsBytes(b, 0, "..v1");  // another writer's version is live
  EXPECT_EQ(asw.Find(b)->tmpfs_version(), "");
  asw.Remove(c);
  EXPECT_EQ(asw.tmpfs_bytes(), 0u);
}

// The escaped plugin name is one string for all volumes of the plugin, whichever way they came
// (a write or the start-up scan), and the right one for each.
TEST(ActualStateOfWorldTest, APluginDirIsHeldOnceForAllItsVolumes) {
  ActualStateOfWorld asw;
  asw.MarkMounted(VolumeKey{"a", "x"}, std::string("kubernetes.io~configmap"), "..v1", {},
                  std::chrono::steady_clock::now());
  asw.AddUncertain(VolumeKey{"b", "y"}, std::string("kubernetes.io~configmap"));
  asw.AddUncertain(VolumeKey{"b", "z"}, std::string("kubernetes.io~secret"));
  const MountedVolume* x = asw.Find(VolumeKey{"a", "x"});
  const MountedVolume* y = asw.Find(VolumeKey{"b", "y"});
  const MountedVolume* z = asw.Find(VolumeKey{"b", "z"});
  ASSERT_TRUE(x != nullptr && y != nullptr && z != nullptr);
  EXPECT_EQ(x->plugin_dir(), "kubernetes.io~configmap");
  EXPECT_EQ(&x->plugin_dir(), &y->plugin_dir());
  EXPECT_EQ(z->plugin_dir(), "kubernetes.io~secret");
  // A remount with the volume's own fields as arguments (the unchanged remount does so).
  asw.MarkMounted(VolumeKey{"a", "x"}, x->plugin_dir(), x->ts_dir, {},
                  std::chrono::steady_clock::now());
  EXPECT_EQ(asw.Find(VolumeKey{"a", "x"})->plugin_dir(), "kubernetes.io~configmap");
  EXPECT_EQ(asw.Find(VolumeKey{"a", "x"})->ts_dir, "..v1");
}

}  // namespace
}  // namespace volumemanager
