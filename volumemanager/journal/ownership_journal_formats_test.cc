// Every ownership journal format a release has written, read by today's code
// (testdata/formats/: v1, v2 and v3, each written by the journal code of the last commit of its
// version; testdata/formats/README.md says how). An upgrade keeps what the journal says the daemon
// owns, and nothing else: the volumes recognised, the released pod's dirs and a volume no journal
// names never removed. And a rollback: a journal of a later version than this release's is refused
// as it is.
#include <gtest/gtest.h>
#include <linux/magic.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/test_loop.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/reconciler/reconstruct.h"

#ifndef VM_FORMATS_DIR
#error "VM_FORMATS_DIR: the testdata/formats dir (CMakeLists.txt)"
#endif

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

// What the fixtures hold: pod A's set-up (its dirs, a configMap and a secret volume), owned at
// the end; pod B's, set up then torn down (a `-` record for each of its paths).
const std::string kPodA = "3f1c2a7b-6d2e-4b8e-9d0a-8e3f1c2a7b01";
const std::string kPodB = "3f1c2a7b-6d2e-4b8e-9d0a-8e3f1c2a7b02";
const std::string kCM = "kubernetes.io~configmap";
const std::string kSecret = "kubernetes.io~secret";
// A pod no journal names: the kubelet's.
const std::string kPodC = "3f1c2a7b-6d2e-4b8e-9d0a-8e3f1c2a7b03";

std::vector<OwnedPath> OwnedAtTheEnd() {
  return {
      {OwnedKind::kDir, OwnershipJournal::PodPath(kPodA)},
      {OwnedKind::kDir, OwnershipJournal::PodVolumesPath(kPodA)},
      {OwnedKind::kDir, OwnershipJournal::PluginPath(kPodA, kCM)},
      {OwnedKind::kVolume, OwnershipJournal::VolumePath(kPodA, kCM, "app-config")},
      {OwnedKind::kDir, OwnershipJournal::PluginPath(kPodA, kSecret)},
      {OwnedKind::kVolume, OwnershipJournal::VolumePath(kPodA, kSecret, "creds")},
  };
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every file and dir below `dir` with its content: what "left in place" compares.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out[e.path().string()] = e.is_regular_file() ? ReadText(e.path().string()) : "<dir>";
  }
  return out;
}

class JournalFormatsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    state_ = tmp_.File("state");
    root_ = tmp_.File("root");
    fs::create_directories(state_);
    fs::create_directories(root_);
    fixture_ =
        ReadText(std::string(VM_FORMATS_DIR) + "/ownership.journal.v" + std::to_string(GetParam()));
    ASSERT_TRUE(
        fixture_.starts_with("volumemanager-ownership v" + std::to_string(GetParam()) + "\n"))
        << fixture_;
    std::ofstream(state_ + "/" + OwnershipJournal::kFileName) << fixture_;
  }
  // A volume dir on disk with one file, as a writer left it.
  void PlantVolume(const std::string& uid, const std::string& plugin, const std::string& name) {
    const std::string dir = root_ + "/" + OwnershipJournal::VolumePath(uid, plugin, name);
    fs::create_directories(dir);
    std::ofstream(dir + "/key") << uid << "/" << name;
  }

  vmtest::TempDir tmp_;
  std::string state_;
  std::string root_;
  std::string fixture_;
};

INSTANTIATE_TEST_SUITE_P(EveryVersion, JournalFormatsTest, ::testing::Values(1, 2, 3),
                         [](const auto& version) { return "v" + std::to_string(version.param); });

TEST_P(JournalFormatsTest, IsTrustedWithWhatItOwnsAndRewrittenInTodaysFormat) {
  const int version = GetParam();
  auto r = OwnershipJournal::Open(state_, "/var/lib/kubelet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->loaded, OwnershipJournal::Loaded::kTrusted) << r->detail;
  std::vector<OwnedPath> want = OwnedAtTheEnd();
  std::sort(want.begin(), want.end(),
            [](const OwnedPath& a, const OwnedPath& b) { return a.path < b.path; });
  EXPECT_EQ(r->journal->Entries(), want);
  // Pod B was torn down: none of its paths is owned.
  EXPECT_TRUE(r->journal->EntriesOfPod(kPodB).empty());
  EXPECT_FALSE(r->journal->Owns(OwnedKind::kDir, OwnershipJournal::PodPath(kPodB)));
  // The identity: none in v1, the recorded ext4 root from v2 on.
  const RootIdentity id = r->journal->identity();
  if (version == 1) {
    EXPECT_FALSE(id.known());
  } else {
    EXPECT_EQ(id.fs_magic, EXT4_SUPER_MAGIC);
    EXPECT_EQ(id.fs_id, 0x38e8618577f245cbULL);
    EXPECT_EQ(id.boot_id, "465cdd80-5d1b-4b8e-9d0a-8e3f1c2a7b6d");
  }
  // Volume identities: v3's `@` lines; unknown (0) before.
  const std::string app = OwnershipJournal::VolumePath(kPodA, kCM, "app-config");
  const std::string creds = OwnershipJournal::VolumePath(kPodA, kSecret, "creds");
  EXPECT_EQ(r->journal->VolumeInode(app), version == 3 ? 1572869u : 0u);
  EXPECT_EQ(r->journal->VolumeInode(creds), version == 3 ? 1572877u : 0u);
  r->journal.reset();
  // Rewritten as today's version, at once, with the same content.
  const std::string text = ReadText(state_ + "/" + OwnershipJournal::kFileName);
  EXPECT_TRUE(text.starts_with("volumemanager-ownership v" +
                               std::to_string(OwnershipJournal::kVersion) + "\n"))
      << text;
  EXPECT_NE(text.find(" = root "), std::string::npos) << text;
  EXPECT_FALSE(
      fs::exists(state_ + "/" + OwnershipJournal::kFileName + OwnershipJournal::kRejectedSuffix));
  auto again = OwnershipJournal::Open(state_, "/var/lib/kubelet");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->loaded, OwnershipJournal::Loaded::kTrusted) << again->detail;
  EXPECT_EQ(again->journal->Entries(), want);
  EXPECT_EQ(again->journal->VolumeInode(app), version == 3 ? 1572869u : 0u);
}

// The root dir is the one the journal was kept for (read as this temporary root): the volumes it
// lists are recognised, and a teardown of everything removes only those.
TEST_P(JournalFormatsTest, ReconstructionAdoptsItsVolumesAndTeardownRemovesNothingElse) {
  const int version = GetParam();
  PlantVolume(kPodA, kCM, "app-config");
  PlantVolume(kPodA, kSecret, "creds");
  PlantVolume(kPodB, kCM, "app-config");  // released in the journal: now the kubelet's
  PlantVolume(kPodC, kCM, "web");         // never in a journal
  const auto others = [&] {
    auto b = Snapshot(root_ + "/pods/" + kPodB);
    auto c = Snapshot(root_ + "/pods/" + kPodC);
    b.insert(c.begin(), c.end());
    return b;
  };
  const auto others_before = others();
  auto r = OwnershipJournal::Open(state_);  // the recorded root dir not compared (read as root_)
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->loaded, OwnershipJournal::Loaded::kTrusted) << r->detail;
  OwnershipJournal& journal = *r->journal;
  const std::set<std::string> plugins = {kCM, kSecret};
  if (version >= 2) {
    // As recorded (an ext4 disk this machine does not have on root_): the daemon waits for it
    // and adopts and releases nothing.
    ReconstructResult waiting =
        ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, journal, plugins);
    EXPECT_FALSE(waiting.waiting_for_filesystem.empty());
    EXPECT_TRUE(waiting.volumes.empty());
    EXPECT_EQ(waiting.released, 0);
    EXPECT_EQ(journal.Entries().size(), OwnedAtTheEnd().size());
    // The recorded filesystem is root_'s from here on.
    auto found = RootIdentity::Probe(*atomicwriter::PosixEnv(), root_);
    ASSERT_TRUE(found.ok()) << found.status().message();
    ASSERT_TRUE(journal.SetIdentity(*found).ok());
  }
  ReconstructResult rec =
      ReconstructOwnedVolumes(*atomicwriter::PosixEnv(), root_, journal, plugins);
  EXPECT_TRUE(rec.waiting_for_filesystem.empty()) << rec.waiting_for_filesystem;
  std::set<std::string> adopted;
  for (const FoundVolume& v : rec.volumes) {
    EXPECT_EQ(v.pod_uid, kPodA);
    adopted.insert(v.plugin_dir + "/" + v.volume_name);
  }
  if (version < 3) {
    // No recorded inode: each volume on its pod dir's mount and the root's filesystem is the
    // daemon's, and its inode is recorded now.
    EXPECT_EQ(adopted, (std::set<std::string>{kCM + "/app-config", kSecret + "/creds"}));
    EXPECT_EQ(rec.foreign, 0);
    EXPECT_NE(journal.VolumeInode(OwnershipJournal::VolumePath(kPodA, kCM, "app-config")), 0u);
  } else {
    // The recorded inodes are the fixture machine's, not these dirs': not the dirs the daemon
    // made, so released and left in place.
    EXPECT_TRUE(adopted.empty());
    EXPECT_EQ(rec.foreign, 2);
  }
  // Every pod gone: teardown of every volume on disk, as the reconciler would try.
  for (const auto& [uid, plugin, name] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{kPodA, kCM, "app-config"},
                                                                      {kPodA, kSecret, "creds"},
                                                                      {kPodB, kCM, "app-config"},
                                                                      {kPodC, kCM, "web"}}) {
    SCOPED_TRACE(uid + "/" + plugin + "/" + name);
    auto torn = TearDownVolume(*atomicwriter::PosixEnv(), VolumeLocation{root_, uid, plugin, name},
                               journal);
    ASSERT_TRUE(torn.ok()) << torn.status().message();
    const bool owned = uid == kPodA && version < 3;
    EXPECT_EQ(*torn, owned ? TearDownOutcome::kRemoved : TearDownOutcome::kNotOwned);
    EXPECT_EQ(fs::exists(root_ + "/" + OwnershipJournal::VolumePath(uid, plugin, name)), !owned);
  }
  for (const std::string& uid : {kPodA, kPodB, kPodC}) {
    EXPECT_TRUE(RemoveOwnedEmptyPodDirs(*atomicwriter::PosixEnv(), root_, uid, journal).ok());
  }
  EXPECT_EQ(fs::exists(root_ + "/pods/" + kPodA), version == 3);
  EXPECT_EQ(others(), others_before) << "a path the journal does not own was changed";
}

// A rollback: a journal of a later version (a newer release's) is neither trusted, set aside nor
// replaced: Open fails naming the file and the version, and the file stays byte for byte.
TEST(JournalRollbackTest, ALaterVersionIsRefusedAndLeftInPlace) {
  vmtest::TempDir tmp;
  const std::string& state = tmp.path();
  const std::string file = state + "/" + OwnershipJournal::kFileName;
  const std::string later = std::to_string(OwnershipJournal::kVersion + 1);
  // Today's journal under a later header: what the next version may well look like.
  std::string text = ReadText(std::string(VM_FORMATS_DIR) + "/ownership.journal.v3");
  text = "volumemanager-ownership v" + later + "\n" + text.substr(text.find('\n') + 1);
  for (const std::string& version : {later, std::string("10"), std::string("123456789012")}) {
    SCOPED_TRACE(version);
    const std::string newer =
        "volumemanager-ownership v" + version + "\n" + text.substr(text.find('\n') + 1);
    std::ofstream(file, std::ios::trunc) << newer;
    auto r = OwnershipJournal::Open(state, "/var/lib/kubelet");
    ASSERT_FALSE(r.ok()) << "a newer release's journal was opened";
    const std::string message = r.status().message();
    EXPECT_NE(message.find(file + ": ownership journal format version " + version +
                           " is newer than this release reads (versions 1 to " +
                           std::to_string(OwnershipJournal::kVersion) + ")"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Refusing to start"), std::string::npos) << message;
    EXPECT_EQ(ReadText(file), newer) << "the journal was changed";
    // Nothing beside it: not set aside, no temporary file.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(state)) names.push_back(e.path().filename());
    EXPECT_EQ(names, std::vector<std::string>{OwnershipJournal::kFileName});
    // Observe mode writes nothing anyway: it owns nothing, says why, and changes nothing.
    OwnershipJournal::OpenResult ro = OwnershipJournal::ReadOnly(state, "/var/lib/kubelet");
    EXPECT_EQ(ro.loaded, OwnershipJournal::Loaded::kRejected);
    EXPECT_TRUE(ro.journal->Entries().empty());
    EXPECT_NE(ro.detail.find("format version " + version + " is newer"), std::string::npos)
        << ro.detail;
    EXPECT_EQ(ReadText(file), newer);
  }
  // Versions that are no later release's stay corrupt (set aside, owning nothing), as before.
  for (const std::string& bad : {std::string("0"), std::string("03"), std::string("4x")}) {
    SCOPED_TRACE(bad);
    std::ofstream(file, std::ios::trunc)
        << "volumemanager-ownership v" + bad + "\n" + text.substr(text.find('\n') + 1);
    auto r = OwnershipJournal::Open(state, "/var/lib/kubelet");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->loaded, OwnershipJournal::Loaded::kRejected);
    EXPECT_TRUE(fs::exists(file + OwnershipJournal::kRejectedSuffix));
    r->journal.reset();
    fs::remove(file + OwnershipJournal::kRejectedSuffix);
  }
}

}  // namespace
}  // namespace volumemanager
