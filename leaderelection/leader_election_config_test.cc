#include "leaderelection/leader_election_config.h"

#include <gtest/gtest.h>

#include "leaderelection/leader_election_record.h"

namespace leaderelection {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LeaderElectionConfigTest, DefaultsPerLockAreValid) {
  for (LockType type : {LockType::kFile, LockType::kLeases}) {
    LeaderElectionConfig config;
    config.resource_lock = type;
    auto timing = ResolveTiming(config);
    ASSERT_TRUE(timing.ok()) << LockTypeName(type) << ": " << timing.status().message();
  }
  // The file lock: takeover at the contender's next attempt, at most 2.2 x 400 ms < 1 s.
  EXPECT_EQ(DefaultTiming(LockType::kFile).retry_period, milliseconds(400));
  // The Lease: the kubelet's node lease timing.
  EXPECT_EQ(DefaultTiming(LockType::kLeases).lease_duration, seconds(40));
  EXPECT_EQ(DefaultTiming(LockType::kLeases).retry_period, seconds(10));
}

TEST(LeaderElectionConfigTest, TimingRules) {
  struct Case {
    const char* name;
    LockType type;
    LeaderElectionTiming timing;
    const char* error;  // nullptr: valid
  };
  const Case cases[] = {
      {"controller-manager defaults",
       LockType::kLeases,
       {seconds(15), seconds(10), seconds(2)},
       nullptr},
      {"zero lease", LockType::kFile, {seconds(0), seconds(10), seconds(2)}, "greater than zero"},
      {"zero renew deadline",
       LockType::kFile,
       {seconds(15), seconds(0), seconds(2)},
       "greater than zero"},
      {"negative retry",
       LockType::kFile,
       {seconds(15), seconds(10), seconds(-1)},
       "greater than zero"},
      {"lease not above deadline",
       LockType::kFile,
       {seconds(10), seconds(10), seconds(2)},
       "must be greater than --leader-elect-renew-deadline"},
      {"deadline not above 1.2 x retry",
       LockType::kFile,
       {seconds(15), seconds(6), seconds(5)},
       "1.2 x --leader-elect-retry-period"},
      {"retry + deadline reach the lease",
       LockType::kFile,
       {seconds(15), seconds(12), seconds(3)},
       "must stop before anyone else"},
      {"leases: fractional seconds",
       LockType::kLeases,
       {milliseconds(2500), seconds(1), milliseconds(200)},
       "whole seconds"},
      {"file: fractional seconds",
       LockType::kFile,
       {milliseconds(2500), seconds(1), milliseconds(200)},
       nullptr},
  };
  for (const Case& c : cases) {
    base::Status s = ValidateTiming(c.timing, c.type);
    if (c.error == nullptr) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.message();
    } else {
      EXPECT_FALSE(s.ok()) << c.name;
      EXPECT_NE(s.message().find(c.error), std::string::npos) << c.name << ": " << s.message();
    }
  }
}

TEST(LeaderElectionConfigTest, FlagsOverrideDefaultsAndAreValidatedTogether) {
  LeaderElectionConfig config;
  config.resource_lock = LockType::kLeases;
  config.retry_period = std::chrono::seconds(2);
  auto timing = ResolveTiming(config);
  ASSERT_TRUE(timing.ok());
  EXPECT_EQ(timing->retry_period, seconds(2));
  EXPECT_EQ(timing->lease_duration, seconds(40));
  config.renew_deadline = std::chrono::seconds(45);
  EXPECT_FALSE(ResolveTiming(config).ok());
}

TEST(LeaderElectionConfigTest, LockTypes) {
  EXPECT_EQ(*ParseLockType("file"), LockType::kFile);
  EXPECT_EQ(*ParseLockType("leases"), LockType::kLeases);
  auto bad = ParseLockType("configmaps");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"configmaps\""), std::string::npos);
}

TEST(LeaderElectionConfigTest, IdentitiesAreUniquePerProcessShape) {
  const std::string a = NewIdentity("node-1");
  const std::string b = NewIdentity("node-1");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("node-1_", 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string("node-1_").size() + 36) << a;
  EXPECT_EQ(DefaultLeaseName("node-1"), "volumemanager-node-1");
}

TEST(LeaderElectionRecordTest, MicroTimeAndLeaseSpec) {
  using namespace std::chrono;
  const system_clock::time_point t =
      system_clock::time_point(seconds(1740823212)) + microseconds(345678);
  EXPECT_EQ(FormatMicroTime(t), "2025-03-01T10:00:12.345678Z");
  LeaderElectionRecord r{"me", 40, "2025-03-01T10:00:00.000000Z", FormatMicroTime(t), 3};
  EXPECT_EQ(RecordFromLeaseSpec(LeaseSpecFromRecord(r)), r);
  // Absent, null and mistyped fields are zero values; unknown ones are ignored.
  auto spec = nlohmann::json::parse(
      R"({"holderIdentity":null,"leaseDurationSeconds":"x","strategy":"Older"})");
  EXPECT_EQ(RecordFromLeaseSpec(spec), LeaderElectionRecord{});
  EXPECT_EQ(RecordFromLeaseSpec(nlohmann::json()), LeaderElectionRecord{});
}

}  // namespace
}  // namespace leaderelection
