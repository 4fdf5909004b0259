#include "cmd/volumemanager/json_log_formatter.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

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

}  // namespace
}  // namespace volumemanager
