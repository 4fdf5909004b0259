// CurrentRecord: how a sink's formatter gets the record of the structured line being written
// (its own file: structured_log_test.cc replaces operator new to count allocations).
#include <gtest/gtest.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "logging/structured_log.h"

namespace logging {
namespace {

// What a sink sees of each line: its payload and what CurrentRecord gives for it.
class RecordSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  struct Seen {
    std::string payload;
    bool has_record = false;
    std::string msg;
    std::vector<std::string> keys;
    bool same_text_other_buffer_has_record = false;
    bool same_record_after_inside = false;  // (the pointers are only valid inside the sink)
  };
  std::vector<Seen> seen;
  std::function<void()> inside;  // run once, while the next line is being written

 protected:
  void sink_it_(const spdlog::details::log_msg& m) override {
    const std::string_view payload(m.payload.data(), m.payload.size());
    Seen s;
    s.payload = std::string(payload);
    const Record* record = CurrentRecord(payload);
    s.has_record = record != nullptr;
    if (record != nullptr) {
      s.msg = std::string(record->msg);
      for (const Field& f : record->fields) s.keys.emplace_back(f.key.name());
    }
    s.same_text_other_buffer_has_record = CurrentRecord(s.payload) != nullptr;
    if (inside) {
      std::function<void()> f = std::move(inside);
      inside = nullptr;
      f();
    }
    s.same_record_after_inside = record != nullptr && CurrentRecord(payload) == record;
    seen.push_back(std::move(s));
  }
  void flush_() override {}
};

class RecordSinkDefaultLogger {
 public:
  RecordSinkDefaultLogger()
      : previous_(spdlog::default_logger()), sink_(std::make_shared<RecordSink>()) {
    auto logger = std::make_shared<spdlog::logger>("t", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~RecordSinkDefaultLogger() { spdlog::set_default_logger(previous_); }
  RecordSink& sink() { return *sink_; }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<RecordSink> sink_;
};

TEST(CurrentRecordTest, SinksGetTheRecordOfTheLineBeingWritten) {
  RecordSinkDefaultLogger capture;
  Info("Pod added", {{"pod", KObj("default", "web")}, {"gone", Value::Absent()}, {"n", 3}});
  spdlog::info("plain {}", "text");
  // klog's text form written as text: no record, whatever it looks like.
  spdlog::info("{}", R"("Pod added" pod="default/web" n=3)");
  EXPECT_EQ(CurrentRecord(R"("Pod added" pod="default/web" n=3)"), nullptr);

  const std::vector<RecordSink::Seen>& seen = capture.sink().seen;
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].payload, R"("Pod added" pod="default/web" n=3)");
  EXPECT_TRUE(seen[0].has_record);
  EXPECT_EQ(seen[0].msg, "Pod added");
  EXPECT_EQ(seen[0].keys, (std::vector<std::string>{"pod", "gone", "n"}));
  // The same text in another buffer is not the line being written.
  EXPECT_FALSE(seen[0].same_text_other_buffer_has_record);
  EXPECT_FALSE(seen[1].has_record);
  EXPECT_EQ(seen[2].payload, seen[0].payload);
  EXPECT_FALSE(seen[2].has_record);
}

TEST(CurrentRecordTest, NestedLineGivesBackTheOuterRecord) {
  RecordSinkDefaultLogger capture;
  capture.sink().inside = [] { Warn("inner", {{"m", 2}}); };
  Info("outer", {{"n", 1}});
  const std::vector<RecordSink::Seen>& seen = capture.sink().seen;
  ASSERT_EQ(seen.size(), 2u);  // the inner line is done first
  EXPECT_EQ(seen[0].msg, "inner");
  EXPECT_EQ(seen[0].keys, (std::vector<std::string>{"m"}));
  EXPECT_EQ(seen[1].msg, "outer");
  EXPECT_EQ(seen[1].keys, (std::vector<std::string>{"n"}));
  EXPECT_TRUE(seen[1].same_record_after_inside);
}

TEST(CurrentRecordTest, StringValueIsTheTextFormsString) {
  EXPECT_EQ(StringValue(Value("a\"b")), "a\"b");
  EXPECT_EQ(StringValue(KRef("ConfigMap", "NS", "App")), "configmap/NS/App");
  EXPECT_EQ(StringValue(KRef("node", "", "n1")), "node/n1");
  EXPECT_EQ(StringValue(KObj("", "")), "");
  EXPECT_EQ(StringValue(Value(3)), "");
}

}  // namespace
}  // namespace logging
