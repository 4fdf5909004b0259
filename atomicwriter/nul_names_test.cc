// A NUL byte in a payload path: "a/..\0x/..\0x/PWNED" has no ".." element, but a system call
// reads a name only up to its NUL, so each "..\0x" would be "..", and the file would land outside
// the volume dir. The writer refuses such a path before touching the disk, and every Env
// call refuses such a name with EINVAL (as Go does), whoever calls it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <string>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// Everything below `dir`, by relative path.
std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    out.insert(fs::relative(it->path(), dir, ec).string());
  }
  return out;
}

class NulNamesTest : public WriterTest {
 protected:
  void SetUp() override {
    WriterTest::SetUp();
    // vol is root_/vol; the attack climbs out of it to root_.
    fd_ = ::open(vol_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    WriterTest::TearDown();
  }
  // Nothing but the volume dir (and what the writer made inside it) in the temporary dir.
  void ExpectNothingOutsideTheVolume() {
    for (const std::string& p : Tree(root_)) {
      EXPECT_TRUE(p == "vol" || p.starts_with("vol/")) << "created outside the volume: " << p;
    }
  }

  int fd_ = -1;
};

TEST_F(NulNamesTest, WriterRefusesTheAttackPathAndCreatesNothing) {
  auto w = OpenWriter();
  ASSERT_NE(w, nullptr);
  const std::string attack = "a/..\0x/..\0x/PWNED"s;
  for (const Payload& payload :
       {MakePayload({{attack, "owned"}}), MakePayload({{"good", "1"}, {attack, "owned"}}),
        MakePayload({{"key\0"s, "x"}}), MakePayload({{"\0"s, "x"}})}) {
    auto r = w->Write(payload, nullptr);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("invalid path: must not contain a NUL byte"),
              std::string::npos)
        << r.status().message();
    EXPECT_EQ(r.status().message().find('\0'), std::string::npos) << "a raw NUL in the message";
  }
  EXPECT_EQ(Tree(vol_), std::set<std::string>{});
  ExpectNothingOutsideTheVolume();
  // The volume still takes a good write afterwards.
  auto ok = w->Write(MakePayload({{"good", "1"}}), nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ExpectNothingOutsideTheVolume();
}

// Every method that takes a name refuses one with a NUL, without a system call: the name cut at
// the NUL ("..") would reach outside.
void ExpectEveryNameCallRefused(Env& f, int dirfd) {
  const std::string bad = "..\0x/PWNED"s;
  struct stat st {};
  std::string target;
  errno = 0;
  EXPECT_EQ(f.OpenAt(dirfd, bad, O_WRONLY | O_CREAT | O_NOFOLLOW, 0644), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.MkdirAt(dirfd, "..\0x"s, 0755), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.MkdirAt(dirfd, bad, 0755), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.SymlinkAt("target", dirfd, bad), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.SymlinkAt("..\0/..\0/etc"s, dirfd, "link"), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.FstatAt(dirfd, "..\0x"s, &st, AT_SYMLINK_NOFOLLOW), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.FchmodAt(dirfd, "..\0x"s, 0777, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.FchownAt(dirfd, "..\0x"s, ::geteuid(), ::getegid(), AT_SYMLINK_NOFOLLOW), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.ReadlinkAt(dirfd, "..\0x"s, &target), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.RenameAt(dirfd, "victim", dirfd, bad), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.RenameAt(dirfd, "..\0x/canary"s, dirfd, "stolen"), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(f.UnlinkAt(dirfd, "..\0x/canary"s, 0), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(NulNamesTest, PosixEnvRefusesEveryNameWithANul) {
  ASSERT_EQ(::mkdir((root_ + "/canary").c_str(), 0755), 0);
  ASSERT_EQ(::close(::open((root_ + "/canary/file").c_str(), O_WRONLY | O_CREAT, 0644)), 0);
  ASSERT_EQ(::close(::open((vol_ + "/victim").c_str(), O_WRONLY | O_CREAT, 0644)), 0);
  const auto before = Tree(root_);
  ExpectEveryNameCallRefused(*PosixEnv(), fd_);
  EXPECT_EQ(Tree(root_), before);
  // Names without a NUL still work.
  const int fd = PosixEnv()->OpenAt(fd_, "fine", O_WRONLY | O_CREAT | O_NOFOLLOW, 0644);
  EXPECT_GE(fd, 0);
  if (fd >= 0) PosixEnv()->Close(fd);
}

TEST_F(NulNamesTest, FaultInjectionEnvPassesTheRefusalOn) {
  ASSERT_EQ(::close(::open((vol_ + "/victim").c_str(), O_WRONLY | O_CREAT, 0644)), 0);
  FaultInjectionEnv f(PosixEnv());
  f.RedirectChown(::getegid());  // its own lookup of the name must not cut it either
  const auto before = Tree(root_);
  ExpectEveryNameCallRefused(f, fd_);
  EXPECT_EQ(Tree(root_), before);
  EXPECT_EQ(f.ChownRequested(vol_ + "/\0victim"s), std::nullopt);
}

}  // namespace
}  // namespace atomicwriter
