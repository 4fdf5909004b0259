#include "atomicwriter/filesystem_probe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "atomicwriter/ext4_image_fixture.h"
#include "tests/support/skip.h"

namespace atomicwriter {
namespace {

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

// The dirs whose filesystems the tests below assume, each with its statfs magic: a dir found
// on another filesystem (a container's /sys bind-mounted from elsewhere, no tmpfs on /dev/shm)
// is not probed, and the test skips saying which.
struct AssumedFilesystem {
  const char* dir;
  const char* type;
  decltype(statfs::f_type) magic;
  bool creates_keep_mode;
};
constexpr AssumedFilesystem kAssumed[] = {{"/proc", "proc", PROC_SUPER_MAGIC, false},
                                          {"/sys", "sysfs", SYSFS_MAGIC, false},
                                          {"/dev/shm", "tmpfs", TMPFS_MAGIC, true}};

// A descriptor of `fs.dir` when it is on the filesystem assumed, else -1 with why in `not_as`.
int OpenAssumed(const AssumedFilesystem& fs, std::string* not_as) {
  const int fd = ::open(fs.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct statfs sfs {};
  std::string why;
  if (fd < 0 || ::fstatfs(fd, &sfs) != 0) {
    why = std::string(fs.dir) + ": " + std::strerror(errno);
  } else if (sfs.f_type != fs.magic) {
    char magic[32];
    std::snprintf(magic, sizeof(magic), "0x%lx", static_cast<unsigned long>(sfs.f_type));
    why = std::string(fs.dir) + " is not " + fs.type + " (statfs magic " + magic + ")";
  } else {
    return fd;
  }
  if (fd >= 0) ::close(fd);
  *not_as += (not_as->empty() ? "" : "; ") + why;
  return -1;
}

TEST(FreedInodesTest, NotExt4MeansFreedInodesAreReusedAtOnce) {
  std::string not_as;
  for (const AssumedFilesystem& fs : kAssumed) {
    const int fd = OpenAssumed(fs, &not_as);
    if (fd < 0) continue;
    EXPECT_FALSE(ProbeFilesystem(fd).freed_inodes_wait) << fs.dir;
    ::close(fd);
  }
  if (!not_as.empty()) GTEST_SKIP() << "filesystems not as assumed, those not probed: " << not_as;
}

TEST(FreedInodesTest, OnlyFilesystemsKnownToKeepACreatesModeSaySo) {
  std::string not_as;
  for (const AssumedFilesystem& fs : kAssumed) {
    const int fd = OpenAssumed(fs, &not_as);
    if (fd < 0) continue;
    EXPECT_EQ(ProbeFilesystem(fd).creates_keep_mode, fs.creates_keep_mode) << fs.dir;
    ::close(fd);
  }
  EXPECT_FALSE(ProbeFilesystem(-1).creates_keep_mode) << "no answer means false";
  if (!not_as.empty()) GTEST_SKIP() << "filesystems not as assumed, those not probed: " << not_as;
}

TEST(TmpfsTest, OnlyATmpfsIsMemory) {
  std::string not_as;
  for (const AssumedFilesystem& fs : kAssumed) {
    const int fd = OpenAssumed(fs, &not_as);
    if (fd < 0) continue;
    EXPECT_EQ(ProbeFilesystem(fd).tmpfs, fs.magic == TMPFS_MAGIC) << fs.dir;
    ::close(fd);
  }
  EXPECT_FALSE(ProbeFilesystem(-1).tmpfs) << "no answer means false";
  if (!not_as.empty()) GTEST_SKIP() << "filesystems not as assumed, those not probed: " << not_as;
}

TEST_F(Ext4ImageTest, WithoutAJournalFreedInodesWait) {
  VM_SKIP_UNLESS_ROOT("loop-mounts an ext4 image");
  std::string why;
  const int fd = Mount(/*journal=*/false, &why);
  if (fd < 0) GTEST_SKIP() << why;
  EXPECT_TRUE(ProbeFilesystem(fd).freed_inodes_wait);
  EXPECT_TRUE(ProbeFilesystem(fd).freed_inodes_wait) << "the second answer comes from the cache";
  EXPECT_TRUE(ProbeFilesystem(fd).creates_keep_mode);
  ::close(fd);
}

TEST_F(Ext4ImageTest, WithAJournalFreedInodesAreReusedAtOnce) {
  VM_SKIP_UNLESS_ROOT("loop-mounts an ext4 image");
  std::string why;
  const int fd = Mount(/*journal=*/true, &why);
  if (fd < 0) GTEST_SKIP() << why;
  EXPECT_FALSE(ProbeFilesystem(fd).freed_inodes_wait);
  EXPECT_TRUE(ProbeFilesystem(fd).creates_keep_mode);
  ::close(fd);
}

}  // namespace
}  // namespace atomicwriter
