#include "plugins/object_payload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/fake_object_lookup.h"

namespace plugins {
namespace {

// "path:mode:bytes" per file, in path order.
std::vector<std::string> Files(const atomicwriter::Payload& payload) {
  std::vector<std::string> out;
  for (const auto& [path, file] : payload) {
    out.push_back(path + ":" + std::to_string(file.mode) + ":" + file.data);
  }
  return out;
}

kube::ConfigMap ConfigMap() {
  kube::ConfigMap cm;
  cm.metadata.namespace_ = "ns";
  cm.metadata.name = "cm";
  cm.data = {{"a", "1"}, {"b", "2"}};
  cm.binary_data = {{"bin", "\x01"}};
  return cm;
}

kube::Secret Secret() {
  kube::Secret secret;
  secret.metadata.namespace_ = "ns";
  secret.metadata.name = "s";
  secret.data = {{"a", "pw"}};
  return secret;
}

TEST(MakeObjectPayloadTest, ConfigMapAndSecretKeys) {
  struct Case {
    const char* name;
    std::vector<kube::KeyToPath> items;
    bool optional;
    bool secret;
    std::vector<std::string> want;  // files, or the one error text
  } cases[] = {
      {"configmap_all_keys_data_then_binary",
       {},
       false,
       false,
       {"a:420:1", "b:420:2", "bin:420:\x01"}},
      {"configmap_items_in_order_with_modes",
       {{"bin", "x/bin", 0400}, {"a", "x/a", std::nullopt}, {"b", "x/a", 0600}},
       false,
       false,
       {"x/a:384:2", "x/bin:256:\x01"}},
      {"configmap_missing_key_fails",
       {{"a", "a", {}}, {"zz", "zz", {}}},
       false,
       false,
       {"configmap references non-existent config key: zz"}},
      {"configmap_missing_key_optional_skipped",
       {{"zz", "zz", {}}, {"a", "a", {}}},
       true,
       false,
       {"a:420:1"}},
      {"secret_all_keys", {}, false, true, {"a:420:pw"}},
      {"secret_missing_key_fails",
       {{"b", "b", {}}},
       false,
       true,
       {"references non-existent secret key: b"}},
      {"secret_missing_key_optional_skipped", {{"b", "b", {}}}, true, true, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto payload = c.secret ? MakeObjectPayload(c.items, Secret(), 0644, c.optional)
                            : MakeObjectPayload(c.items, ConfigMap(), 0644, c.optional);
    if (payload.ok()) {
      EXPECT_EQ(Files(*payload), c.want);
    } else {
      EXPECT_EQ(std::vector<std::string>{payload.status().message()}, c.want);
    }
  }
}

TEST(MakeObjectPayloadTest, NoDefaultModeFails) {
  auto payload = MakeObjectPayload({}, Secret(), std::nullopt, false);
  ASSERT_FALSE(payload.ok());
  EXPECT_EQ(payload.status().message(), "no defaultMode used, not even the default value for it");
}

TEST(GetObjectOrEmptyTest, FoundMissingOptionalAndErrors) {
  FakeObjectLookup objects;
  objects.Add(ConfigMap());
  objects.Fail("ns", "broken", "object \"ns\"/\"broken\" not registered");
  VolumeHost host;
  host.objects = &objects;

  auto found = GetObjectOrEmpty<kube::ConfigMap>(host, "ns", "cm", false);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->data.at("a"), "1");

  auto empty = GetObjectOrEmpty<kube::Secret>(host, "ns", "cm", true);
  ASSERT_TRUE(empty.ok()) << "a Secret of that name does not exist: optional gives an empty one";
  EXPECT_EQ((*empty)->metadata.name, "cm");
  EXPECT_EQ((*empty)->metadata.namespace_, "ns");
  EXPECT_TRUE((*empty)->data.empty());

  EXPECT_EQ(GetObjectOrEmpty<kube::ConfigMap>(host, "ns", "nope", false).status().message(),
            "configmap \"nope\" not found");
  EXPECT_EQ(GetObjectOrEmpty<kube::Secret>(host, "ns", "nope", false).status().message(),
            "secret \"nope\" not found");
  // The kubelet's not-found is the API's NotFound: the status says so (/debug/state, metrics).
  const base::Status not_found =
      GetObjectOrEmpty<kube::ConfigMap>(host, "ns", "nope", false).status();
  EXPECT_EQ(not_found.api_code(), 404);
  EXPECT_EQ(not_found.api_reason(), "NotFound");
  EXPECT_EQ(GetObjectOrEmpty<kube::Secret>(host, "ns", "broken", true).status().api_code(), 0);
  EXPECT_EQ(GetObjectOrEmpty<kube::Secret>(host, "ns", "broken", true).status().message(),
            "object \"ns\"/\"broken\" not registered")
      << "lookup errors pass through, optional or not";

  host.objects = nullptr;
  EXPECT_EQ(GetObjectOrEmpty<kube::ConfigMap>(host, "ns", "cm", true).status().message(),
            "configmap \"cm\": no object source configured");
}

}  // namespace
}  // namespace plugins
