#include "plugins/configmap/configmap_plugin.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plugins/fake_object_lookup.h"

namespace plugins {
namespace {

using atomicwriter::FileProjection;
using atomicwriter::Payload;

kube::Pod PodIn(const std::string& ns) {
  kube::Pod pod;
  pod.metadata.name = "web-0";
  pod.metadata.namespace_ = ns;
  pod.metadata.uid = "uid-1";
  return pod;
}

kube::Volume ConfigMapVolume(kube::ConfigMapVolumeSource src) {
  return kube::Volume{"cfg", std::move(src)};
}

kube::ConfigMap MakeConfigMap(const std::string& ns, const std::string& name,
                              std::map<std::string, std::string> data,
                              std::map<std::string, std::string> binary = {}) {
  kube::ConfigMap cm;
  cm.metadata.namespace_ = ns;
  cm.metadata.name = name;
  cm.data = std::move(data);
  cm.binary_data = std::move(binary);
  return cm;
}

// docs/kubelet-behavior.md §4.7 vectors and upstream's configMap e2e payloads, through the plugin.
TEST(ConfigMapPluginTest, PayloadVectors) {
  const std::string kBinary("\x00\xff\x10", 3);
  struct Case {
    const char* name;
    kube::ConfigMap object;
    kube::ConfigMapVolumeSource source;
    Payload expected;
    const char* error;  // nullptr on success
  };
  const Case cases[] = {
      {"no_items",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}, {"bar", "bar"}}),
       {"cm", {}, 0644, std::nullopt},
       {{"foo", {"foo", 0644, {}}}, {"bar", {"bar", 0644, {}}}},
       nullptr},
      {"binary_only",
       MakeConfigMap("ns", "cm", {}, {{"foo", kBinary}, {"bar", "b"}}),
       {"cm", {}, 0644, std::nullopt},
       {{"foo", {kBinary, 0644, {}}}, {"bar", {"b", 0644, {}}}},
       nullptr},
      {"mixed",
       MakeConfigMap("ns", "cm", {{"bar", "bar"}}, {{"foo", kBinary}}),
       {"cm", {}, 0644, std::nullopt},
       {{"foo", {kBinary, 0644, {}}}, {"bar", {"bar", 0644, {}}}},
       nullptr},
      {"one_item",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}, {"bar", "bar"}}),
       {"cm", {{"foo", "path/to/foo.txt", {}}}, 0644, std::nullopt},
       {{"path/to/foo.txt", {"foo", 0644, {}}}},
       nullptr},
      {"nested_items",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}, {"bar", "bar"}}),
       {"cm",
        {{"foo", "path/to/1/2/3/foo.txt", {}}, {"bar", "another/path/to/the/esteemed/bar.bin", {}}},
        0644,
        std::nullopt},
       {{"path/to/1/2/3/foo.txt", {"foo", 0644, {}}},
        {"another/path/to/the/esteemed/bar.bin", {"bar", 0644, {}}}},
       nullptr},
      {"binary_item",
       MakeConfigMap("ns", "cm", {}, {{"foo", kBinary}}),
       {"cm", {{"foo", "foo.bin", {}}}, 0644, std::nullopt},
       {{"foo.bin", {kBinary, 0644, {}}}},
       nullptr},
      {"missing_key",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}}),
       {"cm", {{"zab", "path/to/foo.txt", {}}}, 0644, std::nullopt},
       {},
       "configmap references non-existent config key: zab"},
      {"missing_key_optional",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}}),
       {"cm", {{"zab", "path/to/foo.txt", {}}}, 0644, true},
       {},
       nullptr},
      {"item_modes",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}, {"bar", "bar"}}),
       {"cm", {{"foo", "foo.txt", 0400}, {"bar", "bar.bin", 0400}}, 0644, std::nullopt},
       {{"foo.txt", {"foo", 0400, {}}}, {"bar.bin", {"bar", 0400, {}}}},
       nullptr},
      {"default_mode",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}}),
       {"cm", {}, 0400, std::nullopt},
       {{"foo", {"foo", 0400, {}}}},
       nullptr},
      {"item_mode_overrides_default",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}, {"bar", "bar"}}),
       {"cm", {{"foo", "a", 0600}, {"bar", "b", {}}}, 0440, std::nullopt},
       {{"a", {"foo", 0600, {}}}, {"b", {"bar", 0440, {}}}},
       nullptr},
      {"later_item_wins",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}, {"bar", "bar"}}),
       {"cm", {{"foo", "same", 0600}, {"bar", "same", {}}}, 0644, std::nullopt},
       {{"same", {"bar", 0644, {}}}},
       nullptr},
      {"no_default_mode",
       MakeConfigMap("ns", "cm", {{"foo", "foo"}}),
       {"cm", {}, std::nullopt, std::nullopt},
       {},
       "no defaultMode used, not even the default value for it"},
      {"missing_object",
       MakeConfigMap("ns", "other", {}),
       {"cm", {}, 0644, std::nullopt},
       {},
       "configmap \"cm\" not found"},
      {"missing_object_optional",
       MakeConfigMap("ns", "other", {}),
       {"cm", {{"foo", "foo", {}}}, 0644, true},
       {},
       nullptr},
      {"same_name_other_namespace",
       MakeConfigMap("other-ns", "cm", {{"foo", "foo"}}),
       {"cm", {}, 0644, std::nullopt},
       {},
       "configmap \"cm\" not found"},
  };
  ConfigMapPlugin plugin;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeObjectLookup objects;
    objects.Add(c.object);
    VolumeHost host;
    host.objects = &objects;
    auto payload = plugin.BuildPayload(PodIn("ns"), ConfigMapVolume(c.source), host);
    if (c.error == nullptr) {
      ASSERT_TRUE(payload.ok()) << payload.status().message();
      EXPECT_EQ(*payload, c.expected);
    } else {
      ASSERT_FALSE(payload.ok());
      EXPECT_EQ(payload.status().message(), c.error);
    }
  }
}

TEST(ConfigMapPluginTest, LookupErrorsPassThroughEvenWhenOptional) {
  FakeObjectLookup objects;
  objects.Fail("ns", "cm", "object \"ns\"/\"cm\" not registered");
  VolumeHost host;
  host.objects = &objects;
  ConfigMapPlugin plugin;
  auto payload = plugin.BuildPayload(PodIn("ns"), ConfigMapVolume({"cm", {}, 0644, true}), host);
  ASSERT_FALSE(payload.ok());
  EXPECT_EQ(payload.status().message(), "object \"ns\"/\"cm\" not registered");
}

TEST(ConfigMapPluginTest, NamesAndReferences) {
  ConfigMapPlugin plugin;
  EXPECT_EQ(plugin.Name(), "kubernetes.io/configmap");
  EXPECT_EQ(plugin.EscapedName(), "kubernetes.io~configmap");
  EXPECT_EQ(plugin.medium(), Medium::kDisk);
  const kube::Volume v = ConfigMapVolume({"app-cfg", {}, 0644, std::nullopt});
  EXPECT_TRUE(plugin.Supports(v));
  EXPECT_FALSE(plugin.Supports(kube::Volume{"s", kube::SecretVolumeSource{}}));
  EXPECT_FALSE(plugin.DependsOnPod(v));
  const std::vector<ObjectRef> refs = plugin.ReferencedObjects(PodIn("shop"), v);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0], (ObjectRef{ObjectKind::kConfigMap, "shop", "app-cfg"}));
  EXPECT_EQ(refs[0].ToString(), "configmap shop/app-cfg");
  EXPECT_EQ(UniqueVolumeName(plugin, "c427bb19", "cluster-config"),
            "kubernetes.io/configmap/c427bb19-cluster-config");
}

TEST(ConfigMapPluginTest, ConsumableAfterUpdate) {
  // The same volume rebuilt after the object changed shows the new bytes and drops removed keys.
  FakeObjectLookup objects;
  objects.Add(MakeConfigMap("ns", "cm", {{"data-1", "value-1"}, {"data-2", "value-2"}}));
  VolumeHost host;
  host.objects = &objects;
  ConfigMapPlugin plugin;
  const kube::Volume v = ConfigMapVolume({"cm", {}, 0644, std::nullopt});
  EXPECT_EQ(plugin.BuildPayload(PodIn("ns"), v, host)->size(), 2u);
  objects.Add(MakeConfigMap("ns", "cm", {{"data-1", "value-2"}}));
  auto updated = plugin.BuildPayload(PodIn("ns"), v, host);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(*updated, (Payload{{"data-1", {"value-2", 0644, {}}}}));
}

}  // namespace
}  // namespace plugins
