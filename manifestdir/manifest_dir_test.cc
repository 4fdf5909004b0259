#include "manifestdir/manifest_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/test_loop.h"

namespace manifestdir {
namespace {

namespace fs = std::filesystem;
using Listing = ManifestDirScan::Listing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// "name=bytes" for each read ("name=<same>" when unchanged, "name=<error>" when it failed).
std::vector<std::string> Reads(const ManifestDirScan& scan) {
  std::vector<std::string> out;
  for (const ManifestFileRead& r : scan.reads) {
    out.push_back(r.name + "=" + (!r.status.ok() ? "<error>" : r.bytes ? *r.bytes : "<same>"));
  }
  return out;
}

TEST(IsManifestFileNameTest, KubeletRules) {
  struct Case {
    const char* name;
    bool want;
  } cases[] = {
      {"a.yaml", true},      {"a.yml", true},        {"a.json", true},  {".a.yaml", false},
      {"a.yaml.swp", false}, {"a.yaml.tmp~", false}, {"..data", false}, {"", false},
      {"notes.txt", false},  {"yaml", false},
  };
  for (const Case& c : cases) EXPECT_EQ(IsManifestFileName(c.name), c.want) << c.name;
}

class ManifestDirTest : public ::testing::Test {
 protected:
  vmtest::TempDir tmp_;
  ManifestDir dir_{{tmp_.path()}};
  void Write(const std::string& name, const std::string& bytes) {
    vmtest::WriteFile(tmp_.File(name), bytes);
  }
};

TEST_F(ManifestDirTest, FirstScanReadsManifestFilesInNameOrder) {
  Write("b.yaml", "b");
  Write("a.json", "a");
  Write("c.yml", "c");
  Write(".hidden.yaml", "h");
  Write("notes.txt", "t");
  fs::create_directory(tmp_.File("sub.yaml"));
  Write("sub.yaml/d.yaml", "d");
  ManifestDirScan scan = dir_.Scan(ManifestScanScope::kStatAll);
  EXPECT_EQ(scan.listing, Listing::kListed);
  EXPECT_THAT(Reads(scan), ElementsAre("a.json=a", "b.yaml=b", "c.yml=c"));
  EXPECT_THAT(scan.removed, IsEmpty());
  EXPECT_EQ(dir_.PathOf("a.json"), tmp_.File("a.json"));
}

TEST_F(ManifestDirTest, StatAllReadsOnlyFilesWhoseStampChanged) {
  Write("a.yaml", "a1");
  Write("b.yaml", "b1");
  dir_.Scan(ManifestScanScope::kStatAll);
  const uint64_t reads = dir_.reads();
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), IsEmpty());
  EXPECT_EQ(dir_.reads(), reads) << "unchanged stamps: nothing read";
  Write("b.yaml", "b22");
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), ElementsAre("b.yaml=b22"));
}

TEST_F(ManifestDirTest, IdenticalBytesAreReadButNotReported) {
  Write("a.yaml", "a1");
  dir_.Scan(ManifestScanScope::kStatAll);
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kReadAll)), ElementsAre("a.yaml=<same>"));
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kNamed, {"a.yaml"})),
              ElementsAre("a.yaml=<same>"));
}

TEST_F(ManifestDirTest, NamedScanReadsOnlyTheNamedFilesWhateverTheirStamp) {
  Write("a.yaml", "a1");
  Write("b.yaml", "b1");
  dir_.Scan(ManifestScanScope::kStatAll);
  Write("a.yaml", "a2");
  Write("b.yaml", "b2");
  Write("c.yaml", "c1");
  ManifestDirScan scan = dir_.Scan(ManifestScanScope::kNamed, {"b.yaml", "c.yaml", "gone.yaml"});
  EXPECT_EQ(scan.listing, Listing::kNotListed);
  EXPECT_THAT(Reads(scan), ElementsAre("b.yaml=b2", "c.yaml=c1"));
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), ElementsAre("a.yaml=a2"));
}

TEST_F(ManifestDirTest, GoneFilesAreReported) {
  Write("a.yaml", "a");
  Write("b.yaml", "b");
  Write("c.yaml", "c");
  dir_.Scan(ManifestScanScope::kStatAll);
  fs::remove(tmp_.File("a.yaml"));
  EXPECT_THAT(dir_.Scan(ManifestScanScope::kNamed, {"a.yaml"}).removed, ElementsAre("a.yaml"));
  fs::remove(tmp_.File("c.yaml"));
  fs::rename(tmp_.File("b.yaml"), tmp_.File("b.yaml.old"));
  EXPECT_THAT(dir_.Scan(ManifestScanScope::kStatAll).removed, ElementsAre("b.yaml", "c.yaml"));
}

TEST_F(ManifestDirTest, MissingDirectoryRemovesEverythingAndFailedListingKeepsIt) {
  Write("a.yaml", "a");
  dir_.Scan(ManifestScanScope::kStatAll);
  fs::remove_all(tmp_.path());
  vmtest::WriteFile(tmp_.path(), "a regular file");  // without allow_single_file: not listable
  ManifestDirScan failed = dir_.Scan(ManifestScanScope::kStatAll);
  EXPECT_EQ(failed.listing, Listing::kFailed);
  EXPECT_FALSE(failed.error.empty());
  EXPECT_THAT(failed.removed, IsEmpty());
  fs::remove(tmp_.path());
  ManifestDirScan missing = dir_.Scan(ManifestScanScope::kStatAll);
  EXPECT_EQ(missing.listing, Listing::kMissing);
  EXPECT_THAT(missing.removed, ElementsAre("a.yaml"));
}

TEST_F(ManifestDirTest, FailedReadIsRetriedAndItsNextGoodReadReported) {
  Write("a.yaml", "a1");
  dir_.Scan(ManifestScanScope::kStatAll);
  Write("a.yaml", std::string(kMaxManifestBytes + 1, 'x'));
  ManifestDirScan scan = dir_.Scan(ManifestScanScope::kStatAll);
  ASSERT_THAT(Reads(scan), ElementsAre("a.yaml=<error>"));
  EXPECT_THAT(scan.reads[0].status.message(), HasSubstr("larger than the limit"));
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), ElementsAre("a.yaml=<error>"))
      << "a failed read is tried again at the next scan";
  Write("a.yaml", "a1");
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), ElementsAre("a.yaml=a1"))
      << "the same bytes as before the failure are reported: the owner dropped them";
}

TEST_F(ManifestDirTest, DataSymlinkSwapChangesTheStampsOfLinkedFiles) {
  fs::create_directory(tmp_.File("..v1"));
  Write("..v1/a.yaml", "v1");
  fs::create_directory_symlink("..v1", tmp_.File("..data"));
  fs::create_symlink("..data/a.yaml", tmp_.File("a.yaml"));
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), ElementsAre("a.yaml=v1"));
  fs::create_directory(tmp_.File("..v2"));
  Write("..v2/a.yaml", "v2");
  fs::create_directory_symlink("..v2", tmp_.File("..data_tmp"));
  fs::rename(tmp_.File("..data_tmp"), tmp_.File("..data"));
  EXPECT_THAT(Reads(dir_.Scan(ManifestScanScope::kStatAll)), ElementsAre("a.yaml=v2"));
}

TEST_F(ManifestDirTest, SingleFilePathIsADirectoryOfThatFile) {
  Write("only.txt", "only");  // a single file needs no manifest extension
  Write("other.yaml", "other");
  ManifestDir single({tmp_.File("only.txt"), /*allow_single_file=*/true});
  ManifestDirScan scan = single.Scan(ManifestScanScope::kStatAll);
  EXPECT_EQ(scan.listing, Listing::kListed);
  EXPECT_THAT(Reads(scan), ElementsAre("only.txt=only"));
  EXPECT_EQ(single.PathOf("only.txt"), tmp_.File("only.txt"));
  EXPECT_THAT(Reads(single.Scan(ManifestScanScope::kNamed, {"other.yaml", "only.txt"})),
              ElementsAre("only.txt=<same>"))
      << "other files of its directory do not count";
  fs::remove(tmp_.File("only.txt"));
  ManifestDirScan missing = single.Scan(ManifestScanScope::kStatAll);
  EXPECT_EQ(missing.listing, Listing::kMissing);
  EXPECT_THAT(missing.removed, ElementsAre("only.txt"));
}

TEST_F(ManifestDirTest, SingleFileModeStillListsADirectory) {
  Write("a.yaml", "a");
  ManifestDir either({tmp_.path(), /*allow_single_file=*/true});
  EXPECT_THAT(Reads(either.Scan(ManifestScanScope::kStatAll)), ElementsAre("a.yaml=a"));
}

}  // namespace
}  // namespace manifestdir
