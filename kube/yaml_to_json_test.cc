#include "kube/yaml_to_json.h"

#include <gtest/gtest.h>

#include <string>

namespace kube {
namespace {

using nlohmann::json;

TEST(YamlToJsonTest, ResolvesPlainScalarsAsGoYamlV2) {
  const struct {
    const char* name;
    const char* yaml;
    json expected;
  } cases[] = {
      {"octal_mode", "v: 0644", 420},
      {"explicit_octal", "v: 0o400", 256},
      {"decimal", "v: 420", 420},
      {"hex", "v: 0x1F", 31},
      {"binary", "v: 0b101", 5},
      {"underscores", "v: 1_000", 1000},
      {"negative", "v: -3", -3},
      {"float", "v: 1.5", 1.5},
      {"integral_float", "v: 2.0", 2},
      {"bad_octal_is_float", "v: 08", 8},
      {"yes", "v: yes", true},
      {"on", "v: On", true},
      {"off", "v: off", false},
      {"true", "v: TRUE", true},
      {"tilde", "v: ~", nullptr},
      {"null", "v: null", nullptr},
      {"empty", "v:", nullptr},
      {"quoted_number", "v: \"0644\"", "0644"},
      {"single_quoted_bool", "v: 'yes'", "yes"},
      {"str_tag", "v: !!str 12", "12"},
      {"plain_string", "v: hello world", "hello world"},
      {"version_like", "v: 1.2.3", "1.2.3"},
      {"block_literal", "v: |\n  a\n  b\n", "a\nb\n"},
      {"folded_strip", "v: >-\n  a\n  b\n", "a b"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = YamlToJson(c.yaml);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0]["v"], c.expected) << (*r)[0].dump();
  }
}

TEST(YamlToJsonTest, MultiDocumentStreamsSkipEmptyDocuments) {
  auto r = YamlToJson("---\na: 1\n---\n---\nb: [x, {c: d}]\n...\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0], json::parse(R"({"a":1})"));
  EXPECT_EQ((*r)[1], json::parse(R"({"b":["x",{"c":"d"}]})"));
}

TEST(YamlToJsonTest, MergeKeysAndAnchors) {
  auto r = YamlToJson("base: &b {x: 1, y: 2}\nobj:\n  <<: *b\n  y: 3\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0]["obj"], json::parse(R"({"x":1,"y":3})"));
}

// A key given twice in one mapping, at any level, is refused as the API server's strict decoding
// refuses it (a lax decoder keeps the last); the error names the key and its line. Merge keys and
// the same key in different mappings are no repeat.
TEST(YamlToJsonTest, DuplicateMappingKeysAreRefused) {
  const struct {
    const char* name;
    const char* yaml;
    const char* error;  // "" when accepted
  } cases[] = {
      {"top level", "a: 1\nb: 2\na: 3\n", "line 3, column 1: duplicate mapping key \"a\""},
      {"nested", "metadata:\n  name: x\n  labels: {k: v}\n  name: y\n",
       "line 4, column 3: duplicate mapping key \"name\""},
      {"in a flow mapping", "data: {k: 1, k: 2}\n", "duplicate mapping key \"k\""},
      {"in a list item", "items:\n- {a: 1}\n- a: 1\n  a: 2\n",
       "line 4, column 3: duplicate mapping key \"a\""},
      {"quoted and plain spellings", "\"a\": 1\na: 2\n", "duplicate mapping key \"a\""},
      {"alias as the repeated key", "x: &k a\nm:\n  a: 1\n  *k : 2\n",
       "duplicate mapping key \"a\""},
      {"in a second document", "a: 1\n---\nb: 1\nb: 2\n", "line 4, column 1: duplicate"},
      {"same key in sibling mappings", "a: {k: 1}\nb: {k: 2}\n", ""},
      {"merge key and an own key", "base: &b {x: 1}\nobj:\n  <<: *b\n  x: 2\n", ""},
      {"same key in separate documents", "a: 1\n---\na: 2\n", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = YamlToJson(c.yaml);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(r.ok()) << r.status().message();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().message();
  }
}

TEST(YamlToJsonTest, HostileInputFailsCleanly) {
  std::string deep_flow(100000, '[');
  std::string deep_block;
  for (int i = 0; i < 3000; ++i) deep_block += std::string(static_cast<size_t>(i), ' ') + "a:\n";
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'k'; ++c) {
    laughs += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) laughs += std::string(i ? ", *" : "*") + static_cast<char>(c - 1);
    laughs += "]\n";
  }
  const struct {
    const char* name;
    std::string yaml;
    const char* error;
  } cases[] = {
      {"unclosed_flow", "a: [1, 2", "invalid YAML"},
      {"bad_indent", "a:\n  b: 1\n c: 2\n", "invalid YAML: line 3"},
      {"tab_indent", "a:\n\tb: 1\n", "invalid YAML"},
      {"deep_flow_nesting", deep_flow, "invalid YAML"},
      {"deep_block_nesting", deep_block, "invalid YAML"},
      {"billion_laughs", laughs, "after alias expansion"},
      {"undefined_alias", "a: *nope\n", "invalid YAML"},
      {"complex_key", "? [a, b]\n: c\n", "mapping keys must be strings"},
      {"infinity", "a: .inf\n", "infinity"},
      // yaml-cpp 0.7 alone loops forever on these (found by the fuzzer).
      {"stray_comma", ",{\"a\":1}", "invalid YAML: line 1, column 1: unexpected token"},
      {"stray_comma_later_document", "a: 1\n---\n, x\n", "invalid YAML: line 3"},
      {"recursive_alias", "a: &x [1, *x]\n", "alias to a node that is not complete"},
      // Strings that are not UTF-8 have no JSON form; go-yaml refuses them (found by the fuzzer:
      // nlohmann's dump threw on the converted document).
      {"raw_byte_in_key", "base: &b {x\xff\xff: 1}\n", "line 1, column 11: invalid UTF-8"},
      {"raw_byte_in_value", "data: {k: \"v\xc3\"}\n", "invalid UTF-8 in a scalar"},
      {"surrogate_escape", "a: \"\\ud800\"\n", "line 1, column 11: invalid unicode"},  // yaml-cpp's
      {"overlong_slash", "a: \xc0\xaf\n", "invalid UTF-8 in a scalar"},
      // Characters outside YAML's printable set; go-yaml refuses the stream, yaml-cpp passed
      // them into keys and values (found by the fuzzer: a merge key between such bytes did not
      // survive a round trip).
      {"c0_control",
       "a: b\x01"
       "c\n",
       "line 1, column 5: control characters are not allowed (U+0001)"},
      {"c0_in_comment", "a: 1\n# x\x16\n", "line 2, column 4: control characters"},
      {"del", "a: \x7f\n", "(U+007F)"},
      {"c1_control", "a: \xc2\x80\n",
       "line 1, column 4: control characters are not allowed (U+0080)"},
      {"noncharacter", "a: \xef\xbf\xbf\n", "(U+FFFF)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = YamlToJson(c.yaml);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().message();
  }
}

TEST(YamlToJsonTest, PrintableCharactersOutsideAsciiAndWhitespaceAreAccepted) {
  // Tab, CR LF line ends, NEL, a BOM and characters above the BMP are YAML text.
  auto r = YamlToJson(
      "\xef\xbb\xbf"
      "a: \"x\ty\"\r\nb: \"n\xc2\x85\xf0\x9f\x99\x82\"\r\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0]["a"], "x\ty");
  EXPECT_EQ((*r)[0]["b"], "n\xc2\x85\xf0\x9f\x99\x82");
}

TEST(YamlToJsonTest, AliasesAsKeysAndValues) {
  auto r = YamlToJson("k: &k name\nv: &v {a: [1, 2]}\nuse:\n  *k : *v\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0]["use"], json::parse(R"({"name":{"a":[1,2]}})"));
}

TEST(YamlToJsonTest, JsonNestingDepthIgnoresStrings) {
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":"[[[["}]})"), 3);
  EXPECT_EQ(JsonNestingDepth(R"("\"[")"), 0);
  EXPECT_EQ(JsonNestingDepth(std::string(1000, '[')), 1000);
}

}  // namespace
}  // namespace kube
