// Every system call of the core's disk operations failed in turn, LevelDB style: a first set-up,
// an update of a live volume, a teardown, a journal append and reconstruction each run once to
// learn their calls through the Env, then once per call and errno (EIO, ENOSPC and, where a caller
// can see it, EINTR) with that call failed. After each run: nothing outside the volume was touched,
// the journal reads back whole, the volume holds the old content or the new (never a mix), a
// failure is reported with its cause, and the same operation without the fault then ends where it
// should (nothing is left half done that the daemon cannot finish). The subPath copy's test is in
// disk/subpath_update_test.cc (it needs the kubelet's bind mounts).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/volume_inspector.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/reconciler/reconstruct.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;

constexpr char kPlugin[] = "kubernetes.io~configmap";
using Content = std::map<std::string, std::string>;
const Content kOld = {{"a", "old a"}, {"sub/b", "old b"}};
const Content kNew = {{"a", "new a"}, {"sub/b", "new b"}, {"c", "new c"}};

// Everything below `top` but `skip` (and what is below it): type, mode and inode, and of a file
// its size, mtime and bytes, of a link its target. (A dir's own mtime is not: creating and
// removing the pod dir moves its parent's.)
std::map<std::string, std::string> Snapshot(const fs::path& top, const fs::path& skip) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(top); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path& p = it->path();
    if (p == skip) {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    std::ostringstream s;
    s << std::oct << st.st_mode << std::dec << " ino " << st.st_ino;
    if (S_ISREG(st.st_mode)) {
      std::ifstream in(p, std::ios::binary);
      s << " size " << st.st_size << " mtime " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec
        << " bytes " << in.rdbuf();
    } else if (S_ISLNK(st.st_mode)) {
      s << " -> " << fs::read_symlink(p).string();
    }
    out[p.string()] = s.str();
  }
  return out;
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volumemanager-fault-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    top_ = tmpl;
    root_ = top_ + "/root";
    state_ = top_ + "/state";
    fs::create_directories(root_);
    std::ofstream(top_ + "/boot_id") << "boot-1\n";
    std::ofstream(root_ + "/canary") << "not the daemon's";
    // Another pod's volume, the daemon's own: nothing done to pod uid-1 may touch it.
    ASSERT_TRUE(OpenJournal());
    Set(Loc("uid-other", "other"), {{"k", "other"}});
    ASSERT_TRUE(SaveJournal());
  }
  void TearDown() override {
    journal_.reset();
    fs::remove_all(top_);
  }

  bool OpenJournal() {
    journal_.reset();
    auto j = OwnershipJournal::Open(state_, {}, &env_);
    EXPECT_TRUE(j.ok()) << j.status().message();
    if (!j.ok()) return false;
    journal_ = std::move(j->journal);
    return true;
  }
  // The journal as it is now is what each run starts from.
  bool SaveJournal() {
    std::ifstream in(journal_->file(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    saved_journal_ = bytes.str();
    return !saved_journal_.empty();
  }
  void RestoreJournal() {
    journal_.reset();
    for (const auto& e : fs::directory_iterator(state_)) fs::remove(e.path());
    std::ofstream(state_ + "/" + OwnershipJournal::kFileName, std::ios::binary) << saved_journal_;
    ASSERT_TRUE(OpenJournal());
  }
  // What a new start would read of the journal: whole (trusted), and the paths it lists.
  std::map<std::string, OwnedKind> JournalOnDisk() {
    auto read = OwnershipJournal::ReadOnly(state_);
    EXPECT_EQ(read.loaded, OwnershipJournal::Loaded::kTrusted) << read.detail;
    std::map<std::string, OwnedKind> out;
    for (const OwnedPath& p : read.journal->Entries()) out[p.path] = p.kind;
    return out;
  }

  VolumeLocation Loc(const std::string& uid = "uid-1", const std::string& vol = "cfg") const {
    return VolumeLocation{root_, uid, kPlugin, vol};
  }
  SetUpRequest Req(const VolumeLocation& loc, const Content& content) {
    atomicwriter::Payload payload;
    for (const auto& [path, data] : content) payload[path] = {data, 0644, std::nullopt};
    SetUpRequest r{loc, std::move(payload), nullptr, false};
    r.journal = journal_.get();
    r.unpublished_grace = std::chrono::milliseconds(0);
    return r;
  }
  // A set-up that must work (the env unarmed).
  void Set(const VolumeLocation& loc, const Content& content) {
    auto r = SetUpVolume(env_, Req(loc, content));
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  std::string PodDir(const std::string& uid = "uid-1") const { return root_ + "/pods/" + uid; }
  // The operation of the set-up and update tests: volume cfg of pod uid-1 set up with kNew.
  base::Status SetUpNew() {
    auto r = SetUpVolume(env_, Req(Loc(), kNew));
    return r.ok() ? base::Status::OK() : r.status();
  }
  // Where each run of a set-up, update or teardown starts: pod uid-1's dirs gone, the journal as
  // saved, and then, when `content` is given, the volume set up with it.
  void StartFrom(const Content* content) {
    fs::remove_all(PodDir());
    RestoreJournal();
    if (content != nullptr) Set(Loc(), *content);
  }

  // A failed run's message names its cause.
  static void ExpectCauseNamed(const base::Status& s, const atomicwriter::FaultRun& r) {
    EXPECT_NE(s.message().find(std::strerror(r.err)), std::string::npos)
        << r.Describe() << ": " << s.message();
  }

  atomicwriter::FaultInjectionEnv env_{atomicwriter::PosixEnv()};
  std::string top_, root_, state_;
  std::string saved_journal_;
  std::unique_ptr<OwnershipJournal> journal_;
};

TEST_F(FaultTest, AFirstSetUpFailedAtAnyCallLeavesNothingAndIsRetried) {
  const auto outside = Snapshot(root_, PodDir());
  base::Status last;
  auto calls = atomicwriter::FailEachCallInTurn(
      env_, [&] { StartFrom(nullptr); }, [&] { last = SetUpNew(); },
      [&](const atomicwriter::FaultRun& r) {
        SCOPED_TRACE(r.Describe());
        ASSERT_TRUE(r.reached);
        EXPECT_EQ(Snapshot(root_, PodDir()), outside);
        const auto listed = JournalOnDisk();
        if (last.ok()) {
          EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()), kNew);
          EXPECT_EQ(listed.count(Loc().rel()), 1u);
        } else {
          ExpectCauseNamed(last, r);
          EXPECT_FALSE(fs::exists(PodDir())) << "a failed first mount leaves no directory";
        }
        // Without the fault, the same set-up completes.
        Set(Loc(), kNew);
        EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()), kNew);
        EXPECT_EQ(JournalOnDisk().count(Loc().rel()), 1u);
      });
  EXPECT_GT(calls.size(), 20u);
}

TEST_F(FaultTest, AnUpdateFailedAtAnyCallLeavesTheOldContentWholeAndIsRetried) {
  const auto outside = Snapshot(root_, PodDir());
  base::Status last;
  atomicwriter::FailEachCallInTurn(
      env_, [&] { StartFrom(&kOld); }, [&] { last = SetUpNew(); },
      [&](const atomicwriter::FaultRun& r) {
        SCOPED_TRACE(r.Describe());
        ASSERT_TRUE(r.reached);
        EXPECT_EQ(Snapshot(root_, PodDir()), outside);
        EXPECT_EQ(JournalOnDisk().count(Loc().rel()), 1u);
        const Content now = atomicwriter::VisibleContent(Loc().dir());
        if (last.ok()) {
          EXPECT_EQ(now, kNew);
        } else {
          ExpectCauseNamed(last, r);
          EXPECT_EQ(now, kOld) << "a failed write publishes nothing";
        }
        Set(Loc(), kNew);
        EXPECT_EQ(atomicwriter::VisibleContent(Loc().dir()), kNew);
      });
}

TEST_F(FaultTest, ATeardownFailedAtAnyCallKeepsTheVolumeOwnedUntilItIsDone) {
  const auto outside = Snapshot(root_, PodDir());
  base::Status last;
  atomicwriter::FailEachCallInTurn(
      env_, [&] { StartFrom(&kOld); },
      [&] {
        auto r = TearDownVolume(env_, Loc(), *journal_);
        last = !r.ok()                           ? r.status()
               : *r == TearDownOutcome::kRemoved ? base::Status::OK()
                                                 : base::Status::Error("left as not owned");
      },
      [&](const atomicwriter::FaultRun& r) {
        SCOPED_TRACE(r.Describe());
        ASSERT_TRUE(r.reached);
        EXPECT_EQ(Snapshot(root_, PodDir()), outside);
        if (last.ok()) {
          EXPECT_FALSE(fs::exists(Loc().dir()));
          EXPECT_EQ(JournalOnDisk().count(Loc().rel()), 0u);
        } else {
          ExpectCauseNamed(last, r);
          // Not released while anything of it is left: the daemon can still finish the job.
          if (fs::exists(Loc().dir())) {
            EXPECT_EQ(JournalOnDisk().count(Loc().rel()), 1u);
          }
        }
        // Without the fault, the teardown completes: the volume and the pod's dirs are gone.
        auto again = TearDownVolume(env_, Loc(), *journal_);
        ASSERT_TRUE(again.ok()) << again.status().message();
        EXPECT_FALSE(fs::exists(PodDir()));
        EXPECT_EQ(JournalOnDisk().count(Loc().rel()), 0u);
      });
}

TEST_F(FaultTest, AJournalAppendFailedAtAnyCallLeavesTheJournalWhole) {
  const std::vector<OwnedPath> added = {{OwnedKind::kDir, "pods/uid-9"},
                                        {OwnedKind::kVolume, "pods/uid-9/volumes/p/v"}};
  const auto before = JournalOnDisk();
  base::Status last;
  auto calls = atomicwriter::FailEachCallInTurn(
      env_, [&] { RestoreJournal(); }, [&] { last = journal_->Add(added); },
      [&](const atomicwriter::FaultRun& r) {
        SCOPED_TRACE(r.Describe());
        ASSERT_TRUE(r.reached);
        auto after = JournalOnDisk();
        if (last.ok()) {
          EXPECT_EQ(after.size(), before.size() + 2);
          EXPECT_TRUE(journal_->Owns(OwnedKind::kVolume, "pods/uid-9/volumes/p/v"));
        } else {
          ExpectCauseNamed(last, r);
          EXPECT_EQ(after, before) << "no record of a failed append, not even a part";
          EXPECT_FALSE(journal_->Owns(OwnedKind::kVolume, "pods/uid-9/volumes/p/v"));
        }
        ASSERT_TRUE(journal_->Add(added).ok());
        EXPECT_EQ(JournalOnDisk().size(), before.size() + 2);
      });
  EXPECT_EQ(calls, (std::vector<std::string>{"fstat", "write", "fdatasync"}));
}

TEST_F(FaultTest, ReconstructionFailedAtAnyCallNeverReleasesAVolumeThatIsThere) {
  Set(Loc(), kOld);
  ASSERT_TRUE(
      journal_->Add({{OwnedKind::kVolume, "pods/uid-gone/volumes/" + std::string(kPlugin) + "/x"}})
          .ok());
  ASSERT_TRUE(SaveJournal());
  const auto disk = Snapshot(root_, "");
  const std::string present[] = {Loc().rel(), Loc("uid-other", "other").rel()};
  ReconstructResult last;
  atomicwriter::FailEachCallInTurn(
      env_, [&] { RestoreJournal(); },
      [&] { last = ReconstructOwnedVolumes(env_, root_, *journal_, {kPlugin}, top_ + "/boot_id"); },
      [&](const atomicwriter::FaultRun& r) {
        SCOPED_TRACE(r.Describe());
        ASSERT_TRUE(r.reached);
        EXPECT_EQ(Snapshot(root_, ""), disk) << "reconstruction changes nothing on disk";
        EXPECT_EQ(last.foreign, 0) << "a failed call never makes a volume another's";
        EXPECT_TRUE(last.waiting_for_filesystem.empty());
        const auto listed = JournalOnDisk();
        for (const std::string& rel : present) {
          EXPECT_EQ(listed.count(rel), 1u) << rel << " is there: never released";
        }
        const bool all_adopted = last.volumes.size() == 2;
        if (!all_adopted) {
          ASSERT_FALSE(last.problems.empty()) << "a volume not adopted is a problem reported";
          bool named = false;
          for (const std::string& p : last.problems) {
            named = named || p.find(std::strerror(r.err)) != std::string::npos;
          }
          EXPECT_TRUE(named) << last.problems.front();
        }
        // Without the fault: both adopted, the missing one released.
        RestoreJournal();
        ReconstructResult again =
            ReconstructOwnedVolumes(env_, root_, *journal_, {kPlugin}, top_ + "/boot_id");
        EXPECT_EQ(again.volumes.size(), 2u);
        EXPECT_EQ(again.released, 1);
        EXPECT_TRUE(again.problems.empty());
      });
}

}  // namespace
}  // namespace volumemanager
