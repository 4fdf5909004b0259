#include "cache/read_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cache/fake_object_manager.h"

namespace cache {
namespace {

using ::testing::ElementsAre;

const kube::ObjectRef kCm{kube::ObjectKind::kConfigMap, "shop", "cfg"};
const kube::ObjectRef kSecret{kube::ObjectKind::kSecret, "shop", "db"};
const kube::ObjectRef kElsewhere{kube::ObjectKind::kConfigMap, "other", "cfg"};

TEST(ReadPolicyTest, RefusalsNameTheObjectTheFlagAndTheChartValue) {
  ReadPolicy all;
  EXPECT_TRUE(all.ReadsEverything());
  EXPECT_EQ(all.Refusal(kSecret), "");
  EXPECT_EQ(all.Describe(), "");

  ReadPolicy policy;
  policy.secrets = false;
  policy.namespaces = {"shop", "a"};
  EXPECT_FALSE(policy.ReadsEverything());
  EXPECT_EQ(policy.Refusal(kCm), "");
  EXPECT_EQ(policy.Refusal(kSecret),
            "secret shop/db is not read: the daemon reads no Secrets (--no-secrets; chart: "
            "rbac.secrets: false)");
  EXPECT_EQ(policy.Refusal(kElsewhere),
            "configmap other/cfg is not read: the daemon reads ConfigMaps and Secrets only in the "
            "namespaces a, shop (--object-namespaces; chart: rbac.namespaces)");
  EXPECT_EQ(policy.FirstRefusal({kCm, kElsewhere, kSecret}), policy.Refusal(kElsewhere));
  EXPECT_EQ(policy.FirstRefusal({kCm}), "");
  EXPECT_EQ(policy.Describe(),
            "no Secrets (--no-secrets); ConfigMaps and Secrets only in the namespaces a, shop "
            "(--object-namespaces)");
}

// A refused object never reaches the manager behind (no watch, no request); its gets fail with
// the policy's sentence; everything else passes through.
TEST(ReadPolicyTest, TheManagerNeverRegistersOrFetchesARefusedObject) {
  FakeObjectManager inner;
  ReadPolicy policy;
  policy.secrets = false;
  PolicyObjectManager manager(&inner, policy);
  kube::ConfigMap cm;
  cm.metadata.namespace_ = "shop";
  cm.metadata.name = "cfg";
  inner.SetConfigMap(cm);

  manager.RegisterPod("pod", {kCm, kSecret});
  EXPECT_THAT(inner.registrations().at("pod"), ElementsAre(kCm));
  bool done = false;
  manager.Fetch({kSecret, kCm}, ObjectManager::FetchMode::kStrategy, [&] { done = true; });
  EXPECT_TRUE(done);
  ASSERT_EQ(inner.fetches().size(), 1u);
  EXPECT_THAT(inner.fetches()[0].refs, ElementsAre(kCm));

  const int gets = inner.gets();
  EXPECT_EQ(manager.GetSecret("shop", "db").status().message(), policy.Refusal(kSecret));
  EXPECT_EQ(manager.GetRevision(kSecret).status().message(), policy.Refusal(kSecret));
  EXPECT_EQ(inner.gets(), gets) << "a refused object is never asked for";
  EXPECT_FALSE(manager.Unread(kSecret));
  auto got = manager.GetConfigMap("shop", "cfg");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_NE(*got, nullptr);
  EXPECT_TRUE(manager.GetRevision(kCm).ok());

  manager.UnregisterPod("pod");
  EXPECT_TRUE(inner.registrations().empty());
}

}  // namespace
}  // namespace cache
