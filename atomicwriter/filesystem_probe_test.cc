#include "atomicwriter/filesystem_probe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

// As /proc/fs/ext4/<device>/options prints them (Linux 6.x), abridged.
constexpr char kJournaled[] =
    "rw\nbsddf\nnogrpid\nblock_validity\ndioread_nolock\nnodiscard\ndelalloc\n"
    "nowarn_on_error\njournal_checksum\nbarrier\nauto_da_alloc\nuser_xattr\nacl\nnoquota\n"
    "resuid=0\nresgid=0\nerrors=continue\ncommit=5\nmin_batch_time=0\nmax_batch_time=15000\n"
    "stripe=0\ndata=ordered\ninode_readahead_blks=32\ninit_itable=10\nmax_dir_size_kb=0\n";
constexpr char kNoJournal[] =
    "rw\nbsddf\nnogrpid\nblock_validity\ndioread_nolock\ndiscard\ndelalloc\nnowarn_on_error\n"
    "nojournal_checksum\nbarrier\nauto_da_alloc\nuser_xattr\nacl\nnoquota\nresuid=0\n"
    "resgid=0\nerrors=continue\ncommit=5\nmin_batch_time=0\nmax_batch_time=15000\ni_version\n"
    "stripe=0\ninode_readahead_blks=32\ninit_itable=10\nmax_dir_size_kb=0\n";

TEST(FreedInodesTest, OnlyAnOptionListWithADataModeShowsAJournal) {
  EXPECT_TRUE(Ext4OptionsShowJournal(kJournaled));
  EXPECT_FALSE(Ext4OptionsShowJournal(kNoJournal));
  EXPECT_TRUE(Ext4OptionsShowJournal("data=writeback"));
  EXPECT_TRUE(Ext4OptionsShowJournal("rw\ndata=journal\n"));
  EXPECT_FALSE(Ext4OptionsShowJournal(""));
  EXPECT_FALSE(Ext4OptionsShowJournal("rw\nnodata=ordered\n")) << "a line that only contains it";
}

TEST(FreedInodesTest, NotExt4MeansFreedInodesAreReusedAtOnce) {
  for (const char* dir : {"/proc", "/dev/shm", "/sys"}) {
    const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    EXPECT_FALSE(ProbeFilesystem(fd).freed_inodes_wait) << dir;
    ::close(fd);
  }
}

TEST(FreedInodesTest, OnlyFilesystemsKnownToKeepACreatesModeSaySo) {
  const struct {
    const char* dir;
    bool keep;
  } cases[] = {{"/proc", false}, {"/sys", false}, {"/dev/shm", true}};  // /dev/shm: tmpfs
  for (const auto& c : cases) {
    const int fd = ::open(c.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    EXPECT_EQ(ProbeFilesystem(fd).creates_keep_mode, c.keep) << c.dir;
    ::close(fd);
  }
  EXPECT_FALSE(ProbeFilesystem(-1).creates_keep_mode) << "no answer means false";
}

// A loop-mounted ext4 image, made with or without a journal. Needs root, mkfs.ext4 and a loop
// device; skipped, saying why, where there is none of them.
class Ext4ImageTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (mounted_) ::umount2(mount_dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Mounts a fresh 16 MiB ext4 (journal or not) and returns a descriptor of its root, or -1.
  int Mount(bool journal, std::string* why) {
    char tmpl[] = "/tmp/freed-inodes-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return -1;
    dir_ = tmpl;
    const std::string image = dir_ + "/image";
    mount_dir_ = dir_ + "/mnt";
    fs::create_directory(mount_dir_);
    const std::string mkfs = std::string("mkfs.ext4 -q -F ") + (journal ? "" : "-O ^has_journal ") +
                             image + " 16M >/dev/null 2>&1";
    if (std::system(mkfs.c_str()) != 0) {
      *why = "mkfs.ext4 failed (e2fsprogs missing?)";
      return -1;
    }
    const std::string mount = "mount -o loop " + image + " " + mount_dir_ + " >/dev/null 2>&1";
    if (::geteuid() != 0 || std::system(mount.c_str()) != 0) {
      *why = "no loop mount here (needs root and a loop device)";
      return -1;
    }
    mounted_ = true;
    return ::open(mount_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }

  std::string dir_;
  std::string mount_dir_;
  bool mounted_ = false;
};

TEST_F(Ext4ImageTest, WithoutAJournalFreedInodesWait) {
  std::string why;
  const int fd = Mount(/*journal=*/false, &why);
  if (fd < 0) GTEST_SKIP() << why;
  EXPECT_TRUE(ProbeFilesystem(fd).freed_inodes_wait);
  EXPECT_TRUE(ProbeFilesystem(fd).freed_inodes_wait) << "the second answer comes from the cache";
  EXPECT_TRUE(ProbeFilesystem(fd).creates_keep_mode);
  ::close(fd);
}

TEST_F(Ext4ImageTest, WithAJournalFreedInodesAreReusedAtOnce) {
  std::string why;
  const int fd = Mount(/*journal=*/true, &why);
  if (fd < 0) GTEST_SKIP() << why;
  EXPECT_FALSE(ProbeFilesystem(fd).freed_inodes_wait);
  EXPECT_TRUE(ProbeFilesystem(fd).creates_keep_mode);
  ::close(fd);
}

}  // namespace
}  // namespace atomicwriter
