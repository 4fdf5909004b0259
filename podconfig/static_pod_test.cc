#include "podconfig/static_pod.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "podconfig/pod_update.h"

namespace podconfig {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kWebYaml[] = R"(apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: app
    volumeMounts: [{name: config, mountPath: /etc/app}]
  volumes:
  - name: config
    configMap: {name: app-config}
)";

// The same object as kWebYaml, written differently.
constexpr char kWebJson[] = R"({"kind":"Pod","apiVersion":"v1","spec":{"volumes":[
  {"configMap":{"name":"app-config"},"name":"config"}],"containers":[{"name":"app",
  "volumeMounts":[{"mountPath":"/etc/app","name":"config"}]}]},
  "metadata":{"labels":{"app":"web"},"name":"web"}})";

TEST(StaticPodTest, AppliesTheKubeletsStaticPodDefaults) {
  auto pod = DecodeStaticPodFile(kWebYaml, "/etc/pods/web.yaml", "Node-1");
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ(pod->metadata.name, "web-node-1");
  EXPECT_EQ(pod->metadata.namespace_, "default");
  EXPECT_EQ(pod->spec.node_name, "Node-1");
  EXPECT_EQ(pod->status.phase, "Pending");
  EXPECT_EQ(pod->metadata.uid.size(), 32u);
  EXPECT_EQ(pod->metadata.annotations.at(kConfigHashAnnotation), pod->metadata.uid);
  // API defaulting happened too.
  const auto& cm = std::get<kube::ConfigMapVolumeSource>(pod->spec.volumes.at(0).source);
  EXPECT_EQ(cm.default_mode, 0644);
}

TEST(StaticPodTest, UidDependsOnContentNodeAndPathOnly) {
  auto uid = [](std::string_view bytes, const std::string& path, const std::string& node) {
    auto pod = DecodeStaticPodFile(bytes, path, node);
    EXPECT_TRUE(pod.ok()) << pod.status().message();
    return pod.ok() ? pod->metadata.uid : std::string();
  };
  const std::string base = uid(kWebYaml, "/p/web.yaml", "n1");
  EXPECT_EQ(uid(kWebYaml, "/p/web.yaml", "n1"), base) << "same input, same UID";
  EXPECT_EQ(uid(std::string(kWebYaml) + "# a comment\n", "/p/web.yaml", "n1"), base)
      << "formatting is not content";
  EXPECT_EQ(uid(kWebJson, "/p/web.yaml", "n1"), base) << "JSON and YAML of one object";
  EXPECT_NE(uid(kWebYaml, "/p/other.yaml", "n1"), base);
  EXPECT_NE(uid(kWebYaml, "/p/web.yaml", "n2"), base);
  std::string changed = kWebYaml;
  changed.replace(changed.find("app: web"), 8, "app: api");
  EXPECT_NE(uid(changed, "/p/web.yaml", "n1"), base);
}

TEST(StaticPodTest, KeepsAnExplicitUidAndNamespace) {
  std::string yaml = kWebYaml;
  yaml.replace(yaml.find("  name: web\n"), 12, "  name: web\n  uid: my-uid\n  namespace: shop\n");
  auto pod = DecodeStaticPodFile(yaml, "/p/web.yaml", "n1");
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ(pod->metadata.uid, "my-uid");
  EXPECT_EQ(pod->metadata.namespace_, "shop");
  EXPECT_EQ(pod->metadata.annotations.at(kConfigHashAnnotation), "my-uid");
}

struct BadFileCase {
  const char* name;
  std::string bytes;
  std::string want;  // substring of the error
};

void PrintTo(const BadFileCase& c, std::ostream* os) { *os << c.name; }

class BadStaticPodFileTest : public ::testing::TestWithParam<BadFileCase> {};

TEST_P(BadStaticPodFileTest, FailsNamingFileObjectAndField) {
  auto pod = DecodeStaticPodFile(GetParam().bytes, "/p/bad.yaml", "n1");
  ASSERT_FALSE(pod.ok());
  EXPECT_THAT(pod.status().message(), HasSubstr("/p/bad.yaml"));
  EXPECT_THAT(pod.status().message(), HasSubstr(GetParam().want));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadStaticPodFileTest,
    ::testing::Values(BadFileCase{"not_yaml", "kind: Pod\n  : : [\n", "line"},
                      BadFileCase{"config_map_not_pod", "kind: ConfigMap\nmetadata: {name: c}\n",
                                  "expected kind Pod"},
                      BadFileCase{
                          "two_pods",
                          "kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n",
                          "expected exactly one Pod, found 2"},
                      BadFileCase{"invalid_item_path",
                                  "kind: Pod\nmetadata: {name: a}\nspec:\n  volumes:\n  - name: v\n"
                                  "    configMap: {name: c, items: [{key: k, path: ../x}]}\n",
                                  "spec.volumes[0].configMap.items[0].path"},
                      BadFileCase{"name_too_long_with_node_suffix",
                                  "kind: Pod\nmetadata: {name: " + std::string(252, 'a') + "}\n",
                                  "metadata.name"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(StaticPodTest, UrlPodListGivesEveryPodItsOwnUid) {
  constexpr char kList[] = R"({"kind":"PodList","items":[{"metadata":{"name":"a"}},
    {"metadata":{"name":"b"}}]})";
  auto pods = DecodeStaticPodsFromUrl(kList, "http://127.0.0.1/pods", "n1");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].metadata.name, "a-n1");
  EXPECT_EQ((*pods)[1].metadata.name, "b-n1");
  EXPECT_NE((*pods)[0].metadata.uid, (*pods)[1].metadata.uid);
  // The URL, not a file path, is hashed: same pod from a file gets another UID.
  auto from_file = DecodeStaticPodFile(R"({"kind":"Pod","metadata":{"name":"a"}})",
                                       "http://127.0.0.1/pods", "n1");
  ASSERT_TRUE(from_file.ok());
  EXPECT_NE(from_file->metadata.uid, (*pods)[0].metadata.uid);
}

TEST(StaticPodTest, UrlEmptyListsHaveNoPods) {
  for (const char* body :
       {R"({"kind":"PodList","items":[]})", R"({"kind":"PodList","items":null})", "kind: List\n"}) {
    auto pods = DecodeStaticPodsFromUrl(body, "http://127.0.0.1/pods", "n1");
    ASSERT_TRUE(pods.ok()) << body << ": " << pods.status().message();
    EXPECT_TRUE(pods->empty()) << body;
  }
}

TEST(StaticPodTest, UrlRejectsOtherKinds) {
  auto pods = DecodeStaticPodsFromUrl("kind: Secret\nmetadata: {name: s}\nstringData: {k: hush}\n",
                                      "http://127.0.0.1/pods", "n1");
  ASSERT_FALSE(pods.ok());
  EXPECT_THAT(pods.status().message(), HasSubstr("expected kind Pod"));
  EXPECT_THAT(pods.status().message(), Not(HasSubstr("hush")));
}

}  // namespace
}  // namespace podconfig
