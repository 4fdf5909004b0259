#include "kube/manifest_decoder.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kube {
namespace {

constexpr char kPodYaml[] = R"(apiVersion: v1
kind: Pod
metadata:
  name: web-0
spec:
  containers:
  - name: app
    resources:
      limits: {cpu: 500m, memory: 64Mi}
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
  volumes:
  - name: cfg
    configMap:
      name: app-config
      items:
      - {key: app.yaml, path: conf/app.yaml, mode: 0400}
  - name: info
    downwardAPI:
      items:
      - path: labels
        fieldRef: {fieldPath: metadata.labels}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data:
  app.yaml: |
    port: 8080
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
stringData:
  password: s3cret
)";

TEST(ManifestDecoderTest, YamlStreamIsDecodedAndDefaulted) {
  auto objects = DecodeManifest(kPodYaml, "web.yaml");
  ASSERT_TRUE(objects.ok()) << objects.status().message();
  ASSERT_EQ(objects->size(), 3u);

  const Pod& pod = std::get<Pod>((*objects)[0]);
  EXPECT_EQ(pod.metadata.namespace_, "default");
  const auto& cm = std::get<ConfigMapVolumeSource>(pod.spec.volumes[0].source);
  EXPECT_EQ(cm.default_mode, 0644);
  EXPECT_EQ(cm.items[0].mode, 0400);  // YAML 1.1 octal, as kubectl reads it
  const auto& dapi = std::get<DownwardAPIVolumeSource>(pod.spec.volumes[1].source);
  EXPECT_EQ(dapi.default_mode, 0644);
  EXPECT_EQ(dapi.items[0].field_ref->api_version, "v1");
  // Requests default to limits.
  EXPECT_EQ(pod.spec.containers[0].resources.requests.at("memory").Value(), 64 << 20);

  const ConfigMap& config = std::get<ConfigMap>((*objects)[1]);
  EXPECT_EQ(config.data.at("app.yaml"), "port: 8080\n");
  EXPECT_STREQ(KindOf((*objects)[1]), "ConfigMap");
  EXPECT_EQ(MetadataOf((*objects)[1]).namespace_, "default");

  const Secret& secret = std::get<Secret>((*objects)[2]);
  EXPECT_EQ(secret.data.at("password"), "s3cret");
  EXPECT_EQ(secret.type, "Opaque");
  EXPECT_EQ(secret.metadata.namespace_, "shop");
}

TEST(ManifestDecoderTest, JsonAndListsAreAccepted) {
  auto objects = DecodeManifest(
      R"( {"apiVersion":"v1","kind":"List","items":[
            {"kind":"ConfigMap","metadata":{"name":"a"}},
            {"kind":"SecretList","items":[]} ]})",
      "list.json");
  // A List may not nest another list.
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.status().message(),
            "list.json: items[1]: kind: Unsupported value: \"SecretList\": supported values: "
            "\"Pod\", \"ConfigMap\", \"Secret\" and their lists");

  auto typed = DecodeManifest(
      R"({"kind":"ConfigMapList","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})",
      "cms.json");
  ASSERT_TRUE(typed.ok()) << typed.status().message();
  ASSERT_EQ(typed->size(), 2u);
  EXPECT_EQ(MetadataOf((*typed)[1]).name, "b");
}

// A file that opens with '{' is one JSON value, never YAML, as for the kubelet's static pods and
// kubectl (apimachinery's yaml.ToJSON and YAMLOrJSONDecoder pass JSON-looking input to the JSON
// decoder as it is). YAML flow syntax there is invalid JSON, though a YAML reader would take it;
// behind a "---" line the same text is YAML. manifest_decoder_fuzzer's first oracle held the
// decoder to the YAML reading (RELIABILITY.md, "Fuzzing", finding 4).
TEST(ManifestDecoderTest, InputOpeningWithABraceIsJsonNotYaml) {
  const struct {
    const char* name;
    const char* input;
    const char* error;
  } cases[] = {
      {"unquoted_keys", "{kind: ConfigMap, metadata: {name: a}}", "m.json: invalid JSON at byte 2"},
      {"tab_in_string", "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"x\t\":\"\"}}",
       "m.json: invalid JSON at byte 46"},
      {"single_quotes", "\n {'kind': 'ConfigMap', 'metadata': {'name': 'a'}}",
       "m.json: invalid JSON at byte 4"},
      {"plain_scalar_key",  // reduced from the fuzzer's input
       "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",x\"y\":\"z\"w\"}}",
       "m.json: invalid JSON at byte 44"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto as_json = DecodeManifest(c.input, "m.json");
    ASSERT_FALSE(as_json.ok());
    EXPECT_EQ(as_json.status().message(), c.error);
    auto as_yaml = DecodeManifest(std::string("---\n") + c.input, "m.yaml");
    ASSERT_TRUE(as_yaml.ok()) << as_yaml.status().message();
    ASSERT_EQ(as_yaml->size(), 1u);
    EXPECT_EQ(MetadataOf((*as_yaml)[0]).name, "a");
  }
}

TEST(ManifestDecoderTest, ErrorsNameSourceDocumentObjectAndField) {
  std::string huge_value(10u << 20, 'x');
  std::string huge =
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  k: " + huge_value + "\n";
  std::string deep_json = std::string(100000, '[');
  std::string deep_object = "{\"a\":" + std::string(1000, '[') + std::string(1000, ']') + "}";
  const struct {
    const char* name;
    std::string input;
    const char* error;
  } cases[] = {
      {"wrong_type_second_document",
       "kind: ConfigMap\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: web-0}\nspec:\n"
       "  volumes:\n  - {name: a, emptyDir: {}}\n  - {name: b, emptyDir: {}}\n"
       "  - name: c\n    configMap:\n      name: x\n      items: [{key: k, path: p, mode: rw}]\n",
       "m.yaml: document 2: pods/web-0: spec.volumes[2].configMap.items[0].mode: expected integer"},
      {"malformed_json", "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"x\"",
       "m.yaml: invalid JSON at byte"},
      {"malformed_yaml", "kind: Pod\nmetadata: {name: [x}\n", "m.yaml: invalid YAML"},
      {"missing_kind", "metadata: {name: x}\n", "m.yaml: kind: Required value"},
      {"unsupported_kind", "kind: Deployment\n", "m.yaml: kind: Unsupported value: \"Deployment\""},
      {"scalar_document", "just text\n", "m.yaml: expected an object with a kind"},
      {"invalid_base64", "kind: Secret\nmetadata: {name: s}\ndata: {k: '%%%'}\n",
       "m.yaml: secrets/s: data[k]: illegal base64 data at input byte 0"},
      {"number_for_string", "kind: ConfigMap\nmetadata: {name: c}\ndata: {port: 8080}\n",
       "m.yaml: configmaps/c: data[port]: expected string"},
      {"huge_value", huge,
       "m.yaml: configmaps/big: data: Too long: must have at most 1048576 bytes"},
      {"deep_json", deep_json, "m.yaml: invalid YAML"},
      {"deep_json_object", deep_object, "m.yaml: invalid JSON: nesting deeper than 512 levels"},
      {"validation", "kind: ConfigMap\nmetadata: {name: c}\ndata: {..bad: x}\n",
       "m.yaml: configmaps/c: data[..bad]: Invalid value: \"..bad\": must not start with '..'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = DecodeManifest(c.input, "m.yaml");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind(c.error, 0), 0u) << r.status().message().substr(0, 300);
  }
}

// JSON as YAML: a key given twice in one object fails the file (the API server's strict decoding),
// naming the key; a key repeated in different objects does not.
TEST(ManifestDecoderTest, DuplicateKeysFailTheFileInJsonAndYaml) {
  const struct {
    const char* name;
    const char* bytes;
    const char* error;  // "" when accepted
  } cases[] = {
      {"json top level",
       R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"},"kind":"Secret"})",
       "m.json: invalid JSON: duplicate key \"kind\""},
      {"json nested",
       R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","name":"d"}})",
       "m.json: invalid JSON: duplicate key \"name\""},
      {"json data key",
       R"({"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"},"data":{"k":"YQ==","k":"Yg=="}})",
       "m.json: invalid JSON: duplicate key \"k\""},
      {"json same key in two objects",
       R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","labels":{"name":"x"}}})",
       ""},
      {"yaml data key",
       "kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\ndata:\n  k: a\n  k: b\n",
       "m.json: invalid YAML: line 6, column 3: duplicate mapping key \"k\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = DecodeManifest(c.bytes, "m.json");
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(r.ok()) << r.status().message();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), c.error);
    EXPECT_EQ(r.status().message().find("YQ=="), std::string::npos);
  }
}

TEST(ManifestDecoderTest, SecretValuesNeverAppearInErrors) {
  auto r = DecodeManifest(
      "kind: Secret\nmetadata: {name: s}\nstringData: {password: topsecretvalue}\n"
      "data: {other: 'topsecretvalue'}\n",
      "s.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("topsecretvalue"), std::string::npos);
  auto j = DecodeManifest(R"({"kind":"Secret","data":{"k":"topsecretvalue"} x})", "s.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().find("topsecretvalue"), std::string::npos) << j.status().message();
}

// Decodes each piece alone and concatenates: nullopt when a piece fails.
std::optional<std::pair<std::vector<ManifestObject>, YamlCost>> DecodePieces(
    const std::vector<std::string_view>& pieces) {
  std::vector<ManifestObject> objects;
  YamlCost total;
  for (std::string_view piece : pieces) {
    YamlCost cost;
    const bool followed =
        piece.data() + piece.size() != pieces.back().data() + pieces.back().size();
    auto decoded = DecodeManifestPiece(piece, followed, "m.yaml", &cost);
    if (!decoded.ok()) return std::nullopt;
    objects.insert(objects.end(), decoded->begin(), decoded->end());
    total.nodes += cost.nodes;
    total.scalar_bytes += cost.scalar_bytes;
  }
  return std::make_pair(std::move(objects), total);
}

std::string Joined(const std::vector<std::string_view>& pieces) {
  std::string all;
  for (std::string_view piece : pieces) all += piece;
  return all;
}

TEST(ManifestDecoderTest, SplitCutsBeforeEachDocumentStartOnly) {
  const std::string yaml =
      "# leading comment\n"
      "---\n"
      "a: 1\n"
      "b: |\n"
      "  --- not a marker: indented\n"
      "----\n"        // four dashes: a plain scalar line, no marker
      "---x\n"        // no blank after the dashes: no marker
      "--- {c: 2}\n"  // content on the marker's line
      "...\n"         // an end marker: the next document stays in this piece
      "d: 3\n"
      "---\r\n"  // CRLF
      "e: 4\n"
      "---\t# tab\n"
      "---";  // the end of the input ends a marker too
  const std::vector<std::string_view> pieces = SplitManifestDocuments(yaml);
  ASSERT_EQ(pieces.size(), 6u);
  EXPECT_EQ(pieces[0], "# leading comment\n");
  EXPECT_EQ(pieces[1], "---\na: 1\nb: |\n  --- not a marker: indented\n----\n---x\n");
  EXPECT_EQ(pieces[2], "--- {c: 2}\n...\nd: 3\n");
  EXPECT_EQ(pieces[3], "---\r\ne: 4\n");
  EXPECT_EQ(pieces[4], "---\t# tab\n");
  EXPECT_EQ(pieces[5], "---");
  EXPECT_EQ(Joined(pieces), yaml) << "the pieces cover the input, in order";
  // A bare marker line is not part of the document's text; a marker with content is.
  EXPECT_EQ(WithoutBareMarker(pieces[1]), "a: 1\nb: |\n  --- not a marker: indented\n----\n---x\n");
  EXPECT_EQ(WithoutBareMarker(pieces[2]), pieces[2]);
  EXPECT_EQ(WithoutBareMarker(pieces[3]), "e: 4\n");
  EXPECT_EQ(WithoutBareMarker("---\n{\"kind\": \"List\"}\n"), "---\n{\"kind\": \"List\"}\n")
      << "alone, the rest would read as JSON";
  // An empty document is a null node after a marker and nothing alone: not the same text.
  for (const char* kept : {"---\n", "---\n\n2: x\n", "---\n# c\na: 1\n", "---\n...\n"}) {
    EXPECT_EQ(WithoutBareMarker(kept), kept);
  }
  // A stream that starts with its marker has no empty first piece.
  EXPECT_EQ(SplitManifestDocuments("---\na: 1\n---\nb: 2\n").size(), 2u);
  EXPECT_EQ(SplitManifestDocuments("a: 1\n").size(), 1u);
  // Not cut: JSON, and a stream with a directive (it belongs to the document after it).
  EXPECT_TRUE(SplitManifestDocuments("  {\"kind\": \"List\"}\n---\n").empty());
  EXPECT_TRUE(SplitManifestDocuments("a: 1\n...\n%YAML 1.2\n---\nb: 2\n").empty());
}

TEST(ManifestDecoderTest, PiecesDecodeToTheWholesObjectsAndCost) {
  const std::string yaml = std::string(kPodYaml) +
                           "---\n# only a comment\n---\n"
                           "apiVersion: v1\nkind: ConfigMapList\nitems:\n"
                           "- metadata: {name: listed}\n  data: &d {k: v}\n"
                           "- metadata: {name: aliased}\n  data: *d\n"
                           "...\n"
                           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-end}\n";
  YamlCost whole_cost;
  auto whole = DecodeManifest(yaml, "m.yaml", &whole_cost);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(whole->size(), 6u);
  const std::vector<std::string_view> pieces = SplitManifestDocuments(yaml);
  EXPECT_EQ(pieces.size(), 5u);
  auto by_piece = DecodePieces(pieces);
  ASSERT_TRUE(by_piece.has_value());
  EXPECT_EQ(by_piece->first, *whole);
  EXPECT_GT(whole_cost.nodes, 0u);
  EXPECT_EQ(by_piece->second.nodes, whole_cost.nodes);
  EXPECT_EQ(by_piece->second.scalar_bytes, whole_cost.scalar_bytes);
}

TEST(ManifestDecoderTest, AQuotedScalarOpenAtACutFailsItsPieceAsTheStreamFails) {
  // A "---" line inside a quoted scalar fails the stream. Alone, the end of the input would close
  // a quote left open ("k2: \"b" is a string): the piece is read up to the next marker instead.
  for (const std::string& yaml : std::vector<std::string>{
           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: q}\ndata: {k: \"a\n---\nb\"}\n",
           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: q}\nx: \"open\n---\n"
           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r}\n"}) {
    ASSERT_FALSE(DecodeManifest(yaml, "m.yaml").ok());
    const std::vector<std::string_view> pieces = SplitManifestDocuments(yaml);
    ASSERT_EQ(pieces.size(), 2u);
    EXPECT_TRUE(DecodeManifest(pieces[0], "m.yaml").ok() || yaml.find("{k:") != std::string::npos)
        << "alone, the end of the input closes the quote";
    EXPECT_FALSE(DecodePieces(pieces).has_value()) << yaml;
  }
}

TEST(ManifestDecoderTest, CostIsCountedOverTheWholeStream) {
  // Each document alone is under the node limit; the stream is not.
  std::string list = "[";
  for (int i = 0; i < 1000; ++i) list += (i ? ",0" : "0");
  list += "]";
  std::string aliases = "[";
  for (int i = 0; i < 510; ++i) aliases += (i ? ",*l" : "*l");
  aliases += "]";
  const std::string doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\nx: &l " + list +
                          "\ny: " + aliases + "\n";
  YamlCost cost;
  ASSERT_TRUE(DecodeManifest(doc, "m.yaml", &cost).ok());
  EXPECT_GT(cost.nodes, kMaxNodes / 2);
  EXPECT_LE(cost.nodes, kMaxNodes);
  const std::string two = doc + "---\n" + doc;
  auto whole = DecodeManifest(two, "m.yaml");
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("more than 1000000 nodes"), std::string::npos)
      << whole.status().message();
  auto by_piece = DecodePieces(SplitManifestDocuments(two));
  ASSERT_TRUE(by_piece.has_value()) << "each piece alone passes: the reader must add the costs";
  EXPECT_GT(by_piece->second.nodes, kMaxNodes);
}

}  // namespace
}  // namespace kube
