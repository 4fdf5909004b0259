#include "atomicwriter/filesystem_probe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "atomicwriter/ext4_image_fixture.h"

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
