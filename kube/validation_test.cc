#include "kube/validation.h"

#include <gtest/gtest.h>

#include <string>

#include "kube/defaults.h"
#include "kube/object_decoder.h"

namespace kube {
namespace {

using nlohmann::json;

Pod PodWithVolumes(const std::string& volumes_json) {
  auto pod = DecodePod(
      json::parse(R"({"metadata":{"name":"web-0"},"spec":{"volumes":)" + volumes_json + "}}"));
  EXPECT_TRUE(pod.ok()) << pod.status().message();
  ApplyDefaults(&*pod);
  return *pod;
}

TEST(ValidationTest, ConfigKeys) {
  const struct {
    const char* key;
    bool valid;
  } cases[] = {
      {"app.properties", true}, {"KEY_NAME", true}, {"key-name", true}, {".dotfile", true},
      {"a..b", true},           {"", false},        {".", false},       {"..", false},
      {"..data", false},        {"a/b", false},     {"a b", false},     {"ключ", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    EXPECT_EQ(ValidateConfigKey(c.key).empty(), c.valid);
  }
  EXPECT_FALSE(ValidateConfigKey(std::string(254, 'a')).empty());
  EXPECT_TRUE(ValidateConfigKey(std::string(253, 'a')).empty());
}

TEST(ValidationTest, LocalPaths) {
  const struct {
    const char* path;
    const char* first_error;  // nullptr when valid
  } cases[] = {
      {"i/am/well/behaved.txt", nullptr},
      {"foo////bar", nullptr},
      {"./bar", nullptr},
      {"a/..b", nullptr},
      {".dotfile", nullptr},
      {"/dev/null", "must be a relative path"},
      {"..", "must not contain '..'"},
      {"hello/../etc/somethingbad", "must not contain '..'"},
      {"..sneaky.txt", "must not start with '..'"},
      {"...", "must not start with '..'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    auto errs = ValidateLocalPath(c.path);
    if (c.first_error == nullptr) {
      EXPECT_TRUE(errs.empty());
    } else {
      ASSERT_FALSE(errs.empty());
      EXPECT_EQ(errs[0], c.first_error);
    }
  }
}

TEST(ValidationTest, PodVolumes) {
  const struct {
    const char* name;
    const char* volumes;
    const char* error;  // nullptr when valid
  } cases[] = {
      {"valid_configmap",
       R"([{"name":"cfg","configMap":{"name":"c","items":[{"key":"k","path":"a/b"}]}}])", nullptr},
      {"item_path_dotdot",
       R"([{"name":"cfg","configMap":{"name":"c","items":[{"key":"k","path":"../x"}]}}])",
       "pods/web-0: spec.volumes[0].configMap.items[0].path: Invalid value: \"../x\": must not "
       "contain '..'"},
      {"item_path_absolute",
       R"([{"name":"cfg","secret":{"secretName":"s","items":[{"key":"k","path":"/etc/x"}]}}])",
       "pods/web-0: spec.volumes[0].secret.items[0].path: Invalid value: \"/etc/x\": must be a "
       "relative path"},
      {"item_key_missing", R"([{"name":"cfg","configMap":{"name":"c","items":[{"path":"p"}]}}])",
       "pods/web-0: spec.volumes[0].configMap.items[0].key: Required value"},
      {"mode_too_big", R"([{"name":"cfg","configMap":{"name":"c","defaultMode":512}}])",
       "pods/web-0: spec.volumes[0].configMap.defaultMode: Invalid value: 512: must be a number "
       "between 0 and 0777 (octal), both inclusive"},
      {"negative_item_mode",
       R"([{"name":"cfg","configMap":{"name":"c","items":[{"key":"k","path":"p","mode":-1}]}}])",
       "pods/web-0: spec.volumes[0].configMap.items[0].mode: Invalid value: -1: must be a number"},
      {"configmap_name_missing", R"([{"name":"cfg","configMap":{}}])",
       "pods/web-0: spec.volumes[0].configMap.name: Required value"},
      {"secret_name_missing", R"([{"name":"cfg","secret":{}}])",
       "pods/web-0: spec.volumes[0].secret.secretName: Required value"},
      {"volume_name_invalid", R"([{"name":"Cfg","emptyDir":{}}])",
       "pods/web-0: spec.volumes[0].name: Invalid value: \"Cfg\": a lowercase RFC 1123 label"},
      {"volume_name_duplicate", R"([{"name":"a"},{"name":"a"}])",
       "pods/web-0: spec.volumes[1].name: Duplicate value: \"a\""},
      {"downward_path_reserved",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"..data","fieldRef":{"fieldPath":"metadata.name"}}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0].path: Invalid value: \"..data\": must not "
       "start with '..'"},
      {"downward_unsupported_field",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"p","fieldRef":{"fieldPath":"spec.nodeName"}}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: "
       "\"spec.nodeName\""},
      {"downward_bad_subscript",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"p","fieldRef":{"fieldPath":"metadata.labels['-x']"}}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Invalid value"},
      {"downward_valid_subscript",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"p","fieldRef":{"fieldPath":"metadata.annotations['example.com/Key']"}}]}}])",
       nullptr},
      {"downward_neither", R"([{"name":"d","downwardAPI":{"items":[{"path":"p"}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0]: Required value: one of fieldRef and "
       "resourceFieldRef is required"},
      {"resource_no_container",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"p","resourceFieldRef":{"resource":"limits.cpu"}}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: Required "
       "value"},
      {"resource_bad_divisor",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"p","resourceFieldRef":{"containerName":"c","resource":"limits.cpu","divisor":"1Mi"}}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor: Invalid value: "
       "\"1Mi\": only divisor's values 1m and 1"},
      {"resource_unknown",
       R"([{"name":"d","downwardAPI":{"items":[{"path":"p","resourceFieldRef":{"containerName":"c","resource":"limits.gpu"}}]}}])",
       "pods/web-0: spec.volumes[0].downwardAPI.items[0].resourceFieldRef.resource: Unsupported "
       "value: \"limits.gpu\""},
      {"projected_duplicate_paths",
       R"([{"name":"p","projected":{"sources":[{"configMap":{"name":"a","items":[{"key":"k","path":"x"}]}},{"secret":{"name":"b","items":[{"key":"k","path":"x"}]}}]}}])",
       "pods/web-0: spec.volumes[0].projected.sources[1].secret.items[0].path: Invalid value: "
       "\"x\": conflicting duplicate paths"},
      {"projected_empty_source", R"([{"name":"p","projected":{"sources":[{}]}}])",
       "pods/web-0: spec.volumes[0].projected.sources[0]: Required value: must specify exactly one "
       "projection source"},
      {"token_too_short",
       R"([{"name":"p","projected":{"sources":[{"serviceAccountToken":{"path":"t","expirationSeconds":60}}]}}])",
       "pods/web-0: spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: "
       "Invalid value: 60: may not specify a duration less than 10 minutes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    base::Status s = Validate(PodWithVolumes(c.volumes));
    if (c.error == nullptr) {
      EXPECT_TRUE(s.ok()) << s.message();
    } else {
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.message().rfind(c.error, 0), 0u) << s.message();
    }
  }
}

TEST(ValidationTest, ReportsEveryFailureAndMountsOfMissingVolumes) {
  auto pod = DecodePod(json::parse(
      R"({"metadata":{"name":"Web"},"spec":{"containers":[{"name":"c","volumeMounts":[{"name":"gone","mountPath":"/x"}]}]}})"));
  ASSERT_TRUE(pod.ok());
  base::Status s = Validate(*pod);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metadata.name: Invalid value: \"Web\""), std::string::npos);
  EXPECT_NE(s.message().find("; spec.containers[0].volumeMounts[0].name: Not found: \"gone\""),
            std::string::npos)
      << s.message();
}

TEST(ValidationTest, SubPathAndSubPathExprDescendOnlyAndExcludeEachOther) {
  struct Case {
    const char* name;
    const char* mount;  // the volumeMount's JSON fields beside name and mountPath
    const char* error;  // null: valid
  } cases[] = {
      {"plain subPath", R"("subPath":"conf/app.yaml")", nullptr},
      {"subPath through ..data", R"("subPath":"..data/app.yaml")", nullptr},
      {"subPathExpr", R"x("subPathExpr":"$(POD_NAME)")x", nullptr},
      {"absolute subPath", R"("subPath":"/etc/passwd")",
       "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"/etc/passwd\": must be a "
       "relative path"},
      {"subPath climbing", R"("subPath":"a/../../x")",
       "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"a/../../x\": must not "
       "contain '..'"},
      {"subPathExpr climbing", R"("subPathExpr":"..")",
       "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"..\": must not contain "
       "'..'"},
      {"both", R"("subPath":"a","subPathExpr":"b")",
       "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"b\": subPathExpr and "
       "subPath are mutually exclusive"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto pod = DecodePod(json::parse(
        std::string(R"({"metadata":{"name":"web"},"spec":{"volumes":[{"name":"cfg","configMap":)"
                    R"({"name":"c"}}],"containers":[{"name":"c","volumeMounts":[{"name":"cfg",)"
                    R"("mountPath":"/x",)") +
        c.mount + "}]}]}}"));
    ASSERT_TRUE(pod.ok()) << pod.status().message();
    base::Status s = Validate(*pod);
    if (c.error == nullptr) {
      EXPECT_TRUE(s.ok()) << s.message();
    } else {
      EXPECT_NE(s.message().find(c.error), std::string::npos) << s.message();
    }
  }
}

TEST(ValidationTest, ConfigMapAndSecretData) {
  ConfigMap cm;
  cm.metadata.name = "c";
  cm.data["a"] = "x";
  cm.binary_data["a"] = "y";
  EXPECT_EQ(Validate(cm).message(),
            "configmaps/c: data[a]: Invalid value: \"a\": duplicate of key present in binaryData");
  cm.binary_data.clear();
  cm.data["a"] = std::string(kMaxObjectDataBytes, 'x');
  EXPECT_TRUE(Validate(cm).ok());
  cm.data["b"] = "x";
  EXPECT_EQ(Validate(cm).message(),
            "configmaps/c: data: Too long: must have at most 1048576 bytes");

  Secret secret;
  secret.metadata.name = "s";
  secret.data["bad key"] = "hidden-value";
  base::Status s = Validate(secret);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("secrets/s: data[bad key]: Invalid value: \"bad key\": a valid "
                              "config key must consist of alphanumeric characters",
                              0),
            0u);
  EXPECT_EQ(s.message().find("hidden-value"), std::string::npos);
}

// A NUL byte in anything that becomes a file name: "a/..\0x" has no ".." element, but every
// system call cuts it to "a/..". Refused with the field named and the value quoted with \x00.
TEST(ValidationTest, NulBytesInNamesKeysAndPaths) {
  const std::string attack = R"(a/..\u0000x/..\u0000x/..\u0000x/PWNED)";
  const std::string shown = R"("a/..\x00x/..\x00x/..\x00x/PWNED": must not contain a NUL byte)";
  const struct {
    const char* name;
    std::string volumes;
    std::string field;
  } cases[] = {
      {"configmap_item_path",
       R"([{"name":"cfg","configMap":{"name":"c","items":[{"key":"k","path":")" + attack +
           R"("}]}}])",
       "spec.volumes[0].configMap.items[0].path"},
      {"secret_item_path",
       R"([{"name":"s","secret":{"secretName":"s","defaultMode":493,"items":[{"key":"k","path":")" +
           attack + R"("}]}}])",
       "spec.volumes[0].secret.items[0].path"},
      {"downward_item_path",
       R"([{"name":"d","downwardAPI":{"items":[{"path":")" + attack +
           R"(","fieldRef":{"fieldPath":"metadata.name"}}]}}])",
       "spec.volumes[0].downwardAPI.items[0].path"},
      {"projected_configmap_item_path",
       R"([{"name":"p","projected":{"sources":[{"configMap":{"name":"a","items":[{"key":"k","path":")" +
           attack + R"("}]}}]}}])",
       "spec.volumes[0].projected.sources[0].configMap.items[0].path"},
      {"projected_secret_item_path",
       R"([{"name":"p","projected":{"sources":[{"secret":{"name":"a","items":[{"key":"k","path":")" +
           attack + R"("}]}}]}}])",
       "spec.volumes[0].projected.sources[0].secret.items[0].path"},
      {"projected_downward_item_path",
       R"([{"name":"p","projected":{"sources":[{"downwardAPI":{"items":[{"path":")" + attack +
           R"(","fieldRef":{"fieldPath":"metadata.name"}}]}}]}}])",
       "spec.volumes[0].projected.sources[0].downwardAPI.items[0].path"},
      {"projected_token_path",
       R"([{"name":"p","projected":{"sources":[{"serviceAccountToken":{"path":")" + attack +
           R"("}}]}}])",
       "spec.volumes[0].projected.sources[0].serviceAccountToken.path"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    base::Status s = Validate(PodWithVolumes(c.volumes));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.field + ": Invalid value: " + shown), std::string::npos)
        << s.message();
    EXPECT_EQ(s.message().rfind("pods/web-0: ", 0), 0u);
    EXPECT_EQ(s.message().find('\0'), std::string::npos) << "a raw NUL in the message";
  }

  base::Status key = Validate(PodWithVolumes(
      R"([{"name":"cfg","configMap":{"name":"c","items":[{"key":"k\u0000x","path":"p"}]}}])"));
  EXPECT_NE(key.message().find(
                R"(spec.volumes[0].configMap.items[0].key: Invalid value: "k\x00x": must not )"
                R"(contain a NUL byte)"),
            std::string::npos)
      << key.message();
  base::Status name = Validate(PodWithVolumes(R"([{"name":"v\u0000x","emptyDir":{}}])"));
  EXPECT_NE(name.message().find(
                R"(spec.volumes[0].name: Invalid value: "v\x00x": must not contain a NUL byte)"),
            std::string::npos)
      << name.message();
  auto uid = DecodePod(json::parse(R"({"metadata":{"name":"web-0","uid":"..\u0000x"}})"));
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(Validate(*uid).message(),
            R"(pods/web-0: metadata.uid: Invalid value: "..\x00x": must not contain a NUL byte)");

  EXPECT_EQ(ValidateLocalPath(std::string("a/..\0x", 6)).at(0), "must not contain a NUL byte");
  EXPECT_EQ(ValidateConfigKey(std::string("k\0", 2)).at(0), "must not contain a NUL byte");
  ConfigMap cm;
  cm.metadata.name = "c";
  cm.data[std::string("..\0x", 4)] = "v";
  base::Status data = Validate(cm);
  EXPECT_EQ(data.message().rfind(
                R"(configmaps/c: data[..\x00x]: Invalid value: "..\x00x": must not contain a )"
                R"(NUL byte)",
                0),
            0u)
      << data.message();
  EXPECT_EQ(data.message().find('\0'), std::string::npos);
  Secret secret;
  secret.metadata.name = "s";
  secret.data[std::string("tls\0.key", 8)] = "hidden-value";
  base::Status sec = Validate(secret);
  EXPECT_EQ(sec.message().rfind(R"(secrets/s: data[tls\x00.key]: Invalid value: "tls\x00.key")", 0),
            0u)
      << sec.message();
  EXPECT_EQ(sec.message().find("hidden-value"), std::string::npos);
}

TEST(ValidationTest, ConfigMapDataIsUtf8) {
  ConfigMap cm;
  cm.metadata.name = "c";
  cm.data["ok"] = "plain, \xc3\xa9t\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x99\x82";
  EXPECT_TRUE(Validate(cm).ok()) << Validate(cm).message();
  for (const char* bad :
       {"\xff\xfe", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\xe2\x82"}) {
    cm.data["k"] = bad;
    EXPECT_EQ(Validate(cm).message(),
              "configmaps/c: data[k]: Invalid value: must be valid UTF-8 (binaryData holds bytes)")
        << bad;
  }
  cm.data.erase("k");
  cm.binary_data["b"] = "\xff\xfe";  // bytes
  EXPECT_TRUE(Validate(cm).ok());
}

TEST(ValidationTest, LabelsAndAnnotations) {
  ConfigMap cm;
  cm.metadata.name = "c";
  cm.metadata.labels = {{"app", "web"}, {"example.com/tier", ""}, {"v", "1.2_b-3"}};
  cm.metadata.annotations = {{"Example.com/Note", "any value at all: !"}};
  EXPECT_TRUE(Validate(cm).ok()) << Validate(cm).message();

  cm.metadata.labels = {{"bad key!", "x"}};
  EXPECT_EQ(Validate(cm).message().rfind(
                "configmaps/c: metadata.labels: Invalid value: \"bad key!\": name part must", 0),
            0u)
      << Validate(cm).message();
  cm.metadata.labels = {{"app", "-x"}};
  EXPECT_EQ(Validate(cm).message().rfind(
                "configmaps/c: metadata.labels: Invalid value: \"-x\": a valid label must", 0),
            0u)
      << Validate(cm).message();
  cm.metadata.labels = {{"app", std::string(64, 'a')}};
  EXPECT_FALSE(Validate(cm).ok());
  cm.metadata.labels.clear();

  cm.metadata.annotations = {{"/no-name", "x"}};
  EXPECT_NE(Validate(cm).message().find("metadata.annotations: Invalid value: \"/no-name\""),
            std::string::npos)
      << Validate(cm).message();
  cm.metadata.annotations = {{"big", std::string(256 * 1024, 'x')}};
  EXPECT_EQ(Validate(cm).message(),
            "configmaps/c: metadata.annotations: Too long: must have at most 262144 bytes");
}

}  // namespace
}  // namespace kube
