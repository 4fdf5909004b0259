#include "cache/fake_object_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cache {
namespace {

using ::testing::ElementsAre;

TEST(FakeObjectManagerTest, KeepsTheObjectManagerContract) {
  FakeObjectManager fake;
  std::vector<kube::ObjectRef> changes;
  fake.SetChangeHandler([&](const kube::ObjectRef& r) { changes.push_back(r); });
  const kube::ObjectRef cm_ref{kube::ObjectKind::kConfigMap, "ns", "cm"};
  const kube::ObjectRef other{kube::ObjectKind::kConfigMap, "ns", "other"};

  kube::ConfigMap cm;
  cm.metadata.namespace_ = "ns";
  cm.metadata.name = "cm";
  cm.data["k"] = "v";
  fake.SetConfigMap(cm);
  EXPECT_EQ(fake.GetConfigMap("ns", "cm").status().message(),
            "object \"ns\"/\"cm\" not registered");

  fake.RegisterPod("pod", {cm_ref});
  auto got = fake.GetConfigMap("ns", "cm");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->data.at("k"), "v");
  EXPECT_FALSE(fake.GetSecret("ns", "cm").ok()) << "a secret of that name is not referenced";

  cm.data["k"] = "v2";
  fake.SetConfigMap(cm);
  kube::ConfigMap o;
  o.metadata.namespace_ = "ns";
  o.metadata.name = "other";
  fake.SetConfigMap(o);  // not referenced: no notification
  fake.Delete(cm_ref);
  EXPECT_THAT(changes, ElementsAre(cm_ref, cm_ref));
  got = fake.GetConfigMap("ns", "cm");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, nullptr);

  fake.SetError(cm_ref, base::Status::Error("boom"));
  EXPECT_EQ(fake.GetConfigMap("ns", "cm").status().message(), "boom");
  fake.ClearError(cm_ref);
  EXPECT_TRUE(fake.GetConfigMap("ns", "cm").ok());
  fake.UnregisterPod("pod");
  EXPECT_FALSE(fake.GetConfigMap("ns", "cm").ok());
  EXPECT_EQ(fake.gets(), 7);
}

}  // namespace
}  // namespace cache
