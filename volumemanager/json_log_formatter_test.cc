#include "volumemanager/json_log_formatter.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

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

}  // namespace
}  // namespace volumemanager
