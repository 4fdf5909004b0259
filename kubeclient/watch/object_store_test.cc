#include "kubeclient/watch/object_store.h"

#include <gtest/gtest.h>

namespace kubeclient {
namespace {

TEST(ObjectStoreTest, KeysAndResourceVersions) {
  struct Case {
    std::string name;
    nlohmann::json object;
    std::string key, rv;
  };
  const std::vector<Case> cases = {
      {"namespaced",
       {{"metadata", {{"name", "a"}, {"namespace", "shop"}, {"resourceVersion", "7"}}}},
       "shop/a",
       "7"},
      {"cluster-scoped", {{"metadata", {{"name", "n"}}}}, "n", ""},
      {"no name", {{"metadata", {{"namespace", "shop"}}}}, "", ""},
      {"null metadata", {{"metadata", nullptr}}, "", ""},
      {"not an object", "x", "", ""},
      {"non-string rv", {{"metadata", {{"name", "a"}, {"resourceVersion", 7}}}}, "a", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ObjectStore::KeyOf(c.object), c.key);
    EXPECT_EQ(ObjectStore::ResourceVersionOf(c.object), c.rv);
  }
}

TEST(ObjectStoreTest, AStoredIdentityIsItsResourceVersionAndExpandsFromTheKey) {
  const nlohmann::json identity = "42";
  EXPECT_EQ(ObjectStore::StoredResourceVersion(identity), "42");
  EXPECT_EQ(ObjectStore::Expand("shop/a", identity),
            nlohmann::json(
                {{"metadata", {{"name", "a"}, {"namespace", "shop"}, {"resourceVersion", "42"}}}}));
  EXPECT_EQ(ObjectStore::Expand("node-1", identity),
            nlohmann::json({{"metadata", {{"name", "node-1"}, {"resourceVersion", "42"}}}}));
  // A whole object stays as it is.
  const nlohmann::json whole = {{"metadata", {{"name", "a"}, {"resourceVersion", "7"}}},
                                {"data", {{"k", "v"}}}};
  EXPECT_EQ(ObjectStore::StoredResourceVersion(whole), "7");
  EXPECT_EQ(ObjectStore::Expand("a", whole), whole);
}

TEST(ObjectStoreTest, ResourceVersionOrderIsNumericAndOpaqueOtherwise) {
  struct Case {
    std::string a, b;
    bool older;
  };
  const std::vector<Case> cases = {
      {"9", "10", true}, {"10", "9", false},  {"5", "5", false},   {"123", "124", true},
      {"", "1", false},  {"abc", "1", false}, {"1", "abc", false}, {"12a", "13", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.a + " vs " + c.b);
    EXPECT_EQ(ResourceVersionOlder(c.a, c.b), c.older);
  }
}

TEST(ObjectStoreTest, PutGetErase) {
  ObjectStore store;
  store.Put("shop/a", {{"metadata", {{"name", "a"}}}});
  ASSERT_NE(store.Get("shop/a"), nullptr);
  EXPECT_EQ(store.Get("shop/b"), nullptr);
  store.Erase("shop/a");
  EXPECT_EQ(store.size(), 0u);
}

}  // namespace
}  // namespace kubeclient
