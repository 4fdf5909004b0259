#include "kube/object_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace kube {
namespace {

using nlohmann::json;

// The Pod of docs/kubernetes-api.md §3.1, with an unknown field added.
constexpr char kPodJson[] = R"({"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"web-0","namespace":"shop","uid":"3b1f6c2e-8f0a-4c55-9a51-6c1f4c0c9e10",
   "resourceVersion":"48190","labels":{"app":"web"},"managedFields":[{"x":1}]},
 "spec":{"nodeName":"node-1",
   "securityContext":{"fsGroup":2000,"fsGroupChangePolicy":"OnRootMismatch","runAsUser":1000},
   "containers":[{"name":"app","image":"web:1",
     "resources":{"limits":{"cpu":"500m","memory":"128Mi"}},
     "volumeMounts":[{"name":"cfg","mountPath":"/etc/app"},
       {"name":"cfg","mountPath":"/etc/nginx/nginx.conf","subPathExpr":"$(POD)/nginx.conf"}]}],
   "volumes":[
     {"name":"cfg","configMap":{"name":"app-config","defaultMode":420,
        "items":[{"key":"app.yaml","path":"conf/app.yaml","mode":256}]}},
     {"name":"tls","secret":{"secretName":"web-tls","defaultMode":384,"optional":true}},
     {"name":"all","projected":{"defaultMode":420,"sources":[
        {"configMap":{"name":"app-config","items":[{"key":"a","path":"a.txt"}]}},
        {"secret":{"name":"web-tls"}},
        {"downwardAPI":{"items":[{"path":"labels","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels"}}]}},
        {"serviceAccountToken":{"audience":"vault","expirationSeconds":600,"path":"token"}},
        {"clusterTrustBundle":{"signerName":"example.com/s","path":"ca.pem","optional":true}},
        {"futureSource":{"x":1}}]}},
     {"name":"info","downwardAPI":{"defaultMode":420,"items":[{"path":"mem",
        "resourceFieldRef":{"containerName":"app","resource":"limits.memory","divisor":"1Mi"}}]}},
     {"name":"scratch","emptyDir":{"medium":"Memory","sizeLimit":"64Mi"}},
     {"name":"bare"},
     {"name":"host","hostPath":{"path":"/x"},"futureField":true}]},
 "status":{"phase":"Running","podIP":"10.1.2.3"}})";

TEST(ObjectDecoderTest, DecodesThePodOfTheSpec) {
  auto pod = DecodePod(json::parse(kPodJson));
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ(pod->metadata.name, "web-0");
  EXPECT_EQ(pod->metadata.namespace_, "shop");
  EXPECT_EQ(pod->metadata.labels.at("app"), "web");
  EXPECT_EQ(pod->spec.node_name, "node-1");
  ASSERT_TRUE(pod->spec.security_context);
  EXPECT_EQ(pod->spec.security_context->fs_group, 2000);
  EXPECT_EQ(pod->spec.security_context->run_as_user, 1000);
  ASSERT_EQ(pod->spec.containers.size(), 1u);
  EXPECT_EQ(pod->spec.containers[0].resources.limits.at("cpu").MilliValue(), 500);
  EXPECT_EQ(pod->spec.containers[0].volume_mounts[0].mount_path, "/etc/app");
  ASSERT_EQ(pod->spec.containers[0].volume_mounts.size(), 2u);
  EXPECT_EQ(pod->spec.containers[0].volume_mounts[1].sub_path_expr, "$(POD)/nginx.conf");
  EXPECT_EQ(pod->spec.containers[0].volume_mounts[1].sub_path, "");
  ASSERT_EQ(pod->spec.volumes.size(), 7u);

  const auto& cm = std::get<ConfigMapVolumeSource>(pod->spec.volumes[0].source);
  EXPECT_EQ(cm.name, "app-config");
  EXPECT_EQ(cm.default_mode, 420);
  ASSERT_EQ(cm.items.size(), 1u);
  EXPECT_EQ(cm.items[0], (KeyToPath{"app.yaml", "conf/app.yaml", 256}));
  EXPECT_FALSE(cm.optional.has_value());

  const auto& sec = std::get<SecretVolumeSource>(pod->spec.volumes[1].source);
  EXPECT_EQ(sec.secret_name, "web-tls");
  EXPECT_EQ(sec.optional, true);

  const auto& proj = std::get<ProjectedVolumeSource>(pod->spec.volumes[2].source);
  ASSERT_EQ(proj.sources.size(), 6u);
  EXPECT_EQ(proj.sources[0].config_map->items[0].path, "a.txt");
  EXPECT_EQ(proj.sources[1].secret->name, "web-tls");
  EXPECT_EQ(proj.sources[2].downward_api->items[0].field_ref->field_path, "metadata.labels");
  EXPECT_EQ(proj.sources[3].service_account_token->expiration_seconds, 600);
  EXPECT_EQ(proj.sources[4].cluster_trust_bundle->signer_name, "example.com/s");
  EXPECT_EQ(proj.sources[5].unsupported_kind, "futureSource");

  const auto& dapi = std::get<DownwardAPIVolumeSource>(pod->spec.volumes[3].source);
  EXPECT_EQ(dapi.items[0].resource_field_ref->divisor->Value(), 1 << 20);

  EXPECT_EQ(std::get<UnsupportedVolumeSource>(pod->spec.volumes[4].source).kind, "emptyDir");
  EXPECT_EQ(std::get<UnsupportedVolumeSource>(pod->spec.volumes[5].source).kind, "emptyDir");
  EXPECT_EQ(std::get<UnsupportedVolumeSource>(pod->spec.volumes[6].source).kind, "hostPath");
  EXPECT_EQ(pod->status.phase, "Running");
  EXPECT_EQ(pod->FindVolume("tls"), &pod->spec.volumes[1]);
  EXPECT_EQ(pod->FindVolume("nope"), nullptr);
}

// A pod being deleted gracefully, as the API server sends it between the MODIFIED that sets the
// deletion fields and the DELETED: both fields decoded, and absent on a live pod.
TEST(ObjectDecoderTest, DecodesTheDeletionFields) {
  json j = json::parse(kPodJson);
  auto live = DecodePod(j);
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_FALSE(live->metadata.deletion_timestamp.has_value());
  EXPECT_FALSE(live->metadata.deletion_grace_period_seconds.has_value());

  j["metadata"]["deletionTimestamp"] = "2025-03-01T10:00:30Z";
  j["metadata"]["deletionGracePeriodSeconds"] = 30;
  auto deleting = DecodePod(j);
  ASSERT_TRUE(deleting.ok()) << deleting.status().message();
  EXPECT_EQ(deleting->metadata.deletion_timestamp, "2025-03-01T10:00:30Z");
  EXPECT_EQ(deleting->metadata.deletion_grace_period_seconds, 30);

  j["metadata"]["deletionTimestamp"] = 5;
  auto wrong = DecodePod(j);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("metadata.deletionTimestamp"), std::string::npos)
      << wrong.status().message();
}

TEST(ObjectDecoderTest, WrongTypesNameObjectAndField) {
  const struct {
    const char* name;
    const char* json;
    const char* error;
  } cases[] = {
      {"mode_string",
       R"({"metadata":{"name":"web-0"},"spec":{"volumes":[{"name":"a","emptyDir":{}},{"name":"b"},
          {"name":"c","configMap":{"name":"x","items":[{"key":"k","path":"p","mode":"0644"}]}}]}})",
       "pods/web-0: spec.volumes[2].configMap.items[0].mode: expected integer"},
      {"mode_float",
       R"({"metadata":{"name":"p"},"spec":{"volumes":[{"name":"c","secret":{"defaultMode":1.5}}]}})",
       "pods/p: spec.volumes[0].secret.defaultMode: expected integer"},
      {"mode_overflow",
       R"({"metadata":{"name":"p"},"spec":{"volumes":[{"name":"c","secret":{"defaultMode":4294967296}}]}})",
       "pods/p: spec.volumes[0].secret.defaultMode: out of range for int32"},
      {"optional_string",
       R"({"metadata":{"name":"p"},"spec":{"volumes":[{"name":"c","secret":{"optional":"yes"}}]}})",
       "pods/p: spec.volumes[0].secret.optional: expected boolean"},
      {"volumes_object", R"({"metadata":{"name":"p"},"spec":{"volumes":{}}})",
       "pods/p: spec.volumes: expected array"},
      {"label_number", R"({"metadata":{"name":"p","labels":{"a":1}}})",
       "pods/p: metadata.labels[a]: expected string"},
      {"bad_quantity",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1x"}}}]}})",
       "pods/p: spec.containers[0].resources.limits[cpu]: quantities must match"},
      {"two_kinds",
       R"({"metadata":{"name":"p"},"spec":{"volumes":[{"name":"c","secret":{},"configMap":{}}]}})",
       "pods/p: spec.volumes[0]: may not specify more than 1 volume type"},
      {"two_projection_kinds",
       R"({"metadata":{"name":"p"},"spec":{"volumes":[{"name":"c","projected":{"sources":[{"secret":{},"configMap":{}}]}}]}})",
       "pods/p: spec.volumes[0].projected.sources[0]: may not specify more than 1 volume type per "
       "source"},
      {"wrong_kind", R"({"kind":"Secret","metadata":{"name":"p"}})",
       "pods/p: kind: expected \"Pod\""},
      {"wrong_api_version", R"({"apiVersion":"v2","metadata":{"name":"p"}})",
       "pods/p: apiVersion: expected \"v1\""},
      {"unnamed", R"({"metadata":{"name":7}})", "pods/<unnamed>: metadata.name: expected string"},
      {"not_object", R"([1])", "pods/<unnamed>: expected a JSON object"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto pod = DecodePod(json::parse(c.json));
    ASSERT_FALSE(pod.ok());
    EXPECT_EQ(pod.status().message().rfind(c.error, 0), 0u) << pod.status().message();
  }
}

TEST(ObjectDecoderTest, ConfigMapDecodesBinaryData) {
  auto cm = DecodeConfigMap(json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-config","namespace":"shop"},
          "data":{"app.yaml":"port: 8080\n","n":null},"binaryData":{"logo.png":"iVBORw0KGgo="},
          "immutable":true})"));
  ASSERT_TRUE(cm.ok()) << cm.status().message();
  EXPECT_EQ(cm->data.at("app.yaml"), "port: 8080\n");
  EXPECT_EQ(cm->data.at("n"), "");
  EXPECT_EQ(cm->binary_data.at("logo.png"), "\x89PNG\r\n\x1a\n");
  EXPECT_EQ(cm->immutable, true);
}

TEST(ObjectDecoderTest, SecretMergesStringDataAndHidesValuesInErrors) {
  auto s = DecodeSecret(json::parse(
      R"({"kind":"Secret","metadata":{"name":"web-tls"},"type":"kubernetes.io/tls",
          "data":{"a":"YWFh","b":"YmJi"},"stringData":{"b":"plain","c":"see"}})"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->data.at("a"), "aaa");
  EXPECT_EQ(s->data.at("b"), "plain");
  EXPECT_EQ(s->data.at("c"), "see");
  EXPECT_EQ(s->type, "kubernetes.io/tls");

  auto bad = DecodeSecret(
      json::parse(R"({"metadata":{"name":"db"},"data":{"password":"hunter2-not-base64!"}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "secrets/db: data[password]: illegal base64 data at input byte 7");
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string::npos);
}

TEST(ObjectDecoderTest, ListsAcceptNullItemsAndNameFailingItem) {
  auto empty = DecodeConfigMapList(json::parse(
      R"({"kind":"ConfigMapList","metadata":{"resourceVersion":"48213"},"items":null})"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->metadata.resource_version, "48213");
  EXPECT_TRUE(empty->items.empty());

  auto list = DecodeSecretList(json::parse(
      R"({"kind":"SecretList","metadata":{"continue":"abc"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"data":{"k":1}}]})"));
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().message(), "items[1]: secrets/b: data[k]: expected string");

  auto pods = DecodePodList(json::parse(R"({"items":[{"metadata":{"name":"a","uid":"u1"}}]})"));
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(pods->items.at(0).metadata.uid, "u1");
}

}  // namespace
}  // namespace kube
