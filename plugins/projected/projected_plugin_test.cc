#include "plugins/projected/projected_plugin.h"

#include <gtest/gtest.h>

#include <string>

#include "plugins/fake_object_lookup.h"

namespace plugins {
namespace {

using atomicwriter::Payload;

class FakeTokens : public ServiceAccountTokenSource {
 public:
  base::Result<std::string> GetToken(const kube::Pod& pod,
                                     const kube::ServiceAccountTokenProjection& p) override {
    if (p.audience == "fail") return base::Status::Error("token request failed");
    return "token-for-" + pod.metadata.name + "-" + p.audience;
  }
};

kube::Pod TestPod() {
  kube::Pod pod;
  pod.metadata.name = "web-0";
  pod.metadata.namespace_ = "shop";
  pod.metadata.labels = {{"app", "web"}};
  kube::Container c;
  c.name = "app";
  pod.spec.containers = {c};
  return pod;
}

kube::VolumeProjection CmSource(const char* name, std::vector<kube::KeyToPath> items = {},
                                std::optional<bool> optional = std::nullopt) {
  kube::VolumeProjection p;
  p.config_map = kube::ConfigMapProjection{name, std::move(items), optional};
  return p;
}

kube::VolumeProjection SecretSource(const char* name, std::vector<kube::KeyToPath> items = {},
                                    std::optional<bool> optional = std::nullopt) {
  kube::VolumeProjection p;
  p.secret = kube::SecretProjection{name, std::move(items), optional};
  return p;
}

kube::VolumeProjection DownwardSource(const char* path, const char* field) {
  kube::VolumeProjection p;
  p.downward_api = kube::DownwardAPIProjection{
      {{path, kube::ObjectFieldSelector{"v1", field}, std::nullopt, std::nullopt}}};
  return p;
}

kube::VolumeProjection TokenSource(const char* path, const char* audience = "") {
  kube::VolumeProjection p;
  p.service_account_token = kube::ServiceAccountTokenProjection{audience, 3600, path};
  return p;
}

kube::VolumeProjection BundleSource(const char* path, std::optional<std::string> name,
                                    std::optional<std::string> signer = std::nullopt) {
  kube::VolumeProjection p;
  p.cluster_trust_bundle = kube::ClusterTrustBundleProjection{std::move(name), std::move(signer),
                                                              std::nullopt, std::nullopt, path};
  return p;
}

kube::Volume Projected(std::vector<kube::VolumeProjection> sources,
                       std::optional<int32_t> mode = 0644) {
  return kube::Volume{"all", kube::ProjectedVolumeSource{std::move(sources), mode}};
}

class ProjectedPluginTest : public ::testing::Test {
 protected:
  ProjectedPluginTest() {
    kube::ConfigMap cm;
    cm.metadata.name = "app-config";
    cm.metadata.namespace_ = "shop";
    cm.data = {{"a", "config-a"}, {"b", "config-b"}};
    objects_.Add(cm);
    kube::Secret s;
    s.metadata.name = "web-tls";
    s.metadata.namespace_ = "shop";
    s.data = {{"tls.crt", "CERT"}, {"a", "secret-a"}};
    objects_.Add(s);
    host_.objects = &objects_;
    host_.tokens = &tokens_;
  }

  FakeObjectLookup objects_;
  FakeTokens tokens_;
  VolumeHost host_;
  ProjectedPlugin plugin_;
};

TEST_F(ProjectedPluginTest, PayloadVectors) {
  struct Case {
    const char* name;
    kube::Volume volume;
    Payload expected;
    const char* error;
  };
  const Case cases[] = {
      {"combined",
       Projected({CmSource("app-config", {{"a", "a.txt", {}}}), SecretSource("web-tls"),
                  DownwardSource("labels", "metadata.labels")}),
       {{"a.txt", {"config-a", 0644, {}}},
        {"tls.crt", {"CERT", 0644, {}}},
        {"a", {"secret-a", 0644, {}}},
        {"labels", {"app=\"web\"", 0644, {}}}},
       nullptr},
      {"later_source_wins",
       Projected({CmSource("app-config"), SecretSource("web-tls", {{"a", "b", 0400}})}, 0440),
       {{"a", {"config-a", 0440, {}}}, {"b", {"secret-a", 0400, {}}}},
       nullptr},
      {"optional_missing_object",
       Projected(
           {CmSource("nope", {{"a", "x", {}}}, true), SecretSource("web-tls", {{"a", "s", {}}})}),
       {{"s", {"secret-a", 0644, {}}}},
       nullptr},
      {"optional_missing_key",
       Projected({CmSource("app-config", {{"zz", "x", {}}, {"a", "y", {}}}, true)}),
       {{"y", {"config-a", 0644, {}}}},
       nullptr},
      {"missing_objects_aggregated",
       Projected({CmSource("nope"), SecretSource("gone"), DownwardSource("n", "metadata.name")}),
       {},
       "[configmap \"nope\" not found, secret \"gone\" not found]"},
      {"missing_keys_aggregated",
       Projected(
           {CmSource("app-config", {{"zz", "x", {}}}), SecretSource("web-tls", {{"yy", "y", {}}})}),
       {},
       "[configmap references non-existent config key: zz, references non-existent secret key: "
       "yy]"},
      {"no_default_mode",
       Projected({CmSource("app-config")}, std::nullopt),
       {},
       "no defaultMode used, not even the default value for it"},
      {"token_no_default_mode",
       Projected({TokenSource("token")}, std::nullopt),
       {},
       "no defaultMode used, not even the default value for it"},
      {"token",
       Projected({TokenSource("token", "vault")}),
       {{"token", {"token-for-web-0-vault", 0644, {}}}},
       nullptr},
      {"token_error",
       Projected({TokenSource("token", "fail")}),
       {},
       "serviceAccountToken source (path \"token\"): token request failed"},
      {"bundle",
       Projected({CmSource("app-config", {{"a", "a", {}}}), BundleSource("ca.pem", "root")}),
       {},
       "clusterTrustBundle source (path \"ca.pem\") is not supported by volumemanager: only the "
       "kubelet can produce it, so the volume can be set up only on a node whose kubelet owns the "
       "pod's volumes (--volume-ownership kubelet)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto payload = plugin_.BuildPayload(TestPod(), c.volume, host_);
    if (c.error == nullptr) {
      ASSERT_TRUE(payload.ok()) << payload.status().message();
      EXPECT_EQ(*payload, c.expected);
    } else {
      ASSERT_FALSE(payload.ok());
      EXPECT_EQ(payload.status().message(), c.error);
    }
  }
}

TEST_F(ProjectedPluginTest, CredentialModesFollowFsUserAndFsGroup) {
  // §4.7: SA token 0644 by default; fsUser 1000 -> 0600 owned by 1000; fsGroup -> 0600.
  const kube::Volume v =
      Projected({TokenSource("token"), CmSource("app-config", {{"a", "a", {}}})});
  kube::Pod plain = TestPod();
  auto p0 = plugin_.BuildPayload(plain, v, host_);
  ASSERT_TRUE(p0.ok());
  EXPECT_EQ(p0->at("token").mode, 0644u);
  EXPECT_FALSE(p0->at("token").fs_user.has_value());

  kube::Pod fs_user = TestPod();
  fs_user.spec.security_context = kube::PodSecurityContext{std::nullopt, 1000, ""};
  auto p1 = plugin_.BuildPayload(fs_user, v, host_);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->at("token"), (atomicwriter::FileProjection{"token-for-web-0-", 0600, 1000}));
  EXPECT_EQ(p1->at("a"), (atomicwriter::FileProjection{"config-a", 0644, std::nullopt}));

  kube::Pod fs_group = TestPod();
  fs_group.spec.security_context = kube::PodSecurityContext{1000, std::nullopt, ""};
  auto p2 = plugin_.BuildPayload(fs_group, v, host_);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->at("token"), (atomicwriter::FileProjection{"token-for-web-0-", 0600, {}}));
}

TEST_F(ProjectedPluginTest, EffectiveRunAsUser) {
  kube::Pod pod = TestPod();
  EXPECT_EQ(EffectiveRunAsUser(pod), std::nullopt);
  pod.spec.security_context = kube::PodSecurityContext{std::nullopt, 1000, ""};
  EXPECT_EQ(EffectiveRunAsUser(pod), 1000);
  kube::Container other;
  other.name = "other";
  other.security_context = kube::ContainerSecurityContext{2000};
  pod.spec.containers.push_back(other);
  EXPECT_EQ(EffectiveRunAsUser(pod), std::nullopt);  // two different uids
  pod.spec.containers[0].security_context = kube::ContainerSecurityContext{2000};
  EXPECT_EQ(EffectiveRunAsUser(pod), 2000);  // container settings override the pod's
}

TEST_F(ProjectedPluginTest, SourcesItCannotProduceNameThemselvesAndWhy) {
  VolumeHost bare;
  bare.objects = &objects_;
  kube::VolumeProjection certificate;
  certificate.unsupported_kind = "podCertificate";
  kube::VolumeProjection newer;
  newer.unsupported_kind = "fancyNewSource";
  auto payload = plugin_.BuildPayload(TestPod(),
                                      Projected({TokenSource("token"), CmSource("app-config"),
                                                 certificate, newer, kube::VolumeProjection{}}),
                                      bare);
  ASSERT_FALSE(payload.ok());
  const std::string why =
      " is not supported by volumemanager: only the kubelet can produce it, so the volume can be "
      "set up only on a node whose kubelet owns the pod's volumes (--volume-ownership kubelet)";
  EXPECT_EQ(payload.status().message(),
            "[serviceAccountToken source (path \"token\"): no token source configured; service "
            "account tokens need an API server (cluster mode), podCertificate source" +
                why + ", fancyNewSource source" + why + ", projected source with no kind" + why +
                "]");
}

TEST_F(ProjectedPluginTest, ReferencesAndPodDependence) {
  const kube::Volume v = Projected(
      {CmSource("app-config"), SecretSource("web-tls"), CmSource("app-config"), TokenSource("t")});
  EXPECT_EQ(plugin_.ReferencedObjects(TestPod(), v),
            (std::vector<ObjectRef>{{ObjectKind::kConfigMap, "shop", "app-config"},
                                    {ObjectKind::kSecret, "shop", "web-tls"}}));
  EXPECT_FALSE(plugin_.DependsOnPod(v));
  EXPECT_TRUE(plugin_.DependsOnPod(Projected({DownwardSource("n", "metadata.name")})));
  // Tokens: one per audience and expiry (two paths of one token share it), bound to the pod.
  kube::Pod pod = TestPod();
  pod.metadata.uid = "uid-1";
  pod.spec.service_account_name = "web";
  const auto tokens =
      plugin_.ReferencedTokens(pod, Projected({TokenSource("a", "vault"), CmSource("app-config"),
                                               TokenSource("b", "vault"), TokenSource("c")}));
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0], (kube::TokenRef{"shop", "web", "vault", 3600, "web-0", "uid-1"}));
  EXPECT_EQ(tokens[1].audience, "");
  EXPECT_EQ(tokens[0].ToString(),
            "service account \"shop/web\" (pod shop/web-0, audience \"vault\", 3600 s)");
  EXPECT_TRUE(plugin_.ReferencedTokens(pod, Projected({CmSource("app-config")})).empty());
  EXPECT_EQ(plugin_.EscapedName(), "kubernetes.io~projected");
}

class FakeLive : public LiveContent {
 public:
  base::Result<std::string> Read(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return base::Status::Error("open " + path + ": no such file");
    return it->second;
  }
  std::map<std::string, std::string> files;
};

TEST_F(ProjectedPluginTest, BesideTheKubeletDownwardItemsAreCarriedOverFromTheLiveVersion) {
  FakeLive live;
  // The kubelet's copy of the pod had other labels than the API object the daemon sees.
  live.files["labels"] = "app=\"web\"\nkubelet-only=\"x\"";
  host_.pod_derived_from = &live;
  kube::Volume v =
      Projected({CmSource("app-config"), DownwardSource("labels", "metadata.labels")}, 0640);
  auto payload = plugin_.BuildPayload(TestPod(), v, host_);
  ASSERT_TRUE(payload.ok()) << payload.status().message();
  EXPECT_EQ(payload->at("labels").data, live.files["labels"]);
  EXPECT_EQ(payload->at("labels").mode, 0640u);
  EXPECT_EQ(payload->at("a").data, "config-a");

  live.files.clear();
  auto missing = plugin_.BuildPayload(TestPod(), v, host_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("downwardAPI item \"labels\": not carried over"),
            std::string::npos);
}

TEST_F(ProjectedPluginTest, VolumesWithSourcesOtherThanObjectsAndDownwardItemsAreTheKubeletsOnly) {
  EXPECT_FALSE(plugin_.KubeletOnly(Projected({CmSource("app-config"), SecretSource("web-tls"),
                                              DownwardSource("labels", "metadata.labels")})));
  EXPECT_EQ(plugin_.KubeletOnlyReason(Projected({CmSource("app-config"), TokenSource("token")})),
            "projected sources only the kubelet produces: serviceAccountToken");
  EXPECT_EQ(plugin_.KubeletOnlyReason(Projected({BundleSource("ca.pem", "bundle")})),
            "projected sources only the kubelet produces: clusterTrustBundle");
  // A kind this code does not know (a newer API's) is the kubelet's too, never a failure beside it.
  kube::VolumeProjection certificate;
  certificate.unsupported_kind = "podCertificate";
  kube::VolumeProjection newer;
  newer.unsupported_kind = "fancyNewSource";
  EXPECT_EQ(plugin_.KubeletOnlyReason(Projected(
                {TokenSource("a"), certificate, TokenSource("b"), newer, CmSource("app-config")})),
            "projected sources only the kubelet produces: serviceAccountToken, podCertificate, "
            "fancyNewSource");
}

}  // namespace
}  // namespace plugins
