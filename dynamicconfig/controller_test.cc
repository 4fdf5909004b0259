#include "dynamicconfig/controller.h"

#include <gtest/gtest.h>

#include "dynamicconfig/test_configs.h"
#include "tests/support/test_loop.h"

namespace dynamicconfig {
namespace {

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest() : store_(state_.File("dynamic-config")) {}

  // A daemon running on `good_`, its last known good config.
  std::unique_ptr<Controller> Make(std::chrono::nanoseconds trial = std::chrono::minutes(10)) {
    EXPECT_TRUE(store_.Init().ok());
    EXPECT_TRUE(store_.SaveLastKnownGood(good_).ok());
    EXPECT_TRUE(store_.SaveAssigned({good_, 1, 1, 0}).ok());
    auto startup = BeginStartup(store_, 1000, kMaxFailedStarts, TestParse(state_.path()));
    EXPECT_TRUE(startup.ok());
    ControllerOptions options;
    options.namespace_ = "kube-system";
    options.name = "vm-config";
    options.node_name = "n1";
    options.trial = trial;
    options.now_unix = [] { return int64_t{2000}; };
    ControllerHooks hooks;
    hooks.parse = TestParse(state_.path());
    hooks.apply_live = [this](const config::ParsedFlags& p) { applied_.push_back(*p.config); };
    hooks.restart = [this](const std::string& why) { restarts_.push_back(why); };
    hooks.warn = [this](const Checkpoint& c, const std::string& reason, const std::string& msg) {
      warnings_.push_back(c.resource_version + " " + reason + " " + msg);
    };
    auto c = std::make_unique<Controller>(loop_.get(), nullptr, &store_, *startup, options, hooks);
    c->Start();
    return c;
  }

  vmtest::TestLoop loop_;
  vmtest::TempDir state_;
  CheckpointStore store_;
  const Checkpoint good_ = TestCheckpoint("5", "syncFrequency: 2m\n");
  std::vector<config::DaemonConfig> applied_;
  std::vector<std::string> restarts_;
  std::vector<std::string> warnings_;
};

TEST_F(ControllerTest, LiveFieldsApplyAtOnceCheckpointedOnTrialThenLastKnownGood) {
  auto c = Make(std::chrono::seconds(0));
  const Checkpoint next = TestCheckpoint(
      "6",
      "syncFrequency: 3m\nobjectCacheTTL: 10s\nlogging: {verbosity: 2, format: json}\n"
      "eventRecordQPS: 1\neventBurst: 2\n");
  c->OnAssigned(next);
  ASSERT_EQ(applied_.size(), 1u);
  EXPECT_TRUE(restarts_.empty());
  EXPECT_EQ(applied_[0].sync_frequency, std::chrono::minutes(3));
  EXPECT_EQ(applied_[0].verbosity, 2);
  EXPECT_EQ(c->active_config().sources.at("objectCacheTTL"), "dynamic");
  auto assigned = store_.LoadAssigned();
  ASSERT_TRUE(assigned.ok() && assigned->has_value());
  EXPECT_TRUE((*assigned)->checkpoint.SameRevision(next));
  EXPECT_EQ((*assigned)->starts, 1);
  EXPECT_EQ((*assigned)->trial_started_unix, 2000);
  EXPECT_TRUE(c->on_trial());
  EXPECT_EQ(c->Status()["active"]["resourceVersion"], "6");
  EXPECT_EQ(c->Status()["lastKnownGood"]["resourceVersion"], "5");
  EXPECT_EQ(c->counters().applied_live, 1u);
  // The trial (0 s here) ends on the loop: the config is the last known good one.
  ASSERT_TRUE(loop_.RunUntil([&] { return !c->on_trial(); }));
  EXPECT_TRUE((*store_.LoadLastKnownGood())->SameRevision(next));
  c->OnAssigned(next);  // the same revision again: nothing to do
  EXPECT_EQ(applied_.size(), 1u);
}

TEST_F(ControllerTest, OtherFieldsAreCheckpointedThenTheDaemonRestarts) {
  auto c = Make();
  const Checkpoint next = TestCheckpoint("6", "syncFrequency: 2m\nfsync: true\n");
  c->OnAssigned(next);
  EXPECT_TRUE(applied_.empty());
  ASSERT_EQ(restarts_.size(), 1u);
  EXPECT_NE(restarts_[0].find("changes fsync, which need a restart"), std::string::npos)
      << restarts_[0];
  auto assigned = store_.LoadAssigned();
  EXPECT_TRUE((*assigned)->checkpoint.SameRevision(next));
  EXPECT_EQ((*assigned)->starts, 0);  // counted by the next start
  EXPECT_EQ(c->counters().applied_by_restart, 1u);
  // The change detection strategy is not live either.
  auto again = Make();
  again->OnAssigned(
      TestCheckpoint("7", "syncFrequency: 2m\nconfigMapAndSecretChangeDetectionStrategy: Get\n"));
  EXPECT_EQ(restarts_.size(), 2u);
}

TEST_F(ControllerTest, InvalidConfigsAreRejectedOnceEachWithAWarningAndNotCheckpointed) {
  auto c = Make();
  struct Case {
    const char* rv;
    std::string config;
    const char* error;
  };
  const Case cases[] = {
      {"6", ConfigText("syncFrequency: 0s\n"),
       "field syncFrequency: --sync-frequency: must be greater than 0"},
      {"7", ConfigText("sncFrequency: 1m\n"), "unknown field \"sncFrequency\""},
      {"8", ConfigText("nodeName: other\n"), "field nodeName: cannot be set by the dynamic config"},
      {"9", "apiVersion: v1\nkind: ConfigMap\n", "field apiVersion"},
      {"10", "", "key \"volumemanager\" is missing or empty"},
  };
  uint64_t n = 0;
  for (const Case& k : cases) {
    Checkpoint bad = good_;
    bad.resource_version = k.rv;
    bad.config = k.config;
    c->OnAssigned(bad);
    c->OnAssigned(bad);  // reported once
    ++n;
    ASSERT_EQ(warnings_.size(), n) << k.rv;
    EXPECT_NE(warnings_.back().find(std::string(k.rv) + " DynamicConfigRejected rejected: "),
              std::string::npos)
        << warnings_.back();
    EXPECT_NE(warnings_.back().find(k.error), std::string::npos) << warnings_.back();
    EXPECT_NE(c->Status()["lastError"].get<std::string>().find(k.error), std::string::npos);
  }
  EXPECT_EQ(c->counters().rejected, n);
  EXPECT_TRUE(applied_.empty());
  EXPECT_TRUE(restarts_.empty());
  EXPECT_TRUE((*store_.LoadAssigned())->checkpoint.SameRevision(good_));
  EXPECT_EQ(c->Status()["active"]["resourceVersion"], "5");
}

TEST_F(ControllerTest, NoConfigMapAnyMoreMeansTheFileAndFlags) {
  auto c = Make();
  c->OnAssigned(std::nullopt);  // only syncFrequency differs: live
  ASSERT_EQ(applied_.size(), 1u);
  EXPECT_EQ(applied_[0].sync_frequency, std::chrono::minutes(1));
  EXPECT_FALSE(store_.LoadAssigned()->has_value());
  EXPECT_TRUE(c->Status()["active"].is_null());
  c->OnAssigned(std::nullopt);
  EXPECT_EQ(applied_.size(), 1u);
}

}  // namespace
}  // namespace dynamicconfig
