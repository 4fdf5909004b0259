#include "plugins/plugin_registry.h"

#include <gtest/gtest.h>

namespace plugins {
namespace {

TEST(PluginRegistryTest, FindsThePluginOfEachKind) {
  auto registry = PluginRegistry::NewDefault();
  const struct {
    const char* name;
    kube::Volume volume;
    const char* plugin;  // nullptr: no plugin
    const char* escaped;
  } cases[] = {
      {"configmap",
       {"a", kube::ConfigMapVolumeSource{}},
       "kubernetes.io/configmap",
       "kubernetes.io~configmap"},
      {"secret", {"a", kube::SecretVolumeSource{}}, "kubernetes.io/secret", "kubernetes.io~secret"},
      {"downward",
       {"a", kube::DownwardAPIVolumeSource{}},
       "kubernetes.io/downward-api",
       "kubernetes.io~downward-api"},
      {"projected",
       {"a", kube::ProjectedVolumeSource{}},
       "kubernetes.io/projected",
       "kubernetes.io~projected"},
      {"empty_dir", {"a", kube::UnsupportedVolumeSource{"emptyDir"}}, nullptr, nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const VolumePlugin* p = registry->FindPlugin(c.volume);
    if (c.plugin == nullptr) {
      EXPECT_EQ(p, nullptr);
      continue;
    }
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->Name(), c.plugin);
    EXPECT_EQ(p->EscapedName(), c.escaped);
    EXPECT_EQ(registry->FindPluginByName(c.plugin), p);
    EXPECT_EQ(registry->FindPluginByEscapedName(c.escaped), p);
  }
  EXPECT_EQ(registry->FindPluginByName("kubernetes.io/empty-dir"), nullptr);
  EXPECT_EQ(registry->FindPluginByEscapedName("kubernetes.io/configmap"), nullptr);
}

}  // namespace
}  // namespace plugins
