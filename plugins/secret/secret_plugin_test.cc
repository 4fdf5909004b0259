#include "plugins/secret/secret_plugin.h"

#include <gtest/gtest.h>

#include <string>

#include "plugins/fake_object_lookup.h"

namespace plugins {
namespace {

using atomicwriter::Payload;

kube::Pod PodIn(const std::string& ns) {
  kube::Pod pod;
  pod.metadata.name = "web-0";
  pod.metadata.namespace_ = ns;
  return pod;
}

kube::Secret MakeSecret(const std::string& ns, const std::string& name,
                        std::map<std::string, std::string> data) {
  kube::Secret s;
  s.metadata.namespace_ = ns;
  s.metadata.name = name;
  s.data = std::move(data);
  return s;
}

TEST(SecretPluginTest, PayloadVectors) {
  const std::string kBinary("\x00\x01\xfe", 3);
  struct Case {
    const char* name;
    kube::Secret object;
    kube::SecretVolumeSource source;
    Payload expected;
    const char* error;
  };
  const Case cases[] = {
      {"no_items",
       MakeSecret("ns", "s", {{"data-1", "value-1"}, {"bin", kBinary}}),
       {"s", {}, 0644, std::nullopt},
       {{"data-1", {"value-1", 0644, {}}}, {"bin", {kBinary, 0644, {}}}},
       nullptr},
      {"default_mode_0400",
       MakeSecret("ns", "s", {{"k", "v"}}),
       {"s", {}, 0400, std::nullopt},
       {{"k", {"v", 0400, {}}}},
       nullptr},
      {"mappings_and_item_mode",
       MakeSecret("ns", "s", {{"data-1", "value-1"}, {"data-2", "x"}}),
       {"s", {{"data-1", "new-path-data-1", 0400}}, 0644, std::nullopt},
       {{"new-path-data-1", {"value-1", 0400, {}}}},
       nullptr},
      {"missing_key",
       MakeSecret("ns", "s", {{"k", "v"}}),
       {"s", {{"nope", "p", {}}}, 0644, std::nullopt},
       {},
       "references non-existent secret key: nope"},
      {"missing_key_optional",
       MakeSecret("ns", "s", {{"k", "v"}}),
       {"s", {{"nope", "p", {}}, {"k", "q", {}}}, 0644, true},
       {{"q", {"v", 0644, {}}}},
       nullptr},
      {"missing_object",
       MakeSecret("ns", "other", {}),
       {"s", {}, 0644, std::nullopt},
       {},
       "secret \"s\" not found"},
      {"missing_object_optional",
       MakeSecret("ns", "other", {}),
       {"s", {}, 0644, true},
       {},
       nullptr},
      {"same_name_other_namespace",
       MakeSecret("elsewhere", "s", {{"k", "v"}}),
       {"s", {}, 0644, std::nullopt},
       {},
       "secret \"s\" not found"},
      {"no_default_mode",
       MakeSecret("ns", "s", {{"k", "v"}}),
       {"s", {}, std::nullopt, std::nullopt},
       {},
       "no defaultMode used, not even the default value for it"},
  };
  SecretPlugin plugin;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeObjectLookup objects;
    objects.Add(c.object);
    VolumeHost host;
    host.objects = &objects;
    auto payload = plugin.BuildPayload(PodIn("ns"), kube::Volume{"sec", c.source}, host);
    if (c.error == nullptr) {
      ASSERT_TRUE(payload.ok()) << payload.status().message();
      EXPECT_EQ(*payload, c.expected);
    } else {
      ASSERT_FALSE(payload.ok());
      EXPECT_EQ(payload.status().message(), c.error);
    }
  }
}

TEST(SecretPluginTest, NamesReferencesAndNoObjectSource) {
  SecretPlugin plugin;
  EXPECT_EQ(plugin.EscapedName(), "kubernetes.io~secret");
  EXPECT_EQ(plugin.medium(), Medium::kMemory);
  const kube::Volume v{"tls", kube::SecretVolumeSource{"web-tls", {}, 0644, std::nullopt}};
  ASSERT_TRUE(plugin.Supports(v));
  EXPECT_EQ(plugin.ReferencedObjects(PodIn("shop"), v),
            (std::vector<ObjectRef>{{ObjectKind::kSecret, "shop", "web-tls"}}));
  auto payload = plugin.BuildPayload(PodIn("shop"), v, VolumeHost{});
  ASSERT_FALSE(payload.ok());
  EXPECT_EQ(payload.status().message(), "secret \"web-tls\": no object source configured");
}

}  // namespace
}  // namespace plugins
