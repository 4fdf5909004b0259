#include "volumemanager/journal/ownership_journal.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

const OwnedPath kPod{OwnedKind::kDir, "pods/u1"};
const OwnedPath kVol{OwnedKind::kVolume, "pods/u1/volumes/kubernetes.io~secret/tls"};

class OwnershipJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ownership-journal-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    file_ = dir_ + "/" + OwnershipJournal::kFileName;
  }
  void TearDown() override { fs::remove_all(dir_); }

  OwnershipJournal::OpenResult Open() {
    auto r = OwnershipJournal::Open(dir_);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r).value() : OwnershipJournal::OpenResult{};
  }
  std::string FileText() const {
    std::ifstream in(file_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void WriteFile(const std::string& text) const { std::ofstream(file_, std::ios::trunc) << text; }

  std::string dir_;
  std::string file_;
};

// While it lives, this process can write no file past `bytes` (writes fail with EFBIG instead
// of raising SIGXFSZ): the journal's next append fails as on a full or failing disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST_F(OwnershipJournalTest, NoJournalMeansOwningNothing) {
  auto r = Open();
  EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kNew);
  EXPECT_TRUE(r.journal->Entries().empty());
  EXPECT_TRUE(FileText().starts_with("volumemanager-ownership v3\n")) << FileText();
  EXPECT_NE(FileText().find(" = root - - \n"), std::string::npos) << "no identity yet";
}

TEST_F(OwnershipJournalTest, WhatWasAddedSurvivesAReopenAndRemovedEntriesGo) {
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
    EXPECT_TRUE(r.journal->Owns(OwnedKind::kVolume, kVol.path));
    EXPECT_FALSE(r.journal->Owns(OwnedKind::kDir, kVol.path));  // the kind matters
    ASSERT_TRUE(r.journal->Remove({kPod}).ok());
  }
  auto r = Open();
  EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kTrusted);
  EXPECT_EQ(r.journal->Entries(), std::vector<OwnedPath>{kVol});
  // Reopening compacts: one record per owned path (after the header and the identity).
  const std::string text = FileText();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
}

TEST_F(OwnershipJournalTest, AnIncompleteLastRecordIsIgnored) {
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod}).ok());
    ASSERT_TRUE(r.journal->Add({kVol}).ok());
  }
  std::string text = FileText();
  WriteFile(text.substr(0, text.size() - 5));  // a stop in the middle of the last append
  auto r = Open();
  EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kTrusted);
  EXPECT_NE(r.detail.find("incomplete"), std::string::npos) << r.detail;
  EXPECT_EQ(r.journal->Entries(), std::vector<OwnedPath>{kPod});
}

TEST_F(OwnershipJournalTest, AnythingUntrustworthyMeansOwningNothing) {
  std::string good;
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
    good = FileText();
  }
  const std::string second_line = good.substr(good.find('\n') + 1);
  struct Case {
    const char* name;
    std::function<void()> damage;
    const char* detail;
  };
  const std::vector<Case> cases = {
      {"a flipped byte",
       [&] {
         std::string t = good;
         t[t.size() - 3] ^= 1;
         WriteFile(t);
       },
       "line 4 is corrupt"},
      {"an old version", [&] { WriteFile("volumemanager-ownership v0\n" + second_line); },
       "version 0"},
      {"a damaged identity line",
       [&] {
         std::string t = good;
         t[t.find("= root") + 3] ^= 1;
         WriteFile(t);
       },
       "line 2 (the root dir and its identity) is corrupt"},
      {"not a journal", [&] { WriteFile("{\"volumes\": []}\n"); }, "not an ownership journal"},
      {"empty", [&] { WriteFile(""); }, "no complete header"},
      {"unreadable",
       [&] {
         fs::remove(file_);
         fs::create_directory(file_);
       },
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(file_);
    fs::remove_all(file_ + OwnershipJournal::kRejectedSuffix);
    c.damage();
    auto r = Open();
    ASSERT_NE(r.journal, nullptr);
    EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kRejected);
    EXPECT_NE(r.detail.find(c.detail), std::string::npos) << r.detail;
    EXPECT_TRUE(r.journal->Entries().empty());
    // The rejected file is kept for inspection; a fresh journal records from now on.
    EXPECT_TRUE(fs::exists(file_ + OwnershipJournal::kRejectedSuffix));
    ASSERT_TRUE(r.journal->Add({kPod}).ok());
    r.journal.reset();
    EXPECT_EQ(Open().journal->Entries(), std::vector<OwnedPath>{kPod});
  }
}

// A changed --root-dir: the journal's paths are below another root; removing what they name
// below the new one could remove the kubelet's. Owning nothing, the daemon removes nothing.
TEST_F(OwnershipJournalTest, AJournalOfAnotherRootDirMeansOwningNothingAndIsKeptAside) {
  {
    auto r = OwnershipJournal::Open(dir_, "/var/lib/kubelet");
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->journal->Add({kPod, kVol}).ok());
  }
  const std::string old_text = FileText();
  {
    auto r = OwnershipJournal::Open(dir_, "/var/lib/kubelet/");  // the same root dir
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->loaded, OwnershipJournal::Loaded::kTrusted);
    EXPECT_EQ(r->journal->Entries().size(), 2u);
  }
  auto r = OwnershipJournal::Open(dir_, "/mnt/other");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->loaded, OwnershipJournal::Loaded::kOtherRoot);
  EXPECT_NE(r->detail.find("root dir /var/lib/kubelet, not /mnt/other"), std::string::npos)
      << r->detail;
  EXPECT_TRUE(r->journal->Entries().empty());
  EXPECT_EQ(r->journal->root_dir(), "/mnt/other");
  // The evidence is kept, under a name of its root dir.
  const std::string aside = dir_ + "/" + OwnershipJournal::OtherRootFileName("/var/lib/kubelet");
  ASSERT_TRUE(fs::exists(aside));
  std::ifstream in(aside);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), old_text);
  // The new journal is the new root dir's.
  ASSERT_TRUE(r->journal->Add({kPod}).ok());
  r->journal.reset();
  auto again = OwnershipJournal::Open(dir_, "/mnt/other");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->loaded, OwnershipJournal::Loaded::kTrusted);
  EXPECT_EQ(again->journal->Entries(), std::vector<OwnedPath>{kPod});
}

// A DaemonSet upgrade: the previous version's journal (no root dir, no identity) keeps its
// ownership, and is rewritten in this version's format at once.
TEST_F(OwnershipJournalTest, AVersion1JournalIsTrustedAndRewrittenWithItsRootDir) {
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
  }
  std::string text = FileText();
  const size_t line2 = text.find('\n') + 1;
  text = "volumemanager-ownership v1\n" + text.substr(text.find('\n', line2) + 1);
  WriteFile(text);
  auto r = OwnershipJournal::Open(dir_, "/var/lib/kubelet");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->loaded, OwnershipJournal::Loaded::kTrusted) << r->detail;
  EXPECT_EQ(r->journal->Entries(), (std::vector<OwnedPath>{kPod, kVol}));
  EXPECT_FALSE(r->journal->identity().known()) << "reconstruction records it";
  EXPECT_TRUE(FileText().starts_with("volumemanager-ownership v3\n"));
  EXPECT_NE(FileText().find("= root - - /var/lib/kubelet\n"), std::string::npos) << FileText();
}

// The release before volume identities wrote v2: its journal keeps its ownership, each volume's
// identity unknown (reconstruction records it), and is rewritten as v3.
TEST_F(OwnershipJournalTest, AVersion2JournalLoadsWithUnknownVolumeIdentities) {
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
  }
  std::string text = FileText();
  ASSERT_TRUE(text.starts_with("volumemanager-ownership v3\n"));
  ASSERT_EQ(text.find(" @ "), std::string::npos) << text;
  WriteFile("volumemanager-ownership v2\n" + text.substr(text.find('\n') + 1));
  auto r = Open();
  EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kTrusted) << r.detail;
  EXPECT_EQ(r.journal->Entries(), (std::vector<OwnedPath>{kPod, kVol}));
  EXPECT_EQ(r.journal->VolumeInode(kVol.path), 0u) << "unknown";
  EXPECT_TRUE(FileText().starts_with("volumemanager-ownership v3\n"));
  // Recorded later (by reconstruction), it is kept from then on.
  ASSERT_TRUE(r.journal->SetVolumeInode(kVol.path, 4242).ok());
  r.journal.reset();
  EXPECT_EQ(Open().journal->VolumeInode(kVol.path), 4242u);
}

TEST_F(OwnershipJournalTest, AVolumeIdentityRoundTripsAndGoesWithItsEntry) {
  const uint64_t big = 0xfedcba9876543210ULL;  // the whole 64-bit range
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
    EXPECT_EQ(r.journal->VolumeInode(kVol.path), 0u);
    ASSERT_TRUE(r.journal->SetVolumeInode(kVol.path, big).ok());
    EXPECT_EQ(r.journal->VolumeInode(kVol.path), big);
    // Only an owned volume has one.
    EXPECT_FALSE(r.journal->SetVolumeInode(kPod.path, 7).ok());
    EXPECT_FALSE(r.journal->SetVolumeInode("pods/u2/volumes/kubernetes.io~secret/x", 7).ok());
    EXPECT_FALSE(r.journal->SetVolumeInode(kVol.path, 0).ok());
  }
  // Appended, then compacted at open: both keep it.
  EXPECT_NE(FileText().find(" @ volume " + std::to_string(big) + " " + kVol.path + "\n"),
            std::string::npos)
      << FileText();
  {
    auto r = Open();
    EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kTrusted) << r.detail;
    EXPECT_EQ(r.journal->VolumeInode(kVol.path), big);
    // Released, then set up again: the new dir's identity is not the old one's.
    ASSERT_TRUE(r.journal->Remove({kVol}).ok());
    EXPECT_EQ(r.journal->VolumeInode(kVol.path), 0u);
    ASSERT_TRUE(r.journal->Add({kVol}).ok());
    EXPECT_EQ(r.journal->VolumeInode(kVol.path), 0u);
  }
  EXPECT_EQ(Open().journal->VolumeInode(kVol.path), 0u);
  // The read-only journal (observe mode) reads it too.
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->SetVolumeInode(kVol.path, 99).ok());
  }
  EXPECT_EQ(OwnershipJournal::ReadOnly(dir_).journal->VolumeInode(kVol.path), 99u);
}

// An `@` line is v3's: in a v2 journal, or with a damaged inode, the journal is not trusted.
TEST_F(OwnershipJournalTest, AnIdentityLineThatDoesNotCheckOutMeansOwningNothing) {
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
    ASSERT_TRUE(r.journal->SetVolumeInode(kVol.path, 12345).ok());
  }
  const std::string good = FileText();
  WriteFile("volumemanager-ownership v2\n" + good.substr(good.find('\n') + 1));
  auto r = Open();
  EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kRejected);
  EXPECT_TRUE(r.journal->Entries().empty());
  r.journal.reset();
  std::string bad = good;
  bad[bad.find("12345")] = 'x';
  WriteFile(bad);
  EXPECT_EQ(Open().loaded, OwnershipJournal::Loaded::kRejected);
}

// docs/operations.md's rollback to the release before v3: the header back to v2 and the `@` lines
// deleted make a journal that release reads (its parser is this one's for v2) with every entry.
TEST_F(OwnershipJournalTest, TheDocumentedRollbackTurnsAVersion3JournalIntoAVersion2One) {
  {
    auto r = Open();
    ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
    ASSERT_TRUE(r.journal->SetVolumeInode(kVol.path, 12345).ok());
  }
  std::istringstream in(FileText());
  std::string line;
  std::string v2;
  std::getline(in, line);
  ASSERT_EQ(line, "volumemanager-ownership v3");
  v2 = "volumemanager-ownership v2\n";
  while (std::getline(in, line)) {
    if (line.size() > 17 && line.compare(16, 3, " @ ") == 0) continue;
    v2 += line + "\n";
  }
  WriteFile(v2);
  auto r = Open();
  EXPECT_EQ(r.loaded, OwnershipJournal::Loaded::kTrusted) << r.detail;
  EXPECT_EQ(r.journal->Entries(), (std::vector<OwnedPath>{kPod, kVol}));
  EXPECT_EQ(r.journal->VolumeInode(kVol.path), 0u);
}

TEST_F(OwnershipJournalTest, TheIdentityIsKeptAcrossRewrites) {
  auto r = Open();
  RootIdentity id{0xef53, 0x38e8618577f245cbULL, "465cdd80-e975-4207-8adf-2c78c889cafb"};
  ASSERT_TRUE(r.journal->SetIdentity(id).ok());
  ASSERT_TRUE(r.journal->Add({kPod}).ok());
  r.journal.reset();
  auto again = Open();
  EXPECT_EQ(again.loaded, OwnershipJournal::Loaded::kTrusted) << again.detail;
  EXPECT_EQ(again.journal->identity(), id);
  EXPECT_EQ(again.journal->Entries(), std::vector<OwnedPath>{kPod});
}

TEST_F(OwnershipJournalTest, PathsOutsideThePodsDirAreRefused) {
  auto r = Open();
  for (const std::string bad : {"etc/passwd", "pods/../x", "pods/u1/../../x", "pods//x",
                                "pods/u1\n+ dir pods/u2", "/pods/u1"}) {
    EXPECT_FALSE(r.journal->Add({OwnedPath{OwnedKind::kDir, bad}}).ok()) << bad;
  }
  EXPECT_TRUE(r.journal->Entries().empty());
}

TEST_F(OwnershipJournalTest, EntriesOfAPodAreItsDirAndWhatIsBelowIt) {
  auto r = Open();
  ASSERT_TRUE(r.journal
                  ->Add({kPod,
                         kVol,
                         {OwnedKind::kDir, "pods/u1-x"},
                         {OwnedKind::kDir, "pods/u1-x/volumes"},
                         {OwnedKind::kDir, "pods/u10"}})
                  .ok());
  EXPECT_EQ(r.journal->EntriesOfPod("u1"), (std::vector<OwnedPath>{kPod, kVol}));
  EXPECT_EQ(r.journal->EntriesOfPod("u2"), std::vector<OwnedPath>{});
}

TEST_F(OwnershipJournalTest, ConcurrentAddsAllBecomeDurable) {
  {
    auto r = Open();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          const std::string uid = "u" + std::to_string(t) + "-" + std::to_string(i);
          ASSERT_TRUE(r.journal->Add({OwnedPath{OwnedKind::kDir, "pods/" + uid}}).ok());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(r.journal->Entries().size(), 200u);
  }
  EXPECT_EQ(Open().journal->Entries().size(), 200u);
}

TEST_F(OwnershipJournalTest, ManyReleasedEntriesAreCompactedAway) {
  auto r = Open();
  for (int i = 0; i < 1500; ++i) {
    const OwnedPath p{OwnedKind::kDir, "pods/u" + std::to_string(i)};
    ASSERT_TRUE(r.journal->Add({p}).ok());
    ASSERT_TRUE(r.journal->Remove({p}).ok());
  }
  ASSERT_TRUE(r.journal->Add({kPod}).ok());
  const std::string text = FileText();
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 1100);
  r.journal.reset();
  EXPECT_EQ(Open().journal->Entries(), std::vector<OwnedPath>{kPod});
}

// A release the file did not take leaves the paths owned, as the file still lists them: the
// teardown's retry then releases them (RELIABILITY.md, "Disk full and I/O errors", finding 2).
TEST_F(OwnershipJournalTest, AReleaseThatCannotBeWrittenLeavesThePathsOwned) {
  auto r = Open();
  ASSERT_TRUE(r.journal->Add({kPod, kVol}).ok());
  {
    FileSizeLimit full(fs::file_size(file_));
    EXPECT_FALSE(r.journal->Remove({kVol}).ok());
  }
  EXPECT_TRUE(r.journal->Owns(OwnedKind::kVolume, kVol.path));
  EXPECT_EQ(r.journal->Entries(), (std::vector<OwnedPath>{kPod, kVol}));
  ASSERT_TRUE(r.journal->Remove({kVol}).ok());  // the retry
  EXPECT_FALSE(r.journal->Owns(OwnedKind::kVolume, kVol.path));
  r.journal.reset();
  EXPECT_EQ(Open().journal->Entries(), std::vector<OwnedPath>{kPod});
}

}  // namespace
}  // namespace volumemanager
