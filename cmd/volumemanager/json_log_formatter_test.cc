#include "cmd/volumemanager/json_log_formatter.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "logging/structured_log.h"

namespace volumemanager {
namespace {

TEST(JsonLogFormatterTest, EveryLineIsAJsonObject) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("t", sink);
  logger.set_formatter(std::make_unique<JsonLogFormatter>());
  logger.warn("FailedMount: volume \"cfg\" of pod \"default/web\": {}", "tab\there\nnewline");
  logger.info("{}", std::string("bad utf8 \xff end"));
  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> parsed;
  while (std::getline(lines, line)) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0]["level"], "warning");
  EXPECT_EQ(parsed[0]["msg"],
            "FailedMount: volume \"cfg\" of pod \"default/web\": tab\there\nnewline");
  EXPECT_EQ(parsed[1]["level"], "info");
  const std::string ts = parsed[0]["ts"];
  EXPECT_EQ(ts.size(), std::string("2026-11-21T08:00:00.000000Z").size());
  EXPECT_EQ(ts.back(), 'Z');
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out.push_back(line);
  return out;
}

struct Meta {
  std::string namespace_;
  std::string name;
};

TEST(JsonLogFormatterTest, StructuredLinesGiveEachKeyItsOwnField) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("t", sink);
  logger->set_formatter(std::make_unique<JsonLogFormatter>());
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  const Meta pod{"shop", "web-0"};
  const std::string err = std::string("configmap \"app\" not found\nsecond line \xff\x01 end");
  logging::Warn("MountVolume.SetUp failed", {{"pod", logging::KObj(pod)},
                                             {"podUID", "u-1"},
                                             {"volume", "cfg"},
                                             {"object", logging::KRef("configmap", "shop", "app")},
                                             {"err", err},
                                             {"retryInMs", 500},
                                             {"delta", -3},
                                             {"first", true}});
  logging::Info("quoted \"message\"\twith a tab", {});
  spdlog::set_default_logger(previous);

  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(lines[0]);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["msg"], "MountVolume.SetUp failed");
  EXPECT_EQ(j["pod"], "shop/web-0");
  EXPECT_EQ(j["podUID"], "u-1");
  EXPECT_EQ(j["volume"], "cfg");
  EXPECT_EQ(j["object"], "configmap/shop/app");
  // Quotes, newline and control characters come back as they were; invalid UTF-8 is U+FFFD.
  EXPECT_EQ(j["err"], "configmap \"app\" not found\nsecond line \xef\xbf\xbd\x01 end");
  EXPECT_TRUE(j["retryInMs"].is_number_integer());
  EXPECT_EQ(j["retryInMs"], 500);
  EXPECT_EQ(j["delta"], -3);
  EXPECT_EQ(j["first"], true);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"ts", "level", "msg", "pod", "podUID", "volume",
                                            "object", "err", "retryInMs", "delta", "first"}));
  const nlohmann::json k = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(k["msg"], "quoted \"message\"\twith a tab");
  EXPECT_EQ(k.size(), 3u);
}

TEST(JsonLogFormatterTest, TextThatOnlyLooksStructuredStaysTheMessage) {
  std::ostringstream out;
  spdlog::logger logger("t", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger.set_formatter(std::make_unique<JsonLogFormatter>());
  logger.info("{}", "\"prose\" and then pod=web");
  logger.info("{}", "\"m\" msg=\"would replace the message\"");
  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["msg"], "\"prose\" and then pod=web");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["msg"], "\"m\" msg=\"would replace the message\"");
  EXPECT_FALSE(nlohmann::json::parse(lines[0]).contains("pod"));
}

// Lines of every kind: each value type, repeated and absent keys, escapes, invalid UTF-8, plain
// lines (some that look like the text form).
void EmitReferenceLines() {
  const Meta pod{"shop", "web-0"};
  const std::string err = std::string("configmap \"app\" not found\nsecond line \xff\x01 end");
  logging::Warn("MountVolume.SetUp failed", {{"pod", logging::KObj(pod)},
                                             {"podUID", "u-1"},
                                             {"volume", "cfg"},
                                             {"object", logging::KRef("ConfigMap", "shop", "App")},
                                             {"err", err},
                                             {"status", base::Status::Error("bad\tthing")},
                                             {"retryInMs", 500},
                                             {"delta", -3},
                                             {"first", true},
                                             {"again", false}});
  logging::Info("quoted \"message\"\twith a tab", {});
  logging::Info("", {});
  logging::Error("repeated", {{"volume", "a"}, {"n", 1}, {"volume", "b"}, {"n", "two"}});
  logging::Debug("absent and paths", {{"pod", logging::Value::IfSet("")},
                                      {"node", logging::KRef("node", "", "n1")},
                                      {"empty", logging::KObj("", "")},
                                      {"gone", logging::Value::Absent()},
                                      {"dir", logging::Value::IfSet("/d")}});
  logging::Info("numbers", {{"min", std::numeric_limits<int64_t>::min()},
                            {"max", std::numeric_limits<int64_t>::max()},
                            {"umax", std::numeric_limits<uint64_t>::max()},
                            {"zero", 0},
                            {"uzero", size_t{0}},
                            {"small", int8_t{-128}},
                            {"text42", "42"},
                            {"textTrue", "true"},
                            {"textNeg", "-1"}});
  const std::string tricky[] = {
      "plain",
      "with \"quotes\" and \\ backslash",
      "line one\nline two\r\n\ttabbed",
      std::string("nul \0 and \x01 \x7f", 14),
      "invalid \xff\xc3 utf-8",
      "looks like fields\" key=\"x\" n=1",
      "caf\xc3\xa9 \xe2\x80\xa8 \xc2\x85 \xf3\xa0\x80\x81 \xf0\x9f\x98\x80",
      "\xed\xa0\x80 \xc0\xaf x\xe2\x82",
      "\xef\xbb\xbf bom \x1b[31m escape",
  };
  for (const std::string& v : tricky) logging::Warn(v, {{"value", v}, {"n", 42}});
  spdlog::info("plain {} line", "spdlog");
  spdlog::warn("{}", "\"prose\" and then pod=web");
  spdlog::error("{}", "\"m\" msg=\"would replace the message\"");
  spdlog::info("{}", std::string("bad utf8 \xff end\ttab"));
}

// A logger with the JSON formatter as spdlog's default logger while it lives.
class JsonDefaultLogger {
 public:
  JsonDefaultLogger() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "t", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    logger->set_formatter(std::make_unique<JsonLogFormatter>());
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~JsonDefaultLogger() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Every line byte for byte but its time: the reference is what this formatter wrote when it
// parsed the text form back (logging::ParseStructuredLine, before the fields came from the
// record itself); the record must give exactly the same JSON.
TEST(JsonLogFormatterTest, OutputIsByteForByteTheReference) {
  JsonDefaultLogger json;
  EmitReferenceLines();
  std::vector<std::string> lines = Lines(json.text());
  for (std::string& line : lines) {
    ASSERT_EQ(line.substr(0, 7), R"({"ts":")") << line;
    ASSERT_EQ(line.substr(33, 2), R"(Z")") << line;  // 2026-11-30T13:19:47.564632Z
    line.replace(7, 27, "TS");
  }
  const std::vector<std::string> expected = {
      R"({"ts":"TS","level":"warning","msg":"MountVolume.SetUp failed","pod":"shop/web-0",)"
      R"("podUID":"u-1","volume":"cfg","object":"configmap/shop/App",)"
      R"("err":"configmap \"app\" not found\nsecond line )"
      "\xef\xbf\xbd"
      R"(\u0001 end","status":"bad\tthing","retryInMs":500,"delta":-3,"first":true,)"
      R"("again":false})",
      R"({"ts":"TS","level":"info","msg":"quoted \"message\"\twith a tab"})",
      R"({"ts":"TS","level":"info","msg":""})",
      R"({"ts":"TS","level":"error","msg":"repeated","volume":"a","n":1})",
      R"({"ts":"TS","level":"debug","msg":"absent and paths","node":"node/n1","empty":"",)"
      R"("dir":"/d"})",
      R"({"ts":"TS","level":"info","msg":"numbers","min":-9223372036854775808,)"
      R"("max":9223372036854775807,"umax":18446744073709551615,"zero":0,"uzero":0,)"
      R"("small":-128,"text42":"42","textTrue":"true","textNeg":"-1"})",
      R"({"ts":"TS","level":"warning","msg":"plain","value":"plain","n":42})",
      R"({"ts":"TS","level":"warning","msg":"with \"quotes\" and \\ backslash",)"
      R"("value":"with \"quotes\" and \\ backslash","n":42})",
      R"({"ts":"TS","level":"warning","msg":"line one\nline two\r\n\ttabbed",)"
      R"("value":"line one\nline two\r\n\ttabbed","n":42})",
      R"({"ts":"TS","level":"warning","msg":"nul \u0000 and \u0001 )"
      "\x7f"
      R"(\u0000","value":"nul \u0000 and \u0001 )"
      "\x7f"
      R"(\u0000","n":42})",
      R"({"ts":"TS","level":"warning","msg":"invalid )"
      "\xef\xbf\xbd\xef\xbf\xbd"
      R"( utf-8","value":"invalid )"
      "\xef\xbf\xbd\xef\xbf\xbd"
      R"( utf-8","n":42})",
      R"({"ts":"TS","level":"warning","msg":"looks like fields\" key=\"x\" n=1",)"
      R"("value":"looks like fields\" key=\"x\" n=1","n":42})",
      R"({"ts":"TS","level":"warning","msg":"caf)"
      "\xc3\xa9"
      R"( )"
      "\xe2\x80\xa8"
      R"( )"
      "\xc2\x85"
      R"( )"
      "\xf3\xa0\x80\x81"
      R"( )"
      "\xf0\x9f\x98\x80"
      R"(","value":"caf)"
      "\xc3\xa9"
      R"( )"
      "\xe2\x80\xa8"
      R"( )"
      "\xc2\x85"
      R"( )"
      "\xf3\xa0\x80\x81"
      R"( )"
      "\xf0\x9f\x98\x80"
      R"(","n":42})",
      R"({"ts":"TS","level":"warning","msg":")"
      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
      R"( )"
      "\xef\xbf\xbd\xef\xbf\xbd"
      R"( x)"
      "\xef\xbf\xbd"
      R"(","value":")"
      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
      R"( )"
      "\xef\xbf\xbd\xef\xbf\xbd"
      R"( x)"
      "\xef\xbf\xbd"
      R"(","n":42})",
      R"({"ts":"TS","level":"warning","msg":")"
      "\xef\xbb\xbf"
      R"( bom \u001b[31m escape","value":")"
      "\xef\xbb\xbf"
      R"( bom \u001b[31m escape","n":42})",
      R"({"ts":"TS","level":"info","msg":"plain spdlog line"})",
      R"({"ts":"TS","level":"warning","msg":"\"prose\" and then pod=web"})",
      R"({"ts":"TS","level":"error","msg":"\"m\" msg=\"would replace the message\""})",
      R"({"ts":"TS","level":"info","msg":"bad utf8 )"
      "\xef\xbf\xbd"
      R"( end\ttab"})",
  };
  ASSERT_EQ(lines.size(), expected.size()) << json.text();
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], expected[i]) << "line " << i;
}

// The fields come from the record, never from the payload's text: klog's text form written with
// spdlog's format functions stays one message (the formatter that parsed the text back made it a
// message, a `pod` and an `n`), and the same line written by logging::Info has its fields.
TEST(JsonLogFormatterTest, TextFormWrittenAsTextIsNotParsed) {
  JsonDefaultLogger json;
  spdlog::info("{}", R"("Pod added" pod="default/web" n=3)");
  logging::Info("Pod added", {{"pod", "default/web"}, {"n", 3}});
  std::vector<std::string> lines = Lines(json.text());
  ASSERT_EQ(lines.size(), 2u) << json.text();
  for (std::string& line : lines) line.replace(7, 27, "TS");
  EXPECT_EQ(lines[0],
            R"({"ts":"TS","level":"info","msg":"\"Pod added\" pod=\"default/web\" n=3"})");
  EXPECT_EQ(lines[1], R"({"ts":"TS","level":"info","msg":"Pod added","pod":"default/web","n":3})");
}

// Threads logging at once (the loop, the pool, the admin server's threads) each write their own
// record's fields, plain lines in between staying plain.
TEST(JsonLogFormatterTest, EachThreadWritesItsOwnRecord) {
  JsonDefaultLogger json;
  constexpr int kThreads = 4;
  constexpr int kLines = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      const std::string name = "thread-" + std::to_string(t);
      for (int i = 0; i < kLines; ++i) {
        logging::Info(name, {{"thread", t}, {"name", name}, {"i", i}});
        spdlog::info("{}", R"("plain" thread=)" + std::to_string(t));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const std::vector<std::string> lines = Lines(json.text());
  ASSERT_EQ(lines.size(), size_t{2 * kThreads * kLines});
  std::vector<int> next(kThreads, 0);
  for (const std::string& line : lines) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.size() == 3) {
      EXPECT_EQ(j["msg"].get<std::string>().rfind("\"plain\" thread=", 0), 0u) << line;
      continue;
    }
    ASSERT_EQ(j.size(), 6u) << line;
    const int t = j["thread"];
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(j["msg"], "thread-" + std::to_string(t)) << line;
    EXPECT_EQ(j["name"], j["msg"]) << line;
    EXPECT_EQ(j["i"], next[t]++) << line;
  }
  EXPECT_EQ(next, std::vector<int>(kThreads, kLines));
}

}  // namespace
}  // namespace volumemanager
