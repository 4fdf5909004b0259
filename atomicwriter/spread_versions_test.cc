// Where freed inodes wait (ext4 without a journal), a writer whose volume dir no other writer
// touches places its versions away from the volume dir: the volume's first write (and one that
// made new top-level links, or 30 s after the last placement) makes its version's dir under
// FS_TOPDIR_FL (set on the volume dir for that mkdir only, the dir's other flags kept), the later
// ones follow it, and the staging link is made inside the new version's dir, then moved onto
// ..data, so that the version's dir stays the last inode made in the volume dir. Elsewhere, in a
// volume other writers touch, and for durable writes (the link), nothing changes.
// bench/atomicwriter_bench.cc measures what it saves.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/ext4_image_fixture.h"
#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/removal_queue.h"
#include "atomicwriter/volume_inspector.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

// The inode flags of `dir` (chattr's attributes); a test failure, and 0, when they cannot be read.
int InodeFlags(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int flags = 0;
  if (fd < 0 || ::ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    ADD_FAILURE() << "cannot read the flags of " << dir << ": " << std::strerror(errno);
    flags = 0;
  }
  if (fd >= 0) ::close(fd);
  return flags;
}

bool SetInodeFlags(const std::string& dir, int flags) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const int rc = ::ioctl(fd, FS_IOC_SETFLAGS, &flags);
  ::close(fd);
  return rc == 0;
}

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

Payload Version(int n) {
  const std::string v = std::to_string(n);
  return MakePayload({{"a", v}, {"d/b", v}, {"d/c", v}});
}

std::string Hex(int flags) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%x", static_cast<unsigned>(flags));
  return hex;
}

// Records the calls that place a version: each symlink made and each rename's two ends, as dir
// path + name, and each change of inode flags, with the flags.
class PlacementRecorder : public FaultInjectionEnv {
 public:
  PlacementRecorder() : FaultInjectionEnv(PosixEnv()) {}

  int SymlinkAt(const std::string& target, int dirfd, const std::string& linkpath) override {
    Record("symlink " + target + " at " + DirOf(dirfd) + "/" + linkpath);
    return FaultInjectionEnv::SymlinkAt(target, dirfd, linkpath);
  }
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override {
    Record("rename " + DirOf(olddirfd) + "/" + oldpath + " to " + DirOf(newdirfd) + "/" + newpath);
    return FaultInjectionEnv::RenameAt(olddirfd, oldpath, newdirfd, newpath);
  }
  int GetInodeFlags(int fd, int* flags) override {
    Record("getflags " + DirOf(fd));
    return FaultInjectionEnv::GetInodeFlags(fd, flags);
  }
  int SetInodeFlags(int fd, int flags) override {
    Record("setflags " + DirOf(fd) + " " + Hex(flags));
    if (refuse_flags) {  // as a filesystem without FS_TOPDIR_FL
      errno = EOPNOTSUPP;
      return -1;
    }
    return FaultInjectionEnv::SetInodeFlags(fd, flags);
  }
  bool refuse_flags = false;

  std::vector<std::string> TakeCalls() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(calls_, {});
  }
  // The flag changes among `calls`.
  static std::vector<std::string> FlagChanges(const std::vector<std::string>& calls) {
    return Only("setflags ", calls);
  }
  // The calls among `calls` that start with `prefix`.
  static std::vector<std::string> Only(const std::string& prefix,
                                       const std::vector<std::string>& calls) {
    std::vector<std::string> out;
    for (const std::string& c : calls) {
      if (c.starts_with(prefix)) out.push_back(c);
    }
    return out;
  }

 private:
  static std::string DirOf(int fd) {
    std::error_code ec;
    return std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
  }
  void Record(std::string call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(call));
  }
  std::mutex mu_;
  std::vector<std::string> calls_;
};

// Writes of one volume dir on a mounted ext4 image, through a removal queue as the daemon writes
// (its entries removed when the test says: RunAll).
class SpreadOnExt4ImageTest : public Ext4ImageTest {
 protected:
  void TearDown() override {
    writer_.reset();
    queue_.Stop();
    Ext4ImageTest::TearDown();
  }

  // Opens a writer of the fresh volume dir `name` that treats its replaced versions as
  // `replaced`.
  void OpenVolume(const std::string& name, ReplacedVersion replaced) {
    vol_ = mount_dir_ + "/" + name;
    ASSERT_TRUE(std::filesystem::create_directory(vol_));
    Options o;
    o.fs = &recorder_;
    o.removals = &queue_;
    o.replaced_version = replaced;
    // As the daemon: later writes find the dir as the last one left it.
    o.unpublished_grace = std::chrono::seconds(30);
    auto w = AtomicWriter::Open(vol_, o);
    ASSERT_TRUE(w.ok()) << w.status().message();
    writer_ = std::move(w).value();
  }

  // Writes version `n` and returns its dir's name.
  std::string Write(int n) {
    auto r = writer_->Write(Version(n));
    EXPECT_TRUE(r.ok() && r->published) << (r.ok() ? "not published" : r.status().message());
    EXPECT_EQ(VisibleContent(vol_), ExpectedContent(Version(n)));
    return r.ok() ? r->ts_dir : "";
  }

  // On a fresh image (with a journal or not), two writes as `replaced` neither read nor set the
  // volume dir's flags.
  void ExpectNoFlagTouched(bool journal, ReplacedVersion replaced) {
    std::string why;
    const int fd = Mount(journal, &why);
    if (fd < 0) GTEST_SKIP() << why;
    ::close(fd);
    OpenVolume("volume", replaced);
    Write(1);
    Write(2);
    const std::vector<std::string> calls = recorder_.TakeCalls();
    EXPECT_EQ(PlacementRecorder::Only("getflags ", calls), std::vector<std::string>{});
    EXPECT_EQ(PlacementRecorder::FlagChanges(calls), std::vector<std::string>{});
  }

  std::string vol_;
  PlacementRecorder recorder_;
  RemovalQueue queue_;
  std::unique_ptr<AtomicWriter> writer_;
};

// 16 block groups of 256 inodes each, each its own flex group: where a dir or file lands is
// (inode - 1) / 256.
constexpr char kSixteenGroups[] = "-b 1024 -g 1024 -G 1 -N 4096";
constexpr ino_t kInodesPerGroup = 256;

TEST_F(SpreadOnExt4ImageTest, AnOwnedVolumesVersionsArePlacedAwayFromItsDirAndFollowEachOther) {
  std::string why;
  const int fd = Mount(/*journal=*/false, &why, kSixteenGroups);
  if (fd < 0) GTEST_SKIP() << why;
  struct statfs sf {};
  ASSERT_EQ(::fstatfs(fd, &sf), 0);
  ::close(fd);
  ASSERT_EQ(sf.f_files, 16 * kInodesPerGroup) << "mkfs.ext4 did not make the groups asked for";
  OpenVolume("owned", ReplacedVersion::kAtOnceWhereFreedInodesWait);
  ASSERT_TRUE(SetInodeFlags(vol_, InodeFlags(vol_) | FS_NODUMP_FL));  // chattr +d
  const int flags_before = InodeFlags(vol_);
  auto group = [](ino_t ino) { return (ino - 1) / kInodesPerGroup; };
  const ino_t vol_group = group(InodeOf(vol_));

  // The volume's first write: its version's dir is made under the flag, which is then taken off
  // again.
  const std::string first = Write(1);
  EXPECT_EQ(PlacementRecorder::FlagChanges(recorder_.TakeCalls()),
            (std::vector<std::string>{"setflags " + vol_ + " " + Hex(flags_before | FS_TOPDIR_FL),
                                      "setflags " + vol_ + " " + Hex(flags_before)}));
  EXPECT_EQ(InodeFlags(vol_), flags_before) << "the dir's own flags are kept, and no T is left";
  const ino_t first_group = group(InodeOf(vol_ + "/" + first));
  EXPECT_NE(first_group, vol_group) << "placed as a top-level dir: in a group with fewer dirs";
  for (const char* path : {"/a", "/d", "/d/b", "/d/c"}) {
    EXPECT_EQ(group(InodeOf(vol_ + "/" + first + path)), first_group) << path;
  }

  // The next writes: no flag, and their versions land where the last one did, not beside the
  // volume dir.
  for (int n = 2; n <= 4; ++n) {
    SCOPED_TRACE("write " + std::to_string(n));
    const std::string ts = Write(n);
    EXPECT_EQ(PlacementRecorder::FlagChanges(recorder_.TakeCalls()), std::vector<std::string>{});
    EXPECT_EQ(group(InodeOf(vol_ + "/" + ts)), first_group);
    EXPECT_EQ(group(InodeOf(vol_ + "/" + ts + "/d/c")), first_group);
    EXPECT_EQ(group(InodeOf(vol_ + "/..data")), first_group) << "the link came from the version";
  }
  queue_.RunAll();
  EXPECT_EQ(DescribeDebris(vol_, Version(4)), "");
  EXPECT_EQ(InodeFlags(vol_), flags_before);
}

TEST_F(SpreadOnExt4ImageTest, AMarkACrashLeftOnTheVolumeDirIsCleared) {
  std::string why;
  const int fd = Mount(/*journal=*/false, &why);
  if (fd < 0) GTEST_SKIP() << why;
  ::close(fd);
  OpenVolume("owned", ReplacedVersion::kAtOnceWhereFreedInodesWait);
  ASSERT_TRUE(SetInodeFlags(vol_, InodeFlags(vol_) | FS_TOPDIR_FL));
  Write(1);
  EXPECT_EQ(InodeFlags(vol_) & FS_TOPDIR_FL, 0);
}

TEST_F(SpreadOnExt4ImageTest, NotWhereFreedInodesAreReusedAtOnce) {
  ExpectNoFlagTouched(/*journal=*/true, ReplacedVersion::kAtOnceWhereFreedInodesWait);
}

TEST_F(SpreadOnExt4ImageTest, NotInAVolumeOtherWritersTouch) {
  ExpectNoFlagTouched(/*journal=*/false, ReplacedVersion::kAfterGrace);
}

class SpreadVersionsTest : public WriterTest {
 protected:
  // The symlink and rename calls of the second of two writes, and the name of the version it
  // published.
  std::vector<std::string> CallsOfAChangedWrite(Options o, std::string* published) {
    o.fs = &recorder_;
    auto w = OpenWriter(o);
    EXPECT_NE(w, nullptr);
    if (w == nullptr) return {};
    EXPECT_TRUE(w->Write(Version(1)).ok());
    recorder_.TakeCalls();
    auto r = w->Write(Version(2));
    EXPECT_TRUE(r.ok() && r->published);
    *published = r.ok() ? r->ts_dir : "";
    EXPECT_EQ(VisibleContent(vol_), ExpectedContent(Version(2)));
    EXPECT_EQ(DescribeDebris(vol_, Version(2)), "");
    // The live version holds the payload and nothing else.
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(vol_ + "/" + *published)) {
      names.insert(e.path().filename().string());
    }
    EXPECT_EQ(names, (std::set<std::string>{"a", "d"}));
    const std::vector<std::string> calls = recorder_.TakeCalls();
    std::vector<std::string> out = PlacementRecorder::Only("symlink ", calls);
    for (std::string& c : PlacementRecorder::Only("rename ", calls)) out.push_back(std::move(c));
    return out;
  }

  static Options Owned() {
    Options o = SoleWriter();
    o.replaced_version = ReplacedVersion::kAtOnce;
    o.probe = ProbeAsIfFreedInodesWait;
    return o;
  }

  PlacementRecorder recorder_;
};

TEST_F(SpreadVersionsTest, AVersionIsPlacedAfreshOnlyFirstAfterNewLinksAndAfterAWhile) {
  auto now = std::chrono::steady_clock::now();
  RemovalQueue queue(nullptr, [&] { return now; });
  Options o = Owned();
  o.fs = &recorder_;
  o.removals = &queue;  // the memo that carries the last placement lives with a queue
  o.steady_now = [&] { return now; };
  auto w = OpenWriter(o);
  ASSERT_NE(w, nullptr);
  auto placed = [&](const Payload& p) {
    auto r = w->Write(p);
    EXPECT_TRUE(r.ok() && r->published);
    queue.RunAll();
    const auto tries = PlacementRecorder::Only("getflags ", recorder_.TakeCalls());
    EXPECT_LE(tries.size(), 1u);
    return tries.size() == 1;
  };
  EXPECT_TRUE(placed(Version(1))) << "the first write of the volume";
  EXPECT_FALSE(placed(Version(2)));
  Payload more = Version(3);
  more["e"] = more["a"];
  EXPECT_TRUE(placed(more)) << "a new top-level link was made in the volume dir";
  EXPECT_FALSE(placed(Version(4))) << "a top-level link removed makes no inode";
  now += std::chrono::seconds(29);
  EXPECT_FALSE(placed(Version(5)));
  now += std::chrono::seconds(2);
  EXPECT_TRUE(placed(Version(6))) << "30 s after the last placement";
  EXPECT_FALSE(placed(Version(7)));
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(Version(7)));
  EXPECT_EQ(DescribeDebris(vol_, Version(7)), "");
}

// Where the filesystem refuses the mark, a try counts as a placement: the next waits as long,
// rather than an ioctl that fails on every write.
TEST_F(SpreadVersionsTest, AMarkTheFilesystemRefusesIsTriedAgainOnlyAfterAWhile) {
  auto now = std::chrono::steady_clock::now();
  RemovalQueue queue(nullptr, [&] { return now; });
  Options o = Owned();
  recorder_.refuse_flags = true;
  o.fs = &recorder_;
  o.removals = &queue;
  o.steady_now = [&] { return now; };
  auto w = OpenWriter(o);
  ASSERT_NE(w, nullptr);
  auto tried = [&](const Payload& p) {
    auto r = w->Write(p);
    EXPECT_TRUE(r.ok() && r->published) << "a refused mark fails no write";
    queue.RunAll();
    return PlacementRecorder::Only("getflags ", recorder_.TakeCalls()).size() == 1;
  };
  EXPECT_TRUE(tried(Version(1)));
  EXPECT_FALSE(tried(Version(2))) << "tried again on the next write";
  now += std::chrono::seconds(31);
  EXPECT_TRUE(tried(Version(3)));
  EXPECT_EQ(VisibleContent(vol_), ExpectedContent(Version(3)));
}

TEST_F(SpreadVersionsTest, TheStagingLinkIsMadeInTheNewVersionAndMovedOntoData) {
  std::string ts;
  const std::vector<std::string> calls = CallsOfAChangedWrite(Owned(), &ts);
  ASSERT_EQ(calls.size(), 2u) << ::testing::PrintToString(calls);
  const std::string staged = calls[0].substr(calls[0].rfind('/') + 1);
  EXPECT_EQ(calls[0], "symlink " + ts + " at " + vol_ + "/" + ts + "/" + staged);
  EXPECT_EQ(calls[1], "rename " + vol_ + "/" + ts + "/" + staged + " to " + vol_ + "/..data");
}

TEST_F(SpreadVersionsTest, ElsewhereTheStagingLinkIsMadeInTheVolumeDir) {
  Options shared = Owned();
  shared.replaced_version = ReplacedVersion::kAfterGrace;
  Options reused = Owned();
  reused.probe = [](int fd) {
    FilesystemTraits t = ProbeFilesystem(fd);
    t.freed_inodes_wait = false;
    return t;
  };
  Options durable = Owned();
  durable.durable = true;
  for (const auto& [what, o] : {std::pair<const char*, Options>{"other writers", shared},
                                {"freed inodes reused at once", reused},
                                {"durable", durable}}) {
    SCOPED_TRACE(what);
    TearDown();
    SetUp();
    std::string ts;
    const std::vector<std::string> calls = CallsOfAChangedWrite(o, &ts);
    ASSERT_EQ(calls.size(), 2u) << ::testing::PrintToString(calls);
    const std::string staged = calls[0].substr(calls[0].rfind('/') + 1);
    EXPECT_EQ(calls[0], "symlink " + ts + " at " + vol_ + "/" + staged);
    EXPECT_EQ(calls[1], "rename " + vol_ + "/" + staged + " to " + vol_ + "/..data");
  }
}

}  // namespace
}  // namespace atomicwriter
