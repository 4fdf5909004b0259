#include "atomicwriter/atomic_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/volume_inspector.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

// Every path of a payload plus all of its ancestor directories: what the live version dir must
// hold exactly (docs/kubelet-behavior.md §2 step 3's "keep" set).
std::set<std::string> KeepSet(const Payload& payload) {
  std::set<std::string> keep;
  for (const auto& [raw, file] : payload) {
    const std::string p = CleanPath(raw);
    for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1)) {
      keep.insert(p.substr(0, slash));
    }
    keep.insert(p);
  }
  return keep;
}

struct UpdateCase {
  const char* name;
  Payload first;
  Payload next;
  bool new_version;  // whether the second write publishes a new version
};

// docs/kubelet-behavior.md §2.2: update vectors, removal-set vectors and top-level link vectors:
// after each write the volume shows exactly the payload, the live dir holds exactly its paths, and
// the top-level entries are exactly its first components.
TEST_F(WriterTest, UpdateVectors) {
  const UpdateCase cases[] = {
      {"same_flat", MakePayload({{"foo", "foo"}, {"bar", "bar"}}),
       MakePayload({{"foo", "foo"}, {"bar", "bar"}}), false},
      {"same_nested", MakePayload({{"foo/bar.txt", "foo"}, {"bar/zab.txt", "bar"}}),
       MakePayload({{"foo/bar.txt", "foo"}, {"bar/zab.txt", "bar"}}), false},
      {"content_and_modes", MakePayload({{"foo", "foo"}, {"bar", "bar"}}),
       [] {
         Payload p = MakePayload({{"foo", "foo2"}, {"bar", "bar2"}});
         p["bar"].mode = 0640;
         return p;
       }(),
       true},
      {"add_deep_link", MakePayload({{"foo/bar.txt", "foo"}, {"bar/zab.txt", "bar"}}),
       MakePayload(
           {{"foo/bar.txt", "foo"}, {"bar/zab.txt", "bar"}, {"blu/two/2/3/4/5/zip.txt", "zip"}}),
       true},
      {"remove_link", MakePayload({{"foo/bar.txt", "foo"}, {"bar/1/2/3/zab.txt", "bar"}}),
       MakePayload({{"foo/bar.txt", "foo"}}), true},
      {"keep_link_when_sibling_remains",
       MakePayload(
           {{"foo/bar.txt", "foo"}, {"bar/1/2/sip.txt", "sip"}, {"bar/1/2/3/zab.txt", "z"}}),
       MakePayload({{"foo/bar.txt", "foo"}, {"bar/1/2/sip.txt", "sip"}}), true},
      {"to_empty", MakePayload({{"foo", "1"}, {"bar", "2"}, {"baz/x", "3"}}), Payload{}, true},
      {"swap_top_level", MakePayload({{"foo/bar.txt", "x"}}), MakePayload({{"bar/baz.txt", "x"}}),
       true},
      {"removal_flat", MakePayload({{"foo.txt", "f"}, {"bar.txt", "b"}}),
       MakePayload({{"foo.txt", "f"}}), true},
      {"removal_one_level", MakePayload({{"foo.txt", "f"}, {"zip/bar.txt", "b"}}),
       MakePayload({{"foo.txt", "f"}}), true},
      {"removal_two_levels", MakePayload({{"foo.txt", "f"}, {"zip/zap/bar.txt", "b"}}),
       MakePayload({{"foo.txt", "f"}}), true},
      {"removal_partial_subtree",
       MakePayload({{"foo.txt", "f"},
                    {"zap/1/2/3/4/bar.txt", "b"},
                    {"zap/1/2/c/bar.txt", "c"},
                    {"zap/1/2/magic.txt", "m"}}),
       MakePayload({{"foo.txt", "f"}, {"zap/1/2/magic.txt", "m"}}), true},
      {"links_flat", Payload{}, MakePayload({{"foo", "f"}, {"bar", "b"}}), true},
      {"links_nested", Payload{}, MakePayload({{"foo/bar", "f"}, {"bar/txt", "b"}}), true},
      {"links_cleaned", Payload{}, MakePayload({{"./bar", "b"}, {"foo///bar", "f"}}), true},
      {"mode_only_change_does_not_rewrite", MakePayload({{"foo", "foo"}}, 0644),
       MakePayload({{"foo", "foo"}}, 0600), false},
      {"file_becomes_dir", MakePayload({{"a", "file"}}), MakePayload({{"a/b", "nested"}}), true},
      {"dir_becomes_file", MakePayload({{"a/b", "nested"}}), MakePayload({{"a", "file"}}), true},
  };
  for (const UpdateCase& c : cases) {
    SCOPED_TRACE(c.name);
    TearDown();
    SetUp();
    auto w = OpenWriter();
    ASSERT_NE(w, nullptr);

    auto r1 = w->Write(c.first);
    ASSERT_TRUE(r1.ok()) << r1.status().message();
    EXPECT_TRUE(r1->published);
    EXPECT_EQ(LiveTsDir(), r1->ts_dir);
    EXPECT_EQ(VisibleContent(vol_), ExpectedContent(c.first));
    EXPECT_EQ(DescribeDebris(vol_, c.first), "");
    EXPECT_EQ(LiveTree(), KeepSet(c.first));

    auto r2 = w->Write(c.next);
    ASSERT_TRUE(r2.ok()) << r2.status().message();
    EXPECT_EQ(r2->published, c.new_version);
    EXPECT_EQ(LiveTsDir(), r2->ts_dir);
    if (!c.new_version) {
      EXPECT_EQ(r2->ts_dir, r1->ts_dir);
    }
    EXPECT_EQ(VisibleContent(vol_), ExpectedContent(c.next));
    EXPECT_EQ(DescribeDebris(vol_, c.next), "");
    EXPECT_EQ(LiveTree(), KeepSet(c.next));
    if (c.new_version) {
      std::map<std::string, mode_t> modes;
      for (const auto& [raw, file] : c.next) modes[CleanPath(raw)] = file.mode;
      for (const auto& [path, file] : ReadVisibleFiles(vol_)) {
        EXPECT_EQ(file.mode, modes[path]) << path;
      }
    }
  }
}

TEST_F(WriterTest, SuccessiveModesAreEachObservedExactly) {
  auto w = OpenWriter();
  const mode_t modes[] = {0644, 0400, 0600, 0755};
  int version = 0;
  for (mode_t mode : modes) {
    Payload p = MakePayload({{"foo", "v" + std::to_string(++version)}, {"dir/bar", "x"}}, mode);
    p["dir/bar"].data += std::to_string(version);
    ASSERT_TRUE(w->Write(p).ok());
    for (const auto& [path, file] : ReadVisibleFiles(vol_)) {
      EXPECT_EQ(file.mode, mode) << path << " v" << version;
    }
  }
}

TEST_F(WriterTest, ModesIgnoreTheUmaskAndDirsFollowTheSpec) {
  const mode_t old_umask = ::umask(0077);
  auto w = OpenWriter();
  Payload p = MakePayload({{"open", "o"}, {"nested/dir/f", "n"}}, 0777);
  p["private"] = FileProjection{"p", 0400, std::nullopt};
  auto r = w->Write(p);
  ::umask(old_umask);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto files = ReadVisibleFiles(vol_);
  EXPECT_EQ(files["open"].mode, 0777u);
  EXPECT_EQ(files["nested/dir/f"].mode, 0777u);
  EXPECT_EQ(files["private"].mode, 0400u);

  struct stat st {};
  ASSERT_EQ(::stat((vol_ + "/" + r->ts_dir).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // forced by chmod
  ASSERT_EQ(::stat((vol_ + "/" + r->ts_dir + "/nested").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777,
            0700u);  // requested 0777, umask applies (docs/kubelet-behavior.md §1.2)
}

TEST_F(WriterTest, TimestampDirNameIsUtcWithDigitSuffix) {
  Options o = SoleWriter();
  // 2024-05-02 10:15:07 UTC.
  o.now = [] { return std::chrono::system_clock::from_time_t(1714644907); };
  auto w = OpenWriter(o);
  auto r = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::regex_match(r->ts_dir, std::regex(R"(\.\.2024_05_02_10_15_07\.[0-9]{1,10})")))
      << r->ts_dir;
  // Target is the bare name: relative, no trailing slash.
  EXPECT_EQ(LiveTsDir(), r->ts_dir);
  // Top-level link targets.
  EXPECT_EQ(fs::read_symlink(fs::path(vol_) / "a").string(), "..data/a");
}

TEST_F(WriterTest, EmptyPayloadStillPublishesData) {
  auto w = OpenWriter();
  auto r = w->Write(Payload{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->published);
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / "..data"));
  EXPECT_TRUE(fs::is_empty(fs::path(vol_) / r->ts_dir));
  EXPECT_EQ(DescribeDebris(vol_, Payload{}), "");
  // A second empty write changes nothing.
  auto r2 = w->Write(Payload{});
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->published);
  EXPECT_EQ(r2->ts_dir, r->ts_dir);
}

TEST_F(WriterTest, BinaryBytesAreVerbatim) {
  auto w = OpenWriter();
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  Payload p = MakePayload({{"bin", bytes}, {"empty", ""}, {"no-newline", "x"}});
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
}

TEST_F(WriterTest, OpenFailsOnMissingDirAndCreatesNothing) {
  auto r = AtomicWriter::Open(root_ + "/missing");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().sys_errno(), ENOENT);
  EXPECT_NE(r.status().message().find(root_ + "/missing"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ + "/missing"));
}

TEST_F(WriterTest, OpenRefusesASymlinkedVolumeDir) {
  fs::create_directory_symlink(vol_, root_ + "/link");
  auto r = AtomicWriter::Open(root_ + "/link");
  EXPECT_FALSE(r.ok());
}

TEST_F(WriterTest, InvalidPathRejectsTheWholeWriteAndTouchesNothing) {
  auto w = OpenWriter();
  ASSERT_TRUE(w->Write(MakePayload({{"keep", "k"}})).ok());
  const auto before = SnapshotTree(vol_);
  auto r = w->Write(MakePayload({{"foo", "f"}, {"..bar", "b"}, {"binary.bin", "x"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "invalid path: must not start with '..': ..bar");
  EXPECT_EQ(SnapshotTree(vol_), before);
}

TEST_F(WriterTest, FileAndDirectoryAtOnePathIsRejected) {
  auto w = OpenWriter();
  auto r = w->Write(MakePayload({{"a", "file"}, {"a/b", "nested"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "invalid payload: \"a\" is both a file and a directory");
  EXPECT_TRUE(fs::is_empty(vol_));
}

TEST_F(WriterTest, OwnerUidIsApplied) {
  auto w = OpenWriter();
  Payload p = MakePayload({{"token", "t"}, {"plain", "p"}});
  p["token"].fs_user = 1000;
  auto r = w->Write(p);
  if (::geteuid() == 0) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto files = ReadVisibleFiles(vol_);
    EXPECT_EQ(files["token"].uid, 1000u);
    EXPECT_EQ(files["plain"].uid, 0u);
  } else {
    // Unprivileged: chown to another uid must fail the write, and leave nothing published.
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().sys_errno(), EPERM);
    EXPECT_EQ(LiveTsDir(), "");
  }
}

TEST_F(WriterTest, PermissionCallbackRunsBeforePublishOnlyForNewVersions) {
  auto w = OpenWriter();
  int calls = 0;
  std::string seen_ts;
  PermissionCallback cb = [&](Env& f, int dir_fd, const std::string& ts) {
    ++calls;
    seen_ts = ts;
    // Runs before publish: ..data does not point at the new dir yet.
    EXPECT_NE(LiveTsDir(), ts);
    return f.FchmodAt(dir_fd, ts + "/a", 0440, 0) == 0 ? base::Status::OK()
                                                       : base::Status::Error("chmod", errno);
  };
  auto r = w->Write(MakePayload({{"a", "1"}}), cb);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_ts, r->ts_dir);
  EXPECT_EQ(ReadVisibleFiles(vol_)["a"].mode, 0440u);
  ASSERT_TRUE(w->Write(MakePayload({{"a", "1"}}), cb).ok());
  EXPECT_EQ(calls, 1);  // no change: no new version, no ownership pass
}

TEST_F(WriterTest, FailingPermissionCallbackKeepsThePublishedVersion) {
  auto w = OpenWriter();
  Payload v1 = MakePayload({{"a", "1"}, {"b", "1"}});
  ASSERT_TRUE(w->Write(v1).ok());
  auto r = w->Write(MakePayload({{"a", "2"}, {"c", "2"}}), [](Env&, int, const std::string&) {
    return base::Status::Error("ownership pass failed");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "ownership pass failed");
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v1));
  EXPECT_EQ(DescribeDebris(vol_, v1), "");
}

TEST_F(WriterTest, CrashDebrisIsRemovedEvenByANoChangeWrite) {
  auto w = OpenWriter();
  Payload p = MakePayload({{"a", "1"}, {"dir/b", "2"}});
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok());
  const fs::path v(vol_);
  // What crashes at each step of an earlier write leave behind.
  fs::create_directory(v / "..2020_01_01_00_00_00.11");  // unpublished version
  std::ofstream(v / "..2020_01_01_00_00_00.11" / "a") << "old";
  fs::create_directory(v / "..2020_01_01_00_00_00.22");
  fs::create_directory_symlink("..2020_01_01_00_00_00.22", v / "..volumemanager_tmp.0123abcd");
  fs::create_symlink("..data/gone", v / "gone");        // dangling top-level
  fs::create_directory(v / "nested-mount");             // not the writer's: must stay
  fs::create_symlink("elsewhere", v / "foreign-link");  // not the writer's: must stay

  auto r2 = w->Write(p);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_FALSE(r2->published);
  EXPECT_EQ(r2->ts_dir, r->ts_dir);
  EXPECT_EQ(DotDotEntries(), std::set<std::string>{r->ts_dir});
  EXPECT_FALSE(fs::exists(fs::symlink_status(v / "gone")));
  EXPECT_TRUE(fs::is_directory(v / "nested-mount"));
  EXPECT_TRUE(fs::is_symlink(v / "foreign-link"));
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
}

TEST_F(WriterTest, TheKubeletsStageLinkNeverBlocksAWriteAndIsNeverTouched) {
  // ..data_tmp is where the kubelet's writer stages: a stale one (a crash of the kubelet) must
  // not block this writer, and a live one (the kubelet mid-write) must survive every write.
  auto w = OpenWriter();
  ASSERT_TRUE(w->Write(MakePayload({{"a", "1"}})).ok());
  const fs::path stage = fs::path(vol_) / "..data_tmp";
  fs::create_symlink("..2020_01_01_00_00_00.1", stage);
  for (const Payload& p : {MakePayload({{"a", "2"}}), MakePayload({{"a", "2"}})}) {
    auto r = w->Write(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
    EXPECT_EQ(DescribeDebris(vol_, p), "");
    ASSERT_TRUE(fs::is_symlink(fs::symlink_status(stage)));
    EXPECT_EQ(fs::read_symlink(stage), "..2020_01_01_00_00_00.1");
  }
}

TEST_F(WriterTest, MissingTopLevelLinksAreRepairedWithoutANewVersion) {
  // Upstream issue 121472: a restart between publish and link creation.
  auto w = OpenWriter();
  Payload p = MakePayload({{"a", "1"}, {"b/c", "2"}});
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok());
  fs::remove(fs::path(vol_) / "a");
  fs::remove(fs::path(vol_) / "b");
  auto r2 = w->Write(p);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->published);
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
  EXPECT_EQ(DescribeDebris(vol_, p), "");
}

TEST_F(WriterTest, DanglingDataLinkGetsANewVersion) {
  auto w = OpenWriter();
  Payload p = MakePayload({{"a", "1"}});
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok());
  fs::remove_all(fs::path(vol_) / r->ts_dir);
  auto r2 = w->Write(p);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->published);
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
  EXPECT_EQ(DescribeDebris(vol_, p), "");
}

TEST_F(WriterTest, DataThatIsNotASymlinkIsReplaced) {
  for (bool as_dir : {false, true}) {
    SCOPED_TRACE(as_dir ? "dir" : "file");
    TearDown();
    SetUp();
    const fs::path v(vol_);
    if (as_dir) {
      fs::create_directory(v / "..data");
      std::ofstream(v / "..data" / "a") << "junk";
    } else {
      std::ofstream(v / "..data") << "junk";
    }
    auto w = OpenWriter();
    Payload p = MakePayload({{"a", "1"}});
    auto r = w->Write(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
    EXPECT_EQ(DescribeDebris(vol_, p), "");
  }
}

TEST_F(WriterTest, ExistingEntryAtATopLevelNameIsLeftAlone) {
  // A nested volume mounted beneath this one: docs/kubelet-behavior.md §2 step 10 leaves it
  // untouched.
  const fs::path v(vol_);
  fs::create_directory(v / "sub");
  std::ofstream(v / "sub" / "mounted") << "other volume";
  auto w = OpenWriter();
  ASSERT_TRUE(w->Write(MakePayload({{"sub/x", "1"}, {"top", "t"}})).ok());
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(v / "sub")));
  EXPECT_TRUE(fs::exists(v / "sub" / "mounted"));
  ASSERT_TRUE(w->Write(MakePayload({{"top", "t2"}})).ok());
  EXPECT_TRUE(fs::exists(v / "sub" / "mounted"));  // not ours: never pruned
}

TEST_F(WriterTest, DurabilitySyncsOnlyWhenAsked) {
  for (bool durable : {false, true}) {
    SCOPED_TRACE(durable);
    TearDown();
    SetUp();
    FaultInjectionEnv counting(PosixEnv());
    Options o = SoleWriter();
    o.fs = &counting;
    o.durable = durable;
    auto w = OpenWriter(o);
    ASSERT_TRUE(w->Write(MakePayload({{"a", "1"}, {"d/b", "2"}})).ok());
    if (durable) {
      // Two files, the nested dir, the new dir and the volume dir.
      EXPECT_EQ(counting.fsync_calls(), 5);
    } else {
      EXPECT_EQ(counting.fsync_calls(), 0);
    }
  }
}

TEST_F(WriterTest, WritersOfOneVolumeInSequenceAgree) {
  // A new writer (e.g. after a daemon restart) adopts the version an earlier one published.
  Payload p = MakePayload({{"a", "1"}});
  std::string ts;
  {
    auto w = OpenWriter();
    auto r = w->Write(p);
    ASSERT_TRUE(r.ok());
    ts = r->ts_dir;
  }
  auto w = OpenWriter();
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->published);
  EXPECT_EQ(r->ts_dir, ts);
}

}  // namespace
}  // namespace atomicwriter

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

TEST_F(SharedWriterTest, AnUnpublishedVersionStaysUntilSeenForTheGracePeriod) {
  auto w = OpenWriter(Shared());
  Payload p = MakePayload({{"a", "1"}});
  auto r1 = w->Write(p);
  ASSERT_TRUE(r1.ok());
  // Another writer's write in progress: its version dir, not yet published.
  const fs::path other = fs::path(vol_) / "..2020_01_01_00_00_00.77";
  fs::create_directory(other);
  std::ofstream(other / "a") << "theirs";

  auto r2 = w->Write(p);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->awaiting_grace, 1);
  EXPECT_TRUE(fs::exists(other));

  now_ += std::chrono::seconds(29);
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_TRUE(fs::exists(other)) << "removed before the grace period ran out";

  now_ += std::chrono::seconds(1);
  auto r3 = w->Write(p);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->awaiting_grace, 0);
  EXPECT_FALSE(fs::exists(other));
  EXPECT_EQ(DescribeDebris(vol_, p), "");
}

TEST_F(SharedWriterTest, ADirStillBeingWrittenRestartsItsGracePeriod) {
  auto w = OpenWriter(Shared());
  Payload p = MakePayload({{"a", "1"}});
  ASSERT_TRUE(w->Write(p).ok());
  const fs::path other = fs::path(vol_) / "..2020_01_01_00_00_00.78";
  fs::create_directory(other);
  ASSERT_TRUE(w->Write(p).ok());
  now_ += std::chrono::seconds(20);
  // The other writer creates a file in it: its ctime moves, so it is still in progress.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(other / "b") << "more";
  ASSERT_TRUE(w->Write(p).ok());
  now_ += std::chrono::seconds(20);  // 40 s since first seen, 20 s since it last changed
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_TRUE(fs::exists(other));
  now_ += std::chrono::seconds(10);
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_FALSE(fs::exists(other));
}

// The kubelet's write of an item "a/b/c" stalled inside a nested subdir: only a/b's ctime moves,
// the version dir's does not. Its tree changed, so its grace period starts again.
TEST_F(SharedWriterTest, ADirStillBeingWrittenInANestedSubdirRestartsItsGracePeriod) {
  auto w = OpenWriter(Shared());
  Payload p = MakePayload({{"a", "1"}});
  ASSERT_TRUE(w->Write(p).ok());
  const fs::path other = fs::path(vol_) / "..2020_01_01_00_00_00.78";
  fs::create_directories(other / "a" / "b");
  std::ofstream(other / "a" / "b" / "c0") << "x";
  ASSERT_TRUE(w->Write(p).ok());
  now_ += std::chrono::seconds(20);
  std::ofstream(other / "a" / "b" / "c1") << "x";  // 20 s in
  ASSERT_TRUE(w->Write(p).ok());
  now_ += std::chrono::seconds(20);
  std::ofstream(other / "a" / "b" / "c2") << "x";  // 40 s in
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_TRUE(fs::exists(other / "a" / "b" / "c2")) << "removed while written, 40 s in";
  now_ += std::chrono::seconds(20);  // 20 s after the last change
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_TRUE(fs::exists(other)) << "removed 20 s after a change in its tree";
  now_ += std::chrono::seconds(10);
  ASSERT_TRUE(w->Write(p).ok());
  EXPECT_FALSE(fs::exists(other)) << "a grace period after its last change";
}

TEST_F(SharedWriterTest, TheReplacedVersionIsKeptForTheGracePeriodThenRemoved) {
  // Another writer may have read ..data just before this write swapped it, and be comparing
  // against the old version's files right now: the old version is not removed at once.
  auto w = OpenWriter(Shared());
  auto r1 = w->Write(MakePayload({{"a", "1"}}));
  ASSERT_TRUE(r1.ok());
  now_ += std::chrono::hours(1);  // long after r1 was first written
  Payload v2 = MakePayload({{"a", "2"}});
  auto r2 = w->Write(v2);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->published);
  EXPECT_EQ(r2->awaiting_grace, 1);
  EXPECT_TRUE(fs::is_directory(fs::path(vol_) / r1->ts_dir));
  now_ += std::chrono::seconds(31);
  auto r3 = w->Write(v2);
  ASSERT_TRUE(r3.ok());
  EXPECT_FALSE(fs::exists(fs::path(vol_) / r1->ts_dir));
  EXPECT_EQ(DescribeDebris(vol_, v2), "");
}

TEST_F(SharedWriterTest, AVersionPublishedByAnotherWriterIsNeverRemoved) {
  auto w = OpenWriter(Shared());
  Payload p = MakePayload({{"a", "1"}});
  ASSERT_TRUE(w->Write(p).ok());
  const fs::path theirs = fs::path(vol_) / "..2020_01_01_00_00_00.79";
  fs::create_directory(theirs);
  std::ofstream(theirs / "a") << "1";
  ASSERT_TRUE(w->Write(p).ok());  // first seen unpublished
  // The other writer publishes it.
  fs::create_symlink(theirs.filename(), fs::path(vol_) / "..swap");
  fs::rename(fs::path(vol_) / "..swap", fs::path(vol_) / "..data");
  now_ += std::chrono::minutes(5);
  auto r = w->Write(p);  // the same bytes: nothing to publish; theirs is live
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->published);
  EXPECT_EQ(r->ts_dir, theirs.filename().string());
  EXPECT_TRUE(fs::is_directory(theirs));
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(p));
}

TEST_F(SharedWriterTest, StagesUnderItsOwnNameAndNeverTouchesTheKubeletsStagingLink) {
  // Records every name the writer creates, renames or removes in the volume dir.
  class Recording : public FaultInjectionEnv {
   public:
    using FaultInjectionEnv::FaultInjectionEnv;
    int SymlinkAt(const std::string& t, int fd, const std::string& link) override {
      names.push_back("symlink " + link);
      return FaultInjectionEnv::SymlinkAt(t, fd, link);
    }
    int RenameAt(int a, const std::string& from, int b, const std::string& to) override {
      names.push_back("rename " + from + " " + to);
      return FaultInjectionEnv::RenameAt(a, from, b, to);
    }
    int UnlinkAt(int fd, const std::string& name, int flags) override {
      names.push_back("unlink " + name);
      return FaultInjectionEnv::UnlinkAt(fd, name, flags);
    }
    std::vector<std::string> names;
  };
  Recording rec(PosixEnv());
  Options o = Shared();
  o.fs = &rec;
  auto w = OpenWriter(o);
  fs::create_symlink("..2020_01_01_00_00_00.1", fs::path(vol_) / "..data_tmp");
  std::set<std::string> staging;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(w->Write(MakePayload({{"a", std::to_string(i)}})).ok());
  }
  for (const std::string& n : rec.names) {
    EXPECT_EQ(n.find("..data_tmp"), std::string::npos) << n;
    if (n.starts_with("rename ")) staging.insert(n.substr(7, n.find(' ', 7) - 7));
  }
  EXPECT_EQ(staging.size(), 3u) << "one staging name per write";
  for (const std::string& s : staging) EXPECT_TRUE(s.starts_with(kStagingPrefix)) << s;
  EXPECT_EQ(fs::read_symlink(fs::path(vol_) / "..data_tmp"), "..2020_01_01_00_00_00.1");
}

TEST_F(SharedWriterTest, ARenameThatFailsRemovesOnlyWhatNeverBecameLive) {
  FaultInjectionEnv faulty(PosixEnv());
  Options o = Shared();
  o.fs = &faulty;
  auto w = OpenWriter(o);
  Payload v1 = MakePayload({{"a", "1"}});
  auto r1 = w->Write(v1);
  ASSERT_TRUE(r1.ok());
  faulty.FailNext("renameat", EIO);
  auto r2 = w->Write(MakePayload({{"a", "2"}}));
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(v1));
  EXPECT_EQ(LiveTsDir(), r1->ts_dir);
  EXPECT_EQ(DotDotEntries(), std::set<std::string>{r1->ts_dir});
}

}  // namespace
}  // namespace atomicwriter

namespace atomicwriter {
namespace {

// Options::may_publish, asked right before ..data is renamed (e.g. the node's lock still held):
// refused, the published version stays, the new one is gone and the write fails with its error.
TEST_F(WriterTest, ARefusedPublishLeavesThePublishedVersionAndNoDebris) {
  Options options = SoleWriter();
  bool allowed = true;
  int asked = 0;
  options.may_publish = [&] {
    ++asked;
    return allowed ? base::Status::OK() : base::Status::Error("lock lost");
  };
  auto w = OpenWriter(options);
  const Payload first = MakePayload({{"k", "1"}});
  ASSERT_TRUE(w->Write(first).ok());
  EXPECT_EQ(asked, 1);
  allowed = false;
  auto refused = w->Write(MakePayload({{"k", "2"}, {"new", "x"}}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "lock lost");
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(VisibleContent(vol_), (std::map<std::string, std::string>{{"k", "1"}}));
  EXPECT_EQ(DescribeDebris(vol_, first), "");
  // A write that publishes nothing (same content) does not ask.
  auto same = w->Write(first);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->published);
  EXPECT_EQ(asked, 2);
}

}  // namespace
}  // namespace atomicwriter

namespace atomicwriter {
namespace {

TEST(TmpfsPageBytesTest, EachFileIsRoundedUpToWholePages) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(TmpfsPageBytes({}), 0u);
  EXPECT_EQ(TmpfsPageBytes(MakePayload({{"empty", ""}})), 0u);
  EXPECT_EQ(TmpfsPageBytes(MakePayload({{"a", "x"}, {"d/b", std::string(page, 'y')}})), 2 * page);
  EXPECT_EQ(TmpfsPageBytes(MakePayload({{"c", std::string(page + 1, 'z')}})), 2 * page);
}

// WriteResult::on_tmpfs says where the volume dir is: the test's temporary dir (a disk here)
// and a dir under /dev/shm (a tmpfs).
TEST_F(WriterTest, AWriteSaysWhetherItsVolumeIsOnATmpfs) {
  auto w = OpenWriter(SoleWriter());
  auto on_disk = w->Write(MakePayload({{"k", "1"}}));
  ASSERT_TRUE(on_disk.ok());
  struct statfs sfs {};
  ASSERT_EQ(statfs(vol_.c_str(), &sfs), 0);
  EXPECT_EQ(on_disk->on_tmpfs, sfs.f_type == TMPFS_MAGIC);

  if (statfs("/dev/shm", &sfs) != 0 || sfs.f_type != TMPFS_MAGIC) {
    GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  }
  char dir[] = "/dev/shm/vm-writer-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  {
    auto shm = AtomicWriter::Open(dir, SoleWriter());
    ASSERT_TRUE(shm.ok()) << shm.status().message();
    auto written = (*shm)->Write(MakePayload({{"k", "1"}}));
    ASSERT_TRUE(written.ok());
    EXPECT_TRUE(written->on_tmpfs);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace atomicwriter
