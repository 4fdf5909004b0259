#include "plugins/downwardapi/downward_api_plugin.h"

#include <gtest/gtest.h>

#include <string>

namespace plugins {
namespace {

using atomicwriter::Payload;

kube::Quantity Q(const char* text) { return *kube::Quantity::Parse(text); }

kube::Pod TestPod() {
  kube::Pod pod;
  pod.metadata.name = "web-0";
  pod.metadata.namespace_ = "shop";
  pod.metadata.uid = "3b1f6c2e-8f0a-4c55-9a51-6c1f4c0c9e10";
  pod.metadata.labels = {{"key2", "value2"}, {"key1", "value1"}};
  pod.metadata.annotations = {
      {"a1", "value1"}, {"a2", "value2"}, {"example.com/multi", "line1\nline2 \"q\""}};
  kube::Container app;
  app.name = "app";
  app.resources.limits = {{"cpu", Q("500m")}, {"memory", Q("64Mi")}, {"hugepages-2Mi", Q("4Mi")}};
  app.resources.requests = {{"cpu", Q("250m")}, {"memory", Q("32Mi")}};
  kube::Container sidecar;
  sidecar.name = "sidecar";  // no limits: node allocatable stands in
  kube::Container init;
  init.name = "init";
  init.resources.limits = {{"cpu", Q("2")}};
  pod.spec.containers = {app, sidecar};
  pod.spec.init_containers = {init};
  return pod;
}

kube::DownwardAPIVolumeFile Field(const char* path, const char* field_path,
                                  std::optional<int32_t> mode = std::nullopt) {
  return {path, kube::ObjectFieldSelector{"v1", field_path}, std::nullopt, mode};
}

kube::DownwardAPIVolumeFile Resource(const char* path, const char* container, const char* resource,
                                     std::optional<kube::Quantity> divisor = std::nullopt) {
  return {path, std::nullopt, kube::ResourceFieldSelector{container, resource, divisor},
          std::nullopt};
}

struct ValueCase {
  const char* name;
  kube::DownwardAPIVolumeFile item;
  const char* value;
};

TEST(DownwardAPIPluginTest, FieldAndResourceValues) {
  const ValueCase cases[] = {
      {"labels", Field("labels", "metadata.labels"), "key1=\"value1\"\nkey2=\"value2\""},
      {"annotations", Field("annotations", "metadata.annotations"),
       "a1=\"value1\"\na2=\"value2\"\nexample.com/multi=\"line1\\nline2 \\\"q\\\"\""},
      {"name", Field("name", "metadata.name"), "web-0"},
      {"namespace", Field("ns", "metadata.namespace"), "shop"},
      {"uid", Field("uid", "metadata.uid"), "3b1f6c2e-8f0a-4c55-9a51-6c1f4c0c9e10"},
      {"label_subscript", Field("l", "metadata.labels['key1']"), "value1"},
      {"annotation_subscript", Field("a", "metadata.annotations['example.com/multi']"),
       "line1\nline2 \"q\""},
      {"missing_subscript", Field("m", "metadata.labels['absent']"), ""},
      {"cpu_limit_default_divisor", Resource("c", "app", "limits.cpu"), "1"},
      {"cpu_limit_millis", Resource("c", "app", "limits.cpu", Q("1m")), "500"},
      {"cpu_request_millis", Resource("c", "app", "requests.cpu", Q("1m")), "250"},
      {"zero_divisor_is_one", Resource("c", "app", "limits.cpu", Q("0")), "1"},
      {"memory_limit", Resource("m", "app", "limits.memory"), "67108864"},
      {"memory_limit_mi", Resource("m", "app", "limits.memory", Q("1Mi")), "64"},
      {"memory_rounds_up", Resource("m", "app", "limits.memory", Q("1G")), "1"},
      {"memory_request_ki", Resource("m", "app", "requests.memory", Q("1Ki")), "32768"},
      {"hugepages", Resource("h", "app", "limits.hugepages-2Mi", Q("1Mi")), "4"},
      {"unset_request_is_zero", Resource("e", "app", "requests.ephemeral-storage"), "0"},
      {"allocatable_cpu", Resource("c", "sidecar", "limits.cpu", Q("1m")), "4000"},
      {"allocatable_memory", Resource("m", "sidecar", "limits.memory", Q("1Gi")), "8"},
      {"allocatable_storage", Resource("s", "sidecar", "limits.ephemeral-storage", Q("1G")), "100"},
      {"init_container", Resource("c", "init", "limits.cpu"), "2"},
  };
  DownwardAPIPlugin plugin;
  VolumeHost host;
  host.node_allocatable = std::make_shared<const kube::ResourceList>(
      kube::ResourceList{{"cpu", Q("4")}, {"memory", Q("8Gi")}, {"ephemeral-storage", Q("100G")}});
  for (const ValueCase& c : cases) {
    SCOPED_TRACE(c.name);
    kube::Volume v{"info", kube::DownwardAPIVolumeSource{{c.item}, 0644}};
    auto payload = plugin.BuildPayload(TestPod(), v, host);
    ASSERT_TRUE(payload.ok()) << payload.status().message();
    ASSERT_EQ(payload->size(), 1u);
    EXPECT_EQ(payload->begin()->second.data, c.value);
    EXPECT_EQ(payload->begin()->second.mode, 0644u);
  }
}

TEST(DownwardAPIPluginTest, ErrorsAreCollected) {
  const struct {
    const char* name;
    std::vector<kube::DownwardAPIVolumeFile> items;
    const char* error;
  } cases[] = {
      {"unsupported_field", {Field("a", "spec.nodeName")}, "unsupported fieldPath: spec.nodeName"},
      {"subscript_on_name",
       {Field("a", "metadata.name['x']")},
       "fieldPath \"metadata.name['x']\" does not support subscript"},
      {"bad_subscript_key",
       {Field("a", "metadata.labels['-bad']")},
       "invalid key subscript in metadata.labels['-bad']: name part must consist of alphanumeric "
       "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
       "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
       "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
      {"container_not_found", {Resource("a", "nope", "limits.cpu")}, "container nope not found"},
      {"unsupported_resource",
       {Resource("a", "app", "limits.gpu")},
       "unsupported container resource : limits.gpu"},
      {"two_errors",
       {Field("a", "metadata.name"), Field("b", "spec.x"), Resource("c", "nope", "limits.cpu")},
       "[unsupported fieldPath: spec.x, container nope not found]"},
  };
  DownwardAPIPlugin plugin;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    kube::Volume v{"info", kube::DownwardAPIVolumeSource{c.items, 0644}};
    auto payload = plugin.BuildPayload(TestPod(), v, VolumeHost{});
    ASSERT_FALSE(payload.ok());
    EXPECT_EQ(payload.status().message(), c.error);
  }
}

TEST(DownwardAPIPluginTest, PathsModesAndOverwrites) {
  DownwardAPIPlugin plugin;
  kube::Volume v{"info", kube::DownwardAPIVolumeSource{
                             {Field("./podinfo//name", "metadata.name", 0400),
                              Field("dup", "metadata.name"), Field("dup", "metadata.namespace"),
                              kube::DownwardAPIVolumeFile{"empty", std::nullopt, std::nullopt, {}}},
                             0440}};
  auto payload = plugin.BuildPayload(TestPod(), v, VolumeHost{});
  ASSERT_TRUE(payload.ok()) << payload.status().message();
  EXPECT_EQ(*payload, (Payload{{"podinfo/name", {"web-0", 0400, {}}},
                               {"dup", {"shop", 0440, {}}},
                               {"empty", {"", 0440, {}}}}));
  EXPECT_TRUE(plugin.DependsOnPod(v));
  EXPECT_TRUE(plugin.ReferencedObjects(TestPod(), v).empty());
  EXPECT_EQ(plugin.EscapedName(), "kubernetes.io~downward-api");

  kube::Volume no_mode{"info", kube::DownwardAPIVolumeSource{{Field("n", "metadata.name")}, {}}};
  EXPECT_EQ(plugin.BuildPayload(TestPod(), no_mode, VolumeHost{}).status().message(),
            "no defaultMode used, not even the default value for it");
}

TEST(DownwardAPIPluginTest, EmptyMapsRenderEmptyFiles) {
  kube::Pod pod;
  EXPECT_EQ(*ExtractFieldPath(pod, "metadata.labels"), "");
  EXPECT_EQ(FormatMap({{"k", ""}}), "k=\"\"");
}

}  // namespace
}  // namespace plugins
