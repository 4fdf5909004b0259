#include "volumemanager/state/volume_inputs.h"

#include <gtest/gtest.h>

#include <functional>

namespace volumemanager {
namespace {

kube::Pod BasePod() {
  kube::Pod pod;
  pod.metadata.name = "web";
  pod.metadata.namespace_ = "default";
  pod.metadata.uid = "u1";
  pod.metadata.labels = {{"app", "web"}};
  kube::Volume v;
  v.name = "cfg";
  kube::ConfigMapVolumeSource src;
  src.name = "app";
  v.source = src;
  pod.spec.volumes.push_back(v);
  kube::Container c;
  c.name = "app";
  pod.spec.containers.push_back(c);
  return pod;
}

ObjectSnapshot Snapshot(const std::string& value) {
  cache::ObjectRevision revision;
  auto cm = std::make_shared<kube::ConfigMap>();
  cm->data = {{"k", value}};
  revision.digest = cache::ContentDigest(*cm);
  revision.config_map = std::move(cm);
  return {{kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", "app"}, revision}};
}

TEST(VolumeInputsTest, ObjectsDigestFollowsContentAndExistence) {
  EXPECT_EQ(ObjectsDigest(Snapshot("a")), ObjectsDigest(Snapshot("a")));
  EXPECT_NE(ObjectsDigest(Snapshot("a")), ObjectsDigest(Snapshot("b")));
  ObjectSnapshot absent = {
      {kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", "app"}, cache::ObjectRevision{}}};
  EXPECT_NE(ObjectsDigest(absent), ObjectsDigest(Snapshot("a")));
  EXPECT_FALSE(ObjectsDigest(absent).empty());
  ObjectSnapshot failed = {{kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", "app"},
                            base::Status::Error("forbidden")}};
  EXPECT_TRUE(ObjectsDigest(failed).empty());
}

TEST(VolumeInputsTest, TheMemoGivesWhatObjectsDigestGivesForEverySnapshot) {
  ObjectsDigestMemo memo;
  ObjectSnapshot absent = {
      {kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", "app"}, cache::ObjectRevision{}}};
  ObjectSnapshot failed = {{kube::ObjectRef{kube::ObjectKind::kConfigMap, "default", "app"},
                            base::Status::Error("forbidden")}};
  ObjectSnapshot other_name = Snapshot("a");
  other_name[0].first.name = "other";
  ObjectSnapshot two = Snapshot("a");
  two.push_back(Snapshot("b")[0]);
  // Repeats (the memo's answer) and every kind of difference after one.
  for (const ObjectSnapshot& s :
       {Snapshot("a"), Snapshot("a"), Snapshot("b"), Snapshot("b"), absent, absent, Snapshot("b"),
        failed, failed, Snapshot("a"), other_name, other_name, two, two, Snapshot("a")}) {
    EXPECT_EQ(memo.Digest(s), ObjectsDigest(s));
  }
}

TEST(VolumeInputsTest, PodChangesMatterOnlyWhereTheContentReadsThem) {
  const struct {
    const char* name;
    std::function<void(kube::Pod*)> edit;
    bool same_for_config_map;  // content does not depend on the pod
    bool same_for_downward_api;
  } cases[] = {
      {"nothing", [](kube::Pod*) {}, true, true},
      {"resource version", [](kube::Pod* p) { p->metadata.resource_version = "7"; }, true, true},
      {"status", [](kube::Pod* p) { p->status.phase = "Running"; }, true, true},
      {"label", [](kube::Pod* p) { p->metadata.labels["tier"] = "x"; }, true, false},
      {"annotation", [](kube::Pod* p) { p->metadata.annotations["a"] = "b"; }, true, false},
      {"container resources",
       [](kube::Pod* p) { p->spec.containers[0].resources.limits["cpu"] = kube::Quantity(); }, true,
       false},
      {"fsGroup",
       [](kube::Pod* p) {
         p->spec.security_context = kube::PodSecurityContext{};
         p->spec.security_context->fs_group = 1000;
       },
       false, false},
      {"volume spec",
       [](kube::Pod* p) {
         std::get<kube::ConfigMapVolumeSource>(p->spec.volumes[0].source).default_mode = 0600;
       },
       false, false},
  };
  const auto base = std::make_shared<const kube::Pod>(BasePod());
  for (const auto& c : cases) {
    kube::Pod edited = BasePod();
    c.edit(&edited);
    VolumeInputs a{ObjectsDigest(Snapshot("v")), base};
    VolumeInputs b{ObjectsDigest(Snapshot("v")), std::make_shared<const kube::Pod>(edited)};
    EXPECT_EQ(SameInputs(a, b, "cfg", false), c.same_for_config_map) << c.name;
    EXPECT_EQ(SameInputs(a, b, "cfg", true), c.same_for_downward_api) << c.name;
  }
}

TEST(VolumeInputsTest, UnknownOrDifferentObjectsAreNeverTheSame) {
  const auto pod = std::make_shared<const kube::Pod>(BasePod());
  EXPECT_TRUE(SameInputs({ObjectsDigest(Snapshot("v")), pod}, {ObjectsDigest(Snapshot("v")), pod},
                         "cfg", false));
  EXPECT_FALSE(SameInputs({ObjectsDigest(Snapshot("v")), pod}, {ObjectsDigest(Snapshot("w")), pod},
                          "cfg", false));
  EXPECT_FALSE(SameInputs({"", pod}, {"", pod}, "cfg", false));
  EXPECT_FALSE(SameInputs({}, {ObjectsDigest(Snapshot("v")), pod}, "cfg", false));
}

TEST(VolumeInputsTest, TokensChangeTheDigestByTheirSerialAndAFailedOneMakesItUnknown) {
  const InputsDigest objects = ObjectsDigest(Snapshot("v"));
  kube::TokenRef ref{"shop", "web", "", 3600, "web-0", "uid-1"};
  auto token = [&](uint64_t serial, const std::string& value) {
    cache::TokenRevision r;
    r.token = std::make_shared<const std::string>(value);
    r.serial = serial;
    return TokenSnapshot{{ref, base::Result<cache::TokenRevision>(r)}};
  };
  EXPECT_EQ(WithTokens(objects, {}), objects);  // no tokens: as before
  const InputsDigest one = WithTokens(objects, token(1, "a"));
  EXPECT_NE(one, objects);
  EXPECT_EQ(WithTokens(objects, token(1, "other bytes, same serial")), one);  // never hashed
  EXPECT_NE(WithTokens(objects, token(2, "a")), one);
  EXPECT_EQ(WithTokens("", token(1, "a")), "");
  EXPECT_EQ(WithTokens(objects, TokenSnapshot{{ref, base::Status::Error("refused")}}), "");
}

TEST(VolumeInputsTest, TheDigestBeforeTokensIsTheDigestItselfWhenNotKeptApart) {
  VolumeInputs no_tokens{"digest", nullptr};
  EXPECT_TRUE(no_tokens.objects_digest_before_tokens.empty()) << "one copy, not two";
  EXPECT_EQ(no_tokens.digest_before_tokens(), "digest");
  VolumeInputs with_tokens{"with-tokens", nullptr, "objects-only"};
  EXPECT_EQ(with_tokens.digest_before_tokens(), "objects-only");
  VolumeInputs unknown{"", nullptr};
  EXPECT_EQ(unknown.digest_before_tokens(), "");
}

TEST(VolumeInputsTest, ADigestIsItsBytesHeldInline) {
  const InputsDigest d = ObjectsDigest(Snapshot("v"));
  EXPECT_EQ(d.bytes().size(), InputsDigest::kMaxBytes) << "a SHA-256";
  EXPECT_EQ(InputsDigest(d.bytes()), d);
  EXPECT_NE(InputsDigest(d.bytes().substr(0, 31)), d) << "a prefix is another digest";
  EXPECT_TRUE(InputsDigest().empty());
  EXPECT_TRUE(InputsDigest("").empty());
  EXPECT_EQ(InputsDigest(), InputsDigest(""));
  EXPECT_FALSE(InputsDigest(std::string_view("\0", 1)).empty()) << "a zero byte is a byte";
  // Longer than a SHA-256 is a programming error: never compared truncated.
  EXPECT_DEATH(InputsDigest(std::string(InputsDigest::kMaxBytes + 1, 'x')),
               "Digest: 33 bytes, more than a SHA-256's 32");
}

TEST(VolumeInputsTest, ObjectVersionNamesTheObjectAndItsResourceVersionOnly) {
  const kube::ObjectRef cm{kube::ObjectKind::kConfigMap, "shop", "app"};
  const kube::ObjectRef sec{kube::ObjectKind::kSecret, "shop", "tls"};
  auto with_rv = std::make_shared<kube::ConfigMap>();
  with_rv->metadata.resource_version = "42";
  with_rv->data["k"] = "v";
  EXPECT_EQ(ObjectVersion(cm, cache::ObjectRevision{with_rv, nullptr, "digest"}),
            "configmap/shop/app@42");
  auto secret = std::make_shared<kube::Secret>();  // a manifest file's: no resourceVersion
  EXPECT_EQ(ObjectVersion(sec, cache::ObjectRevision{nullptr, secret, "SECRET-DIGEST"}),
            "secret/shop/tls");
  EXPECT_EQ(ObjectVersion(sec, cache::ObjectRevision{}), "secret/shop/tls@absent");
  EXPECT_EQ(ObjectVersion(cm, base::Status::Error("forbidden")), "configmap/shop/app@absent");
}

}  // namespace
}  // namespace volumemanager
