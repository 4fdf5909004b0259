#include "dynamicconfig/checkpoint_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/durable_file.h"
#include "dynamicconfig/test_configs.h"
#include "tests/support/test_loop.h"

namespace dynamicconfig {
namespace {

TEST(CheckpointStoreTest, RecordsRoundTripAndAbsentIsNotAnError) {
  vmtest::TempDir tmp;
  CheckpointStore store(tmp.File("dc"));
  ASSERT_TRUE(store.Init().ok());
  EXPECT_FALSE(store.LoadAssigned()->has_value());
  EXPECT_FALSE(store.LoadLastKnownGood()->has_value());
  EXPECT_FALSE(store.LoadRolledBack()->has_value());

  const Checkpoint a = TestCheckpoint("7", "syncFrequency: 2m\n");
  ASSERT_TRUE(store.SaveAssigned({a, 1700000000, 2, 1}).ok());
  ASSERT_TRUE(store.SaveLastKnownGood(a).ok());
  ASSERT_TRUE(store.SaveRolledBack({a, "crashed"}).ok());
  auto assigned = store.LoadAssigned();
  ASSERT_TRUE(assigned.ok() && assigned->has_value()) << assigned.status().message();
  EXPECT_TRUE((*assigned)->checkpoint.SameRevision(a));
  EXPECT_EQ((*assigned)->checkpoint.config, a.config);
  EXPECT_EQ((*assigned)->checkpoint.namespace_, "kube-system");
  EXPECT_EQ((*assigned)->trial_started_unix, 1700000000);
  EXPECT_EQ((*assigned)->starts, 2);
  EXPECT_EQ((*assigned)->clean_exits, 1);
  EXPECT_EQ((*store.LoadLastKnownGood())->config, a.config);
  EXPECT_EQ((*store.LoadRolledBack())->reason, "crashed");
  EXPECT_EQ(std::filesystem::status(store.dir()).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  // Nothing but the three records: the temporary files were renamed.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(store.dir())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3);

  ASSERT_TRUE(store.ClearAssigned().ok());
  EXPECT_FALSE(store.LoadAssigned()->has_value());
  EXPECT_TRUE(store.ClearAssigned().ok());  // already gone
}

TEST(CheckpointStoreTest, CorruptionOfAnyKindIsAnErrorNamingTheFile) {
  vmtest::TempDir tmp;
  CheckpointStore store(tmp.path());
  ASSERT_TRUE(store.SaveAssigned({TestCheckpoint("7", "syncFrequency: 2m\n"), 1, 1, 0}).ok());
  const std::string path = tmp.File(CheckpointStore::kAssigned);
  const std::string good = *base::ReadWholeFile(path);
  struct Case {
    const char* name;
    std::string content;
  };
  std::string flipped = good;
  flipped[flipped.find("2m")] = '3';  // the record changed, the digest did not
  std::string other_version = good;   // no release wrote a version 0 (a later one: startup_test)
  other_version.replace(other_version.find("\"version\":1"), 11, "\"version\":0");
  const Case cases[] = {
      {"empty", ""},
      {"truncated", good.substr(0, good.size() / 2)},
      {"garbage", "\x01\x02 not json"},
      {"checksum", flipped},
      {"version", other_version},
      {"member missing",
       "{\"kind\":\"VolumeManagerConfigCheckpoint\",\"version\":1,\"sha256\":"
       "\"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\","
       "\"record\":{}}"},
  };
  for (const Case& c : cases) {
    vmtest::WriteFile(path, c.content);
    auto loaded = store.LoadAssigned();
    ASSERT_FALSE(loaded.ok()) << c.name;
    EXPECT_NE(loaded.status().message().find(path + ": corrupt"), std::string::npos)
        << c.name << ": " << loaded.status().message();
  }
  ASSERT_TRUE(store.SetAside(CheckpointStore::kAssigned).ok());
  EXPECT_FALSE(store.LoadAssigned()->has_value());
  EXPECT_TRUE(std::filesystem::exists(path + ".corrupt"));
}

}  // namespace
}  // namespace dynamicconfig
