#include "podconfig/file_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/log_capture.h"
#include "tests/support/test_loop.h"

namespace podconfig {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using vmtest::ReplaceFile;
using vmtest::WriteFile;

std::string PodYaml(const std::string& name, const std::string& label = "v1") {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\n  labels: {version: " + label +
         "}\nspec:\n  volumes:\n  - name: config\n    configMap: {name: app}\n";
}

class FileSourceTest : public ::testing::Test {
 protected:
  // `settle` 0 (the default here): failures and removals count at once.
  void Start(std::chrono::milliseconds relist = std::chrono::hours(1),
             std::chrono::milliseconds settle = std::chrono::milliseconds(0)) {
    FileSourceOptions options;
    options.path = dir_.path();
    options.node_name = "node-1";
    options.relist_interval = relist;
    options.settle = settle;
    base::Status s = source_.Start(loop_.get(), options, [this](std::vector<PodPtr> pods) {
      ++deliveries_;
      last_ = std::move(pods);
    });
    ASSERT_TRUE(s.ok()) << s.message();
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& p : last_.value_or(std::vector<PodPtr>{})) names.push_back(p->metadata.name);
    return names;
  }

  std::string UidOf(const std::string& name) const {
    for (const auto& p : *last_) {
      if (p->metadata.name == name) return p->metadata.uid;
    }
    return "";
  }

  // Runs the loop until the delivered pod names are `want`.
  bool WaitForNames(std::vector<std::string> want) {
    return loop_.RunUntil([&] { return last_.has_value() && Names() == want; });
  }

  vmtest::TestLoop loop_;
  vmtest::TempDir dir_;
  FileSource source_;
  int deliveries_ = 0;
  std::optional<std::vector<PodPtr>> last_;
};

TEST_F(FileSourceTest, FirstStateListsManifestsInNameOrderAndIgnoresOtherEntries) {
  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  WriteFile(dir_.File("a.json"), R"({"kind":"Pod","metadata":{"name":"a"}})");
  WriteFile(dir_.File("c.yml"), PodYaml("c"));
  WriteFile(dir_.File(".hidden.yaml"), PodYaml("hidden"));
  WriteFile(dir_.File("notes.txt"), PodYaml("txt"));
  WriteFile(dir_.File("d.yaml.swp"), PodYaml("swp"));
  std::filesystem::create_directory(dir_.File("sub.yaml"));
  WriteFile(dir_.File("sub.yaml/e.yaml"), PodYaml("e"));
  Start();
  ASSERT_EQ(deliveries_, 1) << "the first state is delivered by Start";
  EXPECT_THAT(Names(), ElementsAre("a-node-1", "b-node-1", "c-node-1"));
}

TEST_F(FileSourceTest, EmptyDirectoryIsSeenWithNoPods) {
  Start();
  ASSERT_TRUE(last_.has_value());
  EXPECT_THAT(*last_, IsEmpty());
}

TEST_F(FileSourceTest, AddEditRenameIntoPlaceAndDeleteAreFollowed) {
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start();
  ASSERT_THAT(Names(), ElementsAre("a-node-1"));
  const std::string uid_a = UidOf("a-node-1");

  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  ASSERT_TRUE(WaitForNames({"a-node-1", "b-node-1"}));

  WriteFile(dir_.File("a.yaml"), PodYaml("a", "v2"));  // in-place edit
  ASSERT_TRUE(loop_.RunUntil([&] { return UidOf("a-node-1") != uid_a; }));
  EXPECT_EQ(last_->at(0)->metadata.labels.at("version"), "v2");
  const std::string uid_a2 = UidOf("a-node-1");
  EXPECT_FALSE(uid_a2.empty());

  ReplaceFile(dir_.File("a.yaml"), PodYaml("a", "v3"));  // editor-style rename over it
  ASSERT_TRUE(loop_.RunUntil([&] { return UidOf("a-node-1") != uid_a2; }));
  EXPECT_EQ(last_->at(0)->metadata.labels.at("version"), "v3");

  ReplaceFile(dir_.File("c.yaml"), PodYaml("c"));  // rename of a new file into place
  ASSERT_TRUE(WaitForNames({"a-node-1", "b-node-1", "c-node-1"}));

  std::filesystem::remove(dir_.File("b.yaml"));
  ASSERT_TRUE(WaitForNames({"a-node-1", "c-node-1"}));
}

// The pods come annotated with their source (so PodConfig keeps them without a copy), and a file
// that did not change is delivered again as the same object: one copy of each pod.
TEST_F(FileSourceTest, AnUnchangedFileDeliversTheSamePodObject) {
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  Start();
  ASSERT_TRUE(WaitForNames({"a-node-1", "b-node-1"}));
  const PodPtr first = last_->at(0);
  EXPECT_EQ(first->metadata.annotations.at(kConfigSourceAnnotation), kFileSource);
  ReplaceFile(dir_.File("b.yaml"), PodYaml("c"));
  ASSERT_TRUE(WaitForNames({"a-node-1", "c-node-1"}));
  EXPECT_EQ(last_->at(0), first);
}

TEST_F(FileSourceTest, SameContentKeepsItsUidAcrossRestarts) {
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start();
  const std::string uid = UidOf("a-node-1");
  source_.Stop();
  FileSource again;
  std::string uid_again;
  FileSourceOptions options{dir_.path(), "node-1"};
  ASSERT_TRUE(again
                  .Start(loop_.get(), options,
                         [&](std::vector<PodPtr> pods) { uid_again = pods.at(0)->metadata.uid; })
                  .ok());
  EXPECT_EQ(uid_again, uid);
}

TEST_F(FileSourceTest, FollowsADataSymlinkSwap) {
  namespace fs = std::filesystem;
  fs::create_directory(dir_.File("..v1"));
  WriteFile(dir_.File("..v1/a.yaml"), PodYaml("a"));
  fs::create_directory_symlink("..v1", dir_.File("..data"));
  fs::create_symlink("..data/a.yaml", dir_.File("a.yaml"));
  Start();
  ASSERT_THAT(Names(), ElementsAre("a-node-1"));
  fs::create_directory(dir_.File("..v2"));
  WriteFile(dir_.File("..v2/a.yaml"), PodYaml("a", "v2"));
  fs::create_directory_symlink("..v2", dir_.File("..data_tmp"));
  fs::rename(dir_.File("..data_tmp"), dir_.File("..data"));
  ASSERT_TRUE(loop_.RunUntil([&] { return last_->at(0)->metadata.labels.at("version") == "v2"; }));
}

TEST_F(FileSourceTest, InvalidFileIsSkippedAndOthersStay) {
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  WriteFile(dir_.File("bad.yaml"), "kind: Pod\nmetadata: {name: Not_Valid}\n");
  Start();
  EXPECT_THAT(Names(), ElementsAre("a-node-1"));

  WriteFile(dir_.File("bad.yaml"), PodYaml("bad"));  // fixed
  ASSERT_TRUE(WaitForNames({"a-node-1", "bad-node-1"}));
}

// A manifest that is still there but cannot be read or decoded (an editor's half-saved file, a
// truncation, a broken link) keeps its last good pod, so that its published volumes stay; the
// failure is logged once, naming the file and the pod. Fixing it delivers the new pod; removing
// it removes the pod.
TEST_F(FileSourceTest, BrokenOrUnreadableFileKeepsItsLastGoodPod) {
  namespace fs = std::filesystem;
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start();
  ASSERT_THAT(Names(), ElementsAre("a-node-1"));
  const PodPtr good = last_->at(0);
  int n = 0;
  // Each step ends with a new file b<n>.yaml: its event comes after the broken file's, so once
  // its pod is delivered the broken file has been read and judged.
  auto step = [&](const std::string& what) {
    const std::string name = "b" + std::to_string(++n);
    WriteFile(dir_.File(name + ".yaml"), PodYaml(name));
    EXPECT_TRUE(loop_.RunUntil([&] {
      for (const PodPtr& p : last_.value_or(std::vector<PodPtr>{})) {
        if (p->metadata.name == name + "-node-1") return true;
      }
      return false;
    })) << what;
    ASSERT_FALSE(last_->empty()) << what;
    EXPECT_EQ(last_->at(0)->metadata.name, "a-node-1") << what << ": the last good pod is held";
    EXPECT_EQ(last_->at(0)->metadata.uid, good->metadata.uid) << what;
  };

  WriteFile(dir_.File("a.yaml"), "{\"kind\": \"Pod\", \"metadata\": {\"na");  // truncated JSON
  step("truncated JSON");
  EXPECT_THAT(logs.text(), ::testing::HasSubstr("keeping its last good pod"));
  EXPECT_THAT(logs.text(), ::testing::HasSubstr(dir_.File("a.yaml")));
  EXPECT_THAT(logs.text(), ::testing::HasSubstr("default/a-node-1"));

  WriteFile(dir_.File("a.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n");  // valid YAML, no pod
  step("truncated YAML");
  WriteFile(dir_.File("a.yaml"), "");  // an editor's truncate before the write
  step("empty file");
  WriteFile(dir_.File("a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
  step("another kind");

  // Unreadable, also for root (which ignores mode 000): a symlink loop (stat fails with ELOOP)
  // and a file over the 10 MiB limit (the read fails).
  fs::remove(dir_.File("a.yaml"));
  fs::create_symlink("a.yaml", dir_.File("a.yaml"));
  step("symlink loop");
  EXPECT_THAT(logs.text(),
              ::testing::HasSubstr("Cannot read pod manifest; keeping its last good pod"));
  WriteFile(dir_.File("big.tmp"), PodYaml("a"));
  fs::resize_file(dir_.File("big.tmp"), 11 << 20);
  fs::rename(dir_.File("big.tmp"), dir_.File("a.yaml"));
  step("oversized file");
  if (geteuid() != 0) {
    WriteFile(dir_.File("locked.tmp"), PodYaml("a"));
    fs::permissions(dir_.File("locked.tmp"), fs::perms::none);
    fs::rename(dir_.File("locked.tmp"), dir_.File("a.yaml"));
    step("mode 000");
  }

  ReplaceFile(dir_.File("a.yaml"), PodYaml("a", "v2"));  // fixed
  ASSERT_TRUE(loop_.RunUntil([&] { return last_->at(0)->metadata.labels.at("version") == "v2"; }));
  WriteFile(dir_.File("a.yaml"), PodYaml("renamed"));  // a valid pod replaces the held one
  ASSERT_TRUE(loop_.RunUntil([&] { return last_->at(0)->metadata.name != "a-node-1"; }));
  EXPECT_EQ(last_->at(0)->metadata.name, "renamed-node-1");

  fs::remove(dir_.File("a.yaml"));
  ASSERT_TRUE(loop_.RunUntil([&] {
    for (const PodPtr& p : *last_) {
      if (p->metadata.name == "renamed-node-1") return false;
    }
    return true;
  }));
}

// A file that stays unreadable is reported once, not at every relist.
TEST_F(FileSourceTest, AnUnreadableFileIsReportedOnce) {
  namespace fs = std::filesystem;
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start(std::chrono::milliseconds(5));
  fs::remove(dir_.File("a.yaml"));
  fs::create_symlink("a.yaml", dir_.File("a.yaml"));
  loop_.RunFor(std::chrono::milliseconds(200));  // dozens of relists
  EXPECT_THAT(Names(), ElementsAre("a-node-1"));
  const std::string text = logs.text();
  const std::string line = "Cannot read pod manifest";
  size_t count = 0;
  for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << text;
}

// `cat > file` creates the file empty, then writes it: caught in between, it is not an error.
// The settle time here outlasts the test, so a report could only come from a missing settle.
TEST_F(FileSourceTest, AFileCaughtMidWriteIsNoError) {
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start(std::chrono::hours(1), std::chrono::hours(1));
  WriteFile(dir_.File("b.yaml"), "");
  // The empty file has been read once a later file's pod is delivered.
  WriteFile(dir_.File("c.yaml"), PodYaml("c"));
  ASSERT_TRUE(WaitForNames({"a-node-1", "c-node-1"}));
  EXPECT_TRUE(source_.Rejected().empty());
  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  ASSERT_TRUE(WaitForNames({"a-node-1", "b-node-1", "c-node-1"}));
  EXPECT_THAT(logs.text(), ::testing::Not(::testing::HasSubstr("Invalid pod manifest")));
  EXPECT_THAT(logs.text(), ::testing::Not(::testing::HasSubstr("valid again")));
  EXPECT_TRUE(source_.Rejected().empty());
}

// A file still invalid once the settle time has passed is reported once and listed as rejected;
// when it decodes again, that is logged once at info and it is no longer listed.
TEST_F(FileSourceTest, AnInvalidFileIsReportedAfterTheSettleTimeAndItsRecoveryOnce) {
  vmtest::LogCapture logs;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start(std::chrono::hours(1), std::chrono::milliseconds(20));
  WriteFile(dir_.File("a.yaml"), "kind: Pod\nmetadata: {name: Not_Valid}\n");
  ASSERT_TRUE(loop_.RunUntil([&] { return !source_.Rejected().empty(); }));
  const std::vector<manifestdir::RejectedManifest> rejected = source_.Rejected();
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].file, dir_.File("a.yaml"));
  EXPECT_THAT(rejected[0].reason, ::testing::HasSubstr("metadata.name"));
  EXPECT_THAT(Names(), ElementsAre("a-node-1")) << "the last good pod is held";
  EXPECT_THAT(logs.text(), ::testing::HasSubstr("Invalid pod manifest; keeping its last good pod"));

  WriteFile(dir_.File("a.yaml"), PodYaml("a", "v2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return source_.Rejected().empty(); }));
  const std::string text = logs.text();
  const size_t at = text.find("Pod manifest is valid again");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.find("Pod manifest is valid again", at + 1), std::string::npos) << text;
  EXPECT_EQ(text.find(" E ", at), std::string::npos) << "no error after the recovery";
}

// `git checkout` unlinks a file and creates it again: within the settle time that is one change
// (here none: the same content), never a removal of the pod and its volumes in between.
TEST_F(FileSourceTest, AnUnlinkAndRecreateIsOneChangeNotARemoval) {
  namespace fs = std::filesystem;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start(std::chrono::hours(1), std::chrono::hours(1));
  ASSERT_THAT(Names(), ElementsAre("a-node-1"));
  const PodPtr before = last_->at(0);
  std::vector<std::vector<std::string>> seen;
  fs::remove(dir_.File("a.yaml"));
  // The removal has been seen once a later file's pod is delivered.
  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  ASSERT_TRUE(loop_.RunUntil([&] {
    seen.push_back(Names());
    return Names().size() == 2;
  }));
  WriteFile(dir_.File("a.yaml"), PodYaml("a", "v2"));
  ASSERT_TRUE(loop_.RunUntil([&] {
    seen.push_back(Names());
    return last_->at(0)->metadata.labels.at("version") == "v2";
  }));
  for (const auto& names : seen) {
    EXPECT_THAT(names, ::testing::Contains("a-node-1")) << "the pod was removed in between";
  }
  EXPECT_EQ(last_->at(0)->metadata.uid == before->metadata.uid, false)
      << "a changed static pod gets a new UID, as with the kubelet";
}

// With a short settle time a file that stays gone is removed.
TEST_F(FileSourceTest, AFileThatStaysGoneIsRemovedAfterTheSettleTime) {
  namespace fs = std::filesystem;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  Start(std::chrono::hours(1), std::chrono::milliseconds(20));
  fs::remove(dir_.File("a.yaml"));
  ASSERT_TRUE(WaitForNames({"b-node-1"}));
}

TEST_F(FileSourceTest, DotfilesAndTemporaryNamesCauseNoDelivery) {
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start();
  const int before = deliveries_;
  WriteFile(dir_.File(".a.yaml.swp"), "junk");
  WriteFile(dir_.File("a.yaml~"), "junk");
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(deliveries_, before);
  EXPECT_THAT(Names(), ElementsAre("a-node-1"));
}

TEST_F(FileSourceTest, RelistWithoutChangesDeliversNothingAndCatchesMissedChanges) {
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  Start(std::chrono::milliseconds(10));
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(deliveries_, 1);
  // A change made while the loop does not run still arrives (by event or relist). Replaced, not
  // written in place: a relist already reading on the pool could catch an in-place write
  // half done (an empty file holds the old pod until the next read), which is not what this
  // tests.
  ReplaceFile(dir_.File("a.yaml"), PodYaml("a", "v2"));
  ASSERT_TRUE(loop_.RunUntil([&] { return deliveries_ == 2; }));
  ASSERT_THAT(Names(), ElementsAre("a-node-1"));
  EXPECT_EQ(last_->at(0)->metadata.labels.at("version"), "v2");
}

TEST_F(FileSourceTest, MissingDirectoryIsSeenEmptyThenPickedUpByTheRelist) {
  std::filesystem::remove(dir_.path());
  Start(std::chrono::milliseconds(20));
  ASSERT_TRUE(last_.has_value());
  EXPECT_THAT(*last_, IsEmpty());
  std::filesystem::create_directory(dir_.path());
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  ASSERT_TRUE(WaitForNames({"a-node-1"}));
  // The relist also armed the watch: the next change arrives by event.
  WriteFile(dir_.File("b.yaml"), PodYaml("b"));
  ASSERT_TRUE(WaitForNames({"a-node-1", "b-node-1"}));
}

TEST_F(FileSourceTest, SingleFilePath) {
  WriteFile(dir_.File("only.yaml"), PodYaml("only"));
  WriteFile(dir_.File("other.yaml"), PodYaml("other"));
  FileSourceOptions options{dir_.File("only.yaml"), "node-1"};
  ASSERT_TRUE(source_
                  .Start(loop_.get(), options,
                         [this](std::vector<PodPtr> pods) { last_ = std::move(pods); })
                  .ok());
  EXPECT_THAT(Names(), ElementsAre("only-node-1"));
  ReplaceFile(dir_.File("only.yaml"), PodYaml("renamed"));
  ASSERT_TRUE(WaitForNames({"renamed-node-1"}));
}

TEST_F(FileSourceTest, NoDeliveryAfterStop) {
  Start();
  source_.Stop();
  const int before = deliveries_;
  WriteFile(dir_.File("a.yaml"), PodYaml("a"));
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_EQ(deliveries_, before);
}

TEST(FileSourceOptionsTest, RejectsEmptyPathAndNodeName) {
  vmtest::TestLoop loop;
  FileSource source;
  EXPECT_FALSE(source.Start(loop.get(), {"", "n"}, [](std::vector<PodPtr>) {}).ok());
  EXPECT_FALSE(source.Start(loop.get(), {"/tmp", ""}, [](std::vector<PodPtr>) {}).ok());
}

}  // namespace
}  // namespace podconfig
