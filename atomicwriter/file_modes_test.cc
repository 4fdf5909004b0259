// File modes: every file ends with exactly the mode its payload asks for, whatever the umask, a
// default ACL or a setgid volume dir would make of a create; a chmod follows the create only
// where the create cannot have given that mode. And the dirs of a nested payload are each opened
// once, with a bounded number held open.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

// Counts the descriptors it opens: how many are open at most, and how many were directories.
class CountingFilesystem : public FaultInjectionEnv {
 public:
  CountingFilesystem() : FaultInjectionEnv(PosixEnv()) {}
  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
    const int fd = FaultInjectionEnv::OpenAt(dirfd, path, flags, mode);
    if (fd >= 0) {
      max_open_ = std::max(max_open_.load(), ++open_);
      if ((flags & O_DIRECTORY) != 0) ++dir_opens_;
    }
    return fd;
  }
  int Close(int fd) override {
    --open_;
    return FaultInjectionEnv::Close(fd);
  }
  int max_open() const { return max_open_.load(); }
  int dir_opens() const { return dir_opens_.load(); }

 private:
  std::atomic<int> open_{0};
  std::atomic<int> max_open_{0};
  std::atomic<int> dir_opens_{0};
};

class FileModesTest : public WriterTest {
 protected:
  void SetUp() override {
    WriterTest::SetUp();
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    WriterTest::TearDown();
  }

  // Skips the test where creates do not keep their mode: there every file is chmodded.
  bool CreatesKeepMode() const {
    const int fd = ::open(vol_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool keep = fd >= 0 && ProbeFilesystem(fd).creates_keep_mode;
    if (fd >= 0) ::close(fd);
    return keep;
  }

  std::unique_ptr<AtomicWriter> OpenCounted() {
    Options o = SoleWriter();
    o.fs = &fs_;
    return OpenWriter(o);
  }

  mode_t ModeOf(const std::string& rel) const {
    struct stat st {};
    EXPECT_EQ(::lstat((vol_ + "/" + rel).c_str(), &st), 0) << rel;
    return st.st_mode & 07777;
  }

  // Writes `p` and expects each path of the new version ("" for its dir) to have its mode.
  void WriteAndExpectModes(AtomicWriter& w, const Payload& p,
                           std::initializer_list<std::pair<std::string, mode_t>> modes) {
    auto r = w.Write(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (const auto& [path, mode] : modes) {
      EXPECT_EQ(ModeOf(path.empty() ? r->ts_dir : r->ts_dir + "/" + path), mode) << path;
    }
  }

  // Sets a default ACL on the volume dir: the owner `user`, the owning group and others `rest`
  // (system.posix_acl_default, version 2: tag, permission, id per entry, sorted by tag).
  bool SetDefaultAcl(uint16_t user, uint16_t rest) {
    struct Entry {
      uint16_t tag, perm;
      uint32_t id;
    };
    const uint32_t version = 2;
    const Entry entries[] = {{0x01, user, ~0u}, {0x04, rest, ~0u}, {0x20, rest, ~0u}};
    std::string value(reinterpret_cast<const char*>(&version), sizeof(version));
    value.append(reinterpret_cast<const char*>(entries), sizeof(entries));
    return ::setxattr(vol_.c_str(), "system.posix_acl_default", value.data(), value.size(), 0) == 0;
  }

  CountingFilesystem fs_;
  mode_t old_umask_ = 0;
};

TEST_F(FileModesTest, ACreateThatGivesTheModeIsNotFollowedByAChmod) {
  if (!CreatesKeepMode()) GTEST_SKIP() << "creates on this filesystem may not keep their mode";
  auto w = OpenCounted();
  Payload p = MakePayload({{"a", "1"}, {"dir/b", "2"}});
  p["private"] = FileProjection{"3", 0400, std::nullopt};
  p["exec"] = FileProjection{"4", 0755, std::nullopt};
  WriteAndExpectModes(
      *w, p, {{"", 0755}, {"a", 0644}, {"dir/b", 0644}, {"private", 0400}, {"exec", 0755}});
  EXPECT_EQ(fs_.fchmod_calls(), 0) << "umask 022 withholds nothing these modes ask for";

  // Group and other write: the umask withholds them, so the create alone cannot give this mode.
  p["shared"] = FileProjection{"5", 0666, std::nullopt};
  WriteAndExpectModes(*w, p, {{"shared", 0666}, {"a", 0644}});
  EXPECT_EQ(fs_.fchmod_calls(), 1);
}

TEST_F(FileModesTest, AUmaskThatWithholdsMoreMakesAChmodFollowWhereItMatters) {
  ::umask(077);
  auto w = OpenCounted();
  Payload p = MakePayload({{"readable", "1"}});
  p["private"] = FileProjection{"2", 0600, std::nullopt};
  WriteAndExpectModes(*w, p, {{"", 0755}, {"readable", 0644}, {"private", 0600}});
  if (CreatesKeepMode()) {
    EXPECT_EQ(fs_.fchmod_calls(), 2) << "the version's dir and the 0644 file; 0600 needs none";
  }
}

TEST_F(FileModesTest, ADefaultAclOnTheVolumeDirNeverChangesAFilesMode) {
  // Owner rwx, group and others nothing: creates beneath get no group or other bits at all.
  if (!SetDefaultAcl(7, 0)) GTEST_SKIP() << "no POSIX ACLs here: " << std::strerror(errno);
  auto w = OpenCounted();
  Payload p = MakePayload({{"a", "1"}, {"dir/b", "2"}});
  p["private"] = FileProjection{"3", 0600, std::nullopt};
  WriteAndExpectModes(*w, p, {{"", 0755}, {"a", 0644}, {"dir/b", 0644}, {"private", 0600}});

  // An ACL that grants everything: the umask no longer applies, and 0666 comes from the create.
  ASSERT_TRUE(SetDefaultAcl(7, 7));
  p["shared"] = FileProjection{"4", 0666, std::nullopt};
  WriteAndExpectModes(*w, p, {{"shared", 0666}, {"a", 0644}});
}

TEST_F(FileModesTest, TheVersionDirDoesNotKeepASetgidBitItInherited) {
  ASSERT_EQ(::chmod(vol_.c_str(), 02777), 0);
  auto w = OpenCounted();
  WriteAndExpectModes(*w, MakePayload({{"a", "1"}, {"dir/b", "2"}}),
                      {{"", 0755}, {"a", 0644}, {"dir/b", 0644}});
}

TEST_F(FileModesTest, EachDirOfANestedPayloadIsOpenedOnce) {
  Payload p;
  for (int i = 0; i < 60; ++i) {
    p["d" + std::to_string(i % 4) + "/sub" + std::to_string(i % 3) + "/f" + std::to_string(i)] =
        FileProjection{std::to_string(i), 0644, std::nullopt};
  }
  p["top"] = FileProjection{"t", 0644, std::nullopt};
  auto w = OpenCounted();
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The volume dir (by Open), the new version's dir, 4 dirs and 12 subdirs: nothing else opens a
  // dir in a first write.
  EXPECT_EQ(fs_.dir_opens(), 2 + 4 + 12);
  EXPECT_EQ(LiveTree().size(), 61u + 4 + 12);
}

TEST_F(FileModesTest, ADeepPayloadHoldsABoundedNumberOfDescriptors) {
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "l" + std::to_string(i) + "/";
  Payload p;
  p[deep + "bottom"] = FileProjection{"b", 0644, std::nullopt};
  p[deep + "l40/below"] = FileProjection{"c", 0644, std::nullopt};
  p["l0/l1/near"] = FileProjection{"n", 0644, std::nullopt};
  p["l0/side/x"] = FileProjection{"x", 0644, std::nullopt};
  auto w = OpenCounted();
  auto r = w->Write(p);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LE(fs_.max_open(), 20) << "at most 16 held dirs, the version's dir, a deeper dir, a file";
  auto visible = ReadVisibleFiles(vol_);
  for (const auto& [path, file] : p) EXPECT_EQ(visible[path].data, file.data) << path;
}

// A write that finds the volume dir as this process's last write left it (a RemovalQueue, within
// the grace period) takes the mode its mkdir gives the new version's dir from that write
// (LastWrite::version_mode) instead of an lstat: a chmod or an ACL change of the volume dir moves
// its ctime, and the next write looks again.
TEST_F(FileModesTest, AWriteIntoTheDirAsLeftTakesTheVersionDirsModeFromTheLastWrite) {
  if (!CreatesKeepMode()) GTEST_SKIP() << "creates on this filesystem may not keep their mode";
  RemovalQueue queue;  // not started: nothing is removed
  UnpublishedLedger ledger;
  Options o;
  o.fs = &fs_;
  o.removals = &queue;
  o.ledger = &ledger;
  auto w = OpenWriter(o);
  WriteAndExpectModes(*w, MakePayload({{"a", "1"}}), {{"", 0755}, {"a", 0644}});
  WriteAndExpectModes(*w, MakePayload({{"a", "2"}}), {{"", 0755}, {"a", 0644}});
  fs_.RecordCalls(true);
  WriteAndExpectModes(*w, MakePayload({{"a", "3"}}), {{"", 0755}, {"a", 0644}});
  const std::vector<std::string> calls = fs_.recorded();
  // The volume dir's state, the replaced version's lstat for the queue, the volume dir's state
  // after: none of the new version's dir.
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "fstatat"), 3);
  EXPECT_EQ(fs_.fchmod_calls(), 0);

  // A setgid volume dir (its ctime moved): the next write looks again, and the version dir,
  // which inherits the bit, is chmodded, in this write and the next, which finds the dir as left.
  ASSERT_EQ(::chmod(vol_.c_str(), 02777), 0);
  WriteAndExpectModes(*w, MakePayload({{"a", "4"}}), {{"", 0755}, {"a", 0644}});
  EXPECT_EQ(fs_.fchmod_calls(), 1);
  WriteAndExpectModes(*w, MakePayload({{"a", "5"}}), {{"", 0755}, {"a", 0644}});
  EXPECT_EQ(fs_.fchmod_calls(), 2);
}

// A flat payload (no subdirs), where creates keep their mode: each file is created beneath the
// volume dir through the new version's name by one openat2 that follows no link, and no
// descriptor of the version's dir is opened.
TEST_F(FileModesTest, AFlatPayloadIsWrittenWithoutOpeningItsVersionDir) {
  if (!CreatesKeepMode()) GTEST_SKIP() << "creates on this filesystem may not keep their mode";
  auto w = OpenCounted();
  Payload p = MakePayload({{"a", "1"}, {"b", "2"}});
  p["private"] = FileProjection{"3", 0400, std::nullopt};
  p["shared"] = FileProjection{"4", 0666, std::nullopt};
  fs_.RecordCalls(true);
  WriteAndExpectModes(*w, p, {{"", 0755}, {"a", 0644}, {"private", 0400}, {"shared", 0666}});
  const std::vector<std::string> calls = fs_.recorded();
  if (std::count(calls.begin(), calls.end(), "openat2") == 0) {
    GTEST_SKIP() << "no openat2 here: the files are created through a descriptor of the dir";
  }
  EXPECT_EQ(fs_.dir_opens(), 1) << "the volume dir's, by Open";
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "openat2"), 4);
  EXPECT_EQ(fs_.fchmod_calls(), 1) << "0666, whose group and other write the umask withholds";
  auto visible = ReadVisibleFiles(vol_);
  for (const auto& [path, file] : p) EXPECT_EQ(visible[path].data, file.data) << path;
}

// Without openat2 (ENOSYS), the same write goes through a descriptor of the version's dir.
TEST_F(FileModesTest, WithoutOpenat2AFlatPayloadIsWrittenThroughItsVersionDir) {
  class NoOpenat2 final : public EnvWrapper {
   public:
    explicit NoOpenat2(Env* base) : EnvWrapper(base) {}
    int OpenAt2Beneath(int, const std::string&, int, mode_t) override {
      errno = ENOSYS;
      return -1;
    }
  } env(&fs_);
  Options o = SoleWriter();
  o.fs = &env;
  auto w = OpenWriter(o);
  Payload p = MakePayload({{"a", "1"}, {"b", "2"}});
  p["private"] = FileProjection{"3", 0400, std::nullopt};
  WriteAndExpectModes(*w, p, {{"", 0755}, {"a", 0644}, {"b", 0644}, {"private", 0400}});
  EXPECT_EQ(fs_.dir_opens(), 2) << "the volume dir's and the version dir's";
  auto visible = ReadVisibleFiles(vol_);
  for (const auto& [path, file] : p) EXPECT_EQ(visible[path].data, file.data) << path;
  EXPECT_EQ(DotDotEntries().size(), 1u) << "the live version alone";
}

}  // namespace
}  // namespace atomicwriter
