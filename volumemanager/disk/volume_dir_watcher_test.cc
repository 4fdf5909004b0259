#include "volumemanager/disk/volume_dir_watcher.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/skip.h"
#include "tests/support/test_loop.h"

namespace volumemanager {
namespace {

namespace fs = std::filesystem;
using Arming = VolumeDirWatcher::Arming;
using State = VolumeDirWatcher::State;

const VolumeKey kSentinel{"sentinel-uid", "sentinel"};
const VolumeKey kA{"uid-a", "config"};
const VolumeKey kB{"uid-b", "config"};

// The descriptor numbers of this process's open inotify instances.
std::vector<std::string> InotifyFdNumbers() {
  std::vector<std::string> fds;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (fs::read_symlink(e.path(), ec).string() == "anon_inode:inotify") {
      fds.push_back(e.path().filename().string());
    }
  }
  return fds;
}

int InotifyFds() { return static_cast<int>(InotifyFdNumbers().size()); }

// Kernel watches held by this process's inotify instances (fdinfo lists one line per watch).
int KernelWatches() {
  int n = 0;
  for (const std::string& fd : InotifyFdNumbers()) {
    std::ifstream info("/proc/self/fdinfo/" + fd);
    for (std::string line; std::getline(info, line);) n += line.starts_with("inotify wd:");
  }
  return n;
}

class VolumeDirWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // tmpfs when there is one: the overflow test creates some 16,000 entries.
    std::string tmpl =
        (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
        "/volume-dir-watcher-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    VolumeDirWatcherOptions options;
    options.env = &env_;
    ASSERT_TRUE(watcher_.Start(loop_.get(), Handler(), options).ok());
    sentinel_dir_ = Volume("sentinel");
    ASSERT_TRUE(watcher_.Watch(kSentinel, sentinel_dir_).ok());
  }

  void TearDown() override {
    watcher_.Stop();
    EXPECT_TRUE(loop_.Close());  // no handle left open
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    fs::remove_all(root_);
  }

  VolumeDirWatcherHandler Handler() {
    return {
        [this](const VolumeKey& id) {
          if (id == kSentinel) {
            ++sentinel_swaps_;
            return;
          }
          swapped_.push_back(id);
          if (on_swapped_) on_swapped_(id);
        },
        [this](const VolumeKey& id) { lost_.push_back(id); },
        [this] { ++overflows_; },
        [this] { ++mount_table_changed_; },
    };
  }

  // A volume dir as the kubelet leaves it: a version dir and `..data` pointing at it.
  std::string Volume(const std::string& name) {
    std::string dir = root_ + "/pods/" + name + "/volumes/kubernetes.io~configmap/" + name;
    fs::create_directories(dir);
    Swap(dir);
    return dir;
  }

  // The kubelet's AtomicWriter's publish: a new version dir, `..data_tmp` pointing at it, renamed
  // over `..data`.
  void Swap(const std::string& dir) {
    const std::string version = "..2026_11_24_00_00_00." + std::to_string(++versions_);
    fs::create_directory(dir + "/" + version);
    std::ofstream(dir + "/" + version + "/key") << "value";
    fs::create_symlink(version, dir + "/..data_tmp");
    fs::rename(dir + "/..data_tmp", dir + "/..data");
  }

  // Runs the loop until every event queued so far has been read and reported: a swap in the
  // sentinel volume, queued after them, is reported in their burst or a later one.
  void Drain() {
    const int before = sentinel_swaps_;
    Swap(sentinel_dir_);
    ASSERT_TRUE(loop_.RunUntil([&] { return sentinel_swaps_ > before; }));
  }

  // False when this process may not mount (not root, or a sandbox without CAP_SYS_ADMIN).
  bool Mount(const std::string& dir) {
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) {
      EXPECT_EQ(errno, EPERM) << "mount tmpfs on " << dir << ": " << std::strerror(errno);
      return false;
    }
    mounts_.push_back(dir);
    return true;
  }

  vmtest::TestLoop loop_;
  VolumeDirWatcher watcher_;
  std::string root_;
  std::string sentinel_dir_;
  std::string refused_;  // a watch of this path fails with ENOSPC
  // The system calls, but a watch of `refused_` fails with ENOSPC.
  class RefusingEnv final : public atomicwriter::EnvWrapper {
   public:
    explicit RefusingEnv(const std::string* refused)
        : EnvWrapper(atomicwriter::PosixEnv()), refused_(refused) {}
    int InotifyAddWatch(int inotify_fd, const std::string& path, uint32_t mask) override {
      if (path == *refused_) {
        errno = ENOSPC;
        return -1;
      }
      return EnvWrapper::InotifyAddWatch(inotify_fd, path, mask);
    }

   private:
    const std::string* refused_;
  };
  RefusingEnv env_{&refused_};
  std::vector<std::string> mounts_;
  int versions_ = 0;
  int sentinel_swaps_ = 0;
  std::vector<VolumeKey> swapped_;
  std::vector<VolumeKey> lost_;
  int overflows_ = 0;
  uint64_t mount_table_changed_ = 0;  // the handler's calls
  std::function<void(const VolumeKey&)> on_swapped_;
};

TEST_F(VolumeDirWatcherTest, ASwapIsReportedOncePerBurst) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  // Three swaps queued before the loop reads: one read, one report.
  Swap(a);
  Swap(a);
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
  // The next burst is reported again.
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, (std::vector<VolumeKey>{kA, kA}));
  EXPECT_EQ(watcher_.stats().swaps_reported, 2 + static_cast<uint64_t>(sentinel_swaps_));
}

TEST_F(VolumeDirWatcherTest, EverySwapIsReportedWhoeverMadeIt) {
  const std::string dir = root_ + "/pods/c/volumes/kubernetes.io~configmap/c";
  fs::create_directories(dir + "/..2026_11_24_00_00_00.1");
  fs::create_directories(dir + "/..2026_11_24_00_00_00.2");
  ASSERT_EQ(*watcher_.Watch(kA, dir), Arming::kArmed);
  // `..data` created in place (no staging link).
  fs::create_symlink("..2026_11_24_00_00_00.1", dir + "/..data");
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
  // The daemon's own writer: its staging link renamed over `..data`.
  fs::create_symlink("..2026_11_24_00_00_00.2", dir + "/..volumemanager_tmp.0123456789abcdef");
  fs::rename(dir + "/..volumemanager_tmp.0123456789abcdef", dir + "/..data");
  Drain();
  EXPECT_EQ(swapped_, (std::vector<VolumeKey>{kA, kA}));
}

TEST_F(VolumeDirWatcherTest, OtherEntriesAreNotReported) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  fs::create_directory(a + "/..2026_11_24_01_00_00.7");              // a version in progress
  fs::create_symlink("..2026_11_24_01_00_00.7", a + "/..data_tmp");  // staged, not published
  fs::remove(a + "/..data_tmp");
  fs::create_symlink("..data/key", a + "/key");            // a top-level link
  std::ofstream(a + "/user-file") << "x";                  // a file someone put there
  fs::rename(a + "/user-file", a + "/user-file.renamed");  // IN_MOVED_TO, other name
  fs::create_symlink("..2026_11_24_01_00_00.7", a + "/..volumemanager_tmp.0123456789abcdef");
  fs::rename(a + "/..volumemanager_tmp.0123456789abcdef", a + "/..data2");
  Drain();
  EXPECT_TRUE(swapped_.empty());
  EXPECT_GE(watcher_.stats().events_read, 7u);  // the events were read, and filtered
}

TEST_F(VolumeDirWatcherTest, VolumesDoNotSeeEachOthersSwaps) {
  const std::string a = Volume("a");
  const std::string b = Volume("b");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, b), Arming::kArmed);
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
  swapped_.clear();
  Swap(b);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kB});
}

TEST_F(VolumeDirWatcherTest, ARemovedDirIsLostUntilRearmed) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  fs::remove_all(a);  // the kubelet's teardown
  Drain();
  EXPECT_EQ(lost_, std::vector<VolumeKey>{kA});  // once, for IN_DELETE_SELF and IN_IGNORED
  EXPECT_EQ(watcher_.state(kA), State::kUnarmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 1u);  // the sentinel's
  EXPECT_EQ(watcher_.stats().unarmed, 1u);

  // Set up again: nothing is reported before the caller re-arms.
  Volume("a");
  Swap(a);
  Drain();
  EXPECT_TRUE(swapped_.empty());
  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
  EXPECT_EQ(lost_.size(), 1u);
  EXPECT_EQ(watcher_.stats().losses_reported, 1u);
}

TEST_F(VolumeDirWatcherTest, ARenamedDirIsLostAndItsWatchReleased) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  fs::rename(a, a + ".moved");
  Drain();
  EXPECT_EQ(lost_, std::vector<VolumeKey>{kA});
  // The kernel watch on the moved dir is gone: a swap there is not even read. A drain alone
  // reads a known number of events; with the swap in the moved dir, the same number.
  Drain();  // reads the IN_IGNORED of the released watch
  uint64_t before = watcher_.stats().events_read;
  Drain();
  const uint64_t drain_alone = watcher_.stats().events_read - before;
  before = watcher_.stats().events_read;
  Swap(a + ".moved");
  Drain();
  EXPECT_EQ(watcher_.stats().events_read - before, drain_alone);
  EXPECT_TRUE(swapped_.empty());
}

TEST_F(VolumeDirWatcherTest, IdsOnOneDirShareAWatchThatGoesWithTheLast) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, a), Arming::kArmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 2u);  // the sentinel's and one for both
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, (std::vector<VolumeKey>{kA, kB}));
  swapped_.clear();

  watcher_.Unwatch(kA);  // the watch stays for B
  EXPECT_EQ(watcher_.state(kA), State::kUnknown);
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kB});
  swapped_.clear();

  watcher_.Unwatch(kB);
  EXPECT_EQ(watcher_.stats().kernel_watches, 1u);
  Swap(a);
  Drain();
  EXPECT_TRUE(swapped_.empty());
}

TEST_F(VolumeDirWatcherTest, ADirRecreatedWithANewInodeGetsANewWatch) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, a), Arming::kArmed);
  fs::rename(a, a + ".old");
  Volume("a");
  Drain();
  EXPECT_EQ(lost_, (std::vector<VolumeKey>{kA, kB}));

  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  Swap(a);
  Swap(a + ".old");
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});  // B waits for its own re-arm
  swapped_.clear();

  ASSERT_EQ(*watcher_.Rearm(kB), Arming::kArmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 2u);
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, (std::vector<VolumeKey>{kA, kB}));
}

TEST_F(VolumeDirWatcherTest, AnIdMovedToAnotherDirReleasesItsOldWatch) {
  const std::string a = Volume("a");
  const std::string b = Volume("b");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kA, b), Arming::kArmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 2u);
  Swap(a);
  Drain();
  EXPECT_TRUE(swapped_.empty());
  Swap(b);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
  // Arming again on the same inode keeps the one watch.
  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 2u);
}

// A tmpfs mounted on a watched dir (the kubelet's, for secret and projected volumes) hides it: no
// event says so, and swaps inside are not seen until the caller watches again. Its unmount is a
// loss.
TEST_F(VolumeDirWatcherTest, ATmpfsMountedOverTheDirNeedsARearmAndItsUnmountIsALoss) {
  const std::string dir = Volume("secret");
  ASSERT_EQ(*watcher_.Watch(kA, dir), Arming::kArmed);
  if (!Mount(dir)) VM_SKIP_NEEDS_ROOT(std::string("mount tmpfs: ") + std::strerror(errno));
  Swap(dir);  // `..data` inside the mount
  Swap(dir);
  Drain();
  EXPECT_TRUE(swapped_.empty());
  EXPECT_TRUE(lost_.empty());

  ASSERT_EQ(*watcher_.Watch(kA, dir), Arming::kArmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 2u);  // the underlying dir's watch was released
  Swap(dir);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});

  ASSERT_EQ(::umount2(dir.c_str(), 0), 0) << std::strerror(errno);
  mounts_.pop_back();
  Drain();
  EXPECT_EQ(lost_, std::vector<VolumeKey>{kA});  // once, for IN_UNMOUNT and IN_IGNORED
  EXPECT_EQ(watcher_.state(kA), State::kUnarmed);

  // Re-armed, it watches what is at the path now: the dir under the former mount.
  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  swapped_.clear();
  Swap(dir);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
}

// StillWatching: true while the path leads to the watched inode, and then it drops no report; false
// for an id not armed and for a path that leads elsewhere; it adds no kernel watch.
TEST_F(VolumeDirWatcherTest, StillWatchingTellsWhetherThePathLeadsToTheWatchedInode) {
  const std::string dir = Volume("a");
  EXPECT_FALSE(watcher_.StillWatching(kA));  // never watched
  ASSERT_EQ(*watcher_.Watch(kA, dir), Arming::kArmed);
  const int kernel_watches = KernelWatches();
  EXPECT_TRUE(watcher_.StillWatching(kA));
  Swap(dir);  // queued, not yet read
  EXPECT_TRUE(watcher_.StillWatching(kA));
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
  EXPECT_EQ(KernelWatches(), kernel_watches);

  // Another dir at the path (the loss not read yet): no, and nothing is watched there.
  fs::rename(dir, dir + ".old");
  Volume("a");
  EXPECT_FALSE(watcher_.StillWatching(kA));
  EXPECT_EQ(KernelWatches(), kernel_watches);
  Drain();
  EXPECT_EQ(lost_, std::vector<VolumeKey>{kA});
  EXPECT_FALSE(watcher_.StillWatching(kA));  // unarmed
  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  EXPECT_TRUE(watcher_.StillWatching(kA));

  // Gone: no.
  fs::remove_all(root_ + "/pods/a");
  EXPECT_FALSE(watcher_.StillWatching(kA));

  // A tmpfs mounted over the dir: no event, and the check finds it.
  const std::string secret = Volume("secret");
  ASSERT_EQ(*watcher_.Watch(kB, secret), Arming::kArmed);
  const int before_mount = KernelWatches();
  if (!Mount(secret)) VM_SKIP_NEEDS_ROOT(std::string("mount tmpfs: ") + std::strerror(errno));
  EXPECT_FALSE(watcher_.StillWatching(kB));
  EXPECT_EQ(KernelWatches(), before_mount);
  ASSERT_EQ(*watcher_.Rearm(kB), Arming::kArmed);
  EXPECT_TRUE(watcher_.StillWatching(kB));
}

// WatchHolds: true without a filesystem call until a change of the mount table is read; then one
// walk, which finds a tmpfs mounted over the dir, and whose true answer holds again without one.
// A dir renamed away is told by its loss event, not by WatchHolds.
TEST_F(VolumeDirWatcherTest, WatchHoldsWalksOnlyAfterTheMountTableChanged) {
  const std::string dir = Volume("a");
  EXPECT_TRUE(watcher_.FollowsMountTable());
  EXPECT_FALSE(watcher_.WatchHolds(kA));  // never watched
  ASSERT_EQ(*watcher_.Watch(kA, dir), Arming::kArmed);
  // The loop does not run in between: no change of the table can be read.
  const uint64_t without_walk = watcher_.stats().checks_without_walk;
  EXPECT_TRUE(watcher_.WatchHolds(kA));
  EXPECT_TRUE(watcher_.WatchHolds(kA));
  EXPECT_EQ(watcher_.stats().checks_without_walk, without_walk + 2);

  // Renamed away, another dir at the path: the loss is read and reported; then no.
  fs::rename(dir, dir + ".old");
  Volume("a");
  Drain();
  EXPECT_EQ(lost_, std::vector<VolumeKey>{kA});
  EXPECT_FALSE(watcher_.WatchHolds(kA));
  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  EXPECT_TRUE(watcher_.WatchHolds(kA));

  // A tmpfs mounted over another volume's dir: once the change is read, each id walks once.
  const std::string secret = Volume("secret");
  ASSERT_EQ(*watcher_.Watch(kB, secret), Arming::kArmed);
  const uint64_t changes = watcher_.stats().mount_table_changes;
  if (!Mount(secret)) VM_SKIP_NEEDS_ROOT(std::string("mount tmpfs: ") + std::strerror(errno));
  ASSERT_TRUE(loop_.RunUntil([&] { return watcher_.stats().mount_table_changes > changes; }));
  // One wake-up per change, not a level-triggered spin (other processes' mounts may add a few).
  const uint64_t after_mount = watcher_.stats().mount_table_changes;
  loop_.RunFor(std::chrono::milliseconds(100));
  EXPECT_LE(watcher_.stats().mount_table_changes, after_mount + 5);
  // Each change read is told to the handler, and the table is still followed.
  EXPECT_EQ(mount_table_changed_, watcher_.stats().mount_table_changes);
  EXPECT_TRUE(watcher_.FollowsMountTable());
  const uint64_t before_walks = watcher_.stats().checks_without_walk;
  EXPECT_FALSE(watcher_.WatchHolds(kB));  // walked: the path leads into the mount
  EXPECT_TRUE(watcher_.WatchHolds(kA));   // walked: still the watched inode
  EXPECT_EQ(watcher_.stats().checks_without_walk, before_walks);
  EXPECT_TRUE(watcher_.WatchHolds(kA));  // remembered
  EXPECT_EQ(watcher_.stats().checks_without_walk, before_walks + 1);
  ASSERT_EQ(*watcher_.Rearm(kB), Arming::kArmed);  // now on the mount's root
  EXPECT_TRUE(watcher_.WatchHolds(kB));
  EXPECT_EQ(watcher_.stats().checks_without_walk, before_walks + 2);
}

// Beneath the root dir, StillWatching walks as Watch does: a symlink planted on the way is not
// followed, even one that leads back to the watched dir itself.
TEST_F(VolumeDirWatcherTest, StillWatchingFollowsNoLinkBeneathTheRoot) {
  VolumeDirWatcher beneath;
  VolumeDirWatcherOptions options;
  options.env = &env_;
  options.root_dir = root_;
  ASSERT_TRUE(beneath.Start(loop_.get(), Handler(), options).ok());
  const std::string dir = Volume("a");
  ASSERT_EQ(*beneath.Watch(kA, dir), Arming::kArmed);
  EXPECT_TRUE(beneath.StillWatching(kA));
  struct stat watched {};
  ASSERT_EQ(::stat(dir.c_str(), &watched), 0);
  // pods/a/volumes becomes a link to where it was moved: the path string still leads to the
  // watched inode, the walk refuses the link.
  const std::string volumes = root_ + "/pods/a/volumes";
  fs::rename(volumes, volumes + ".moved");
  fs::create_directory_symlink("volumes.moved", volumes);
  struct stat through_link {};
  ASSERT_EQ(::stat(dir.c_str(), &through_link), 0);
  ASSERT_EQ(through_link.st_ino, watched.st_ino);
  EXPECT_FALSE(beneath.StillWatching(kA));
  EXPECT_FALSE(beneath.Rearm(kA).ok());  // Watch refuses it alike
  fs::remove(volumes);
  fs::rename(volumes + ".moved", volumes);
  ASSERT_EQ(*beneath.Rearm(kA), Arming::kArmed);
  EXPECT_TRUE(beneath.StillWatching(kA));
  beneath.Stop();
}

// Polled (the watch limit): never "still watching".
TEST_F(VolumeDirWatcherTest, APolledVolumeIsNotStillWatched) {
  refused_ = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, refused_), Arming::kPolled);
  EXPECT_FALSE(watcher_.StillWatching(kA));
}

TEST_F(VolumeDirWatcherTest, AQueueOverflowIsReportedAndRearmFindsWhatItHid) {
  int max_queued = 0;
  std::ifstream("/proc/sys/fs/inotify/max_queued_events") >> max_queued;
  if (max_queued <= 0 || max_queued > (1 << 20)) {
    GTEST_SKIP() << "fs.inotify.max_queued_events is " << max_queued;
  }
  const std::string a = Volume("a");
  const std::string b = Volume("b");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, b), Arming::kArmed);
  // More events than the queue holds while the loop does not read (distinct names: the kernel
  // merges only an event identical to the last one queued).
  for (int i = 0; i <= max_queued; ++i) {
    fs::create_symlink("..data/key", a + "/f" + std::to_string(i));
  }
  fs::remove_all(b);  // its IN_DELETE_SELF and IN_IGNORED are dropped
  ASSERT_TRUE(loop_.RunUntil([&] { return overflows_ > 0; }));
  Drain();
  EXPECT_EQ(overflows_, 1);
  EXPECT_EQ(watcher_.stats().overflows, 1u);
  EXPECT_TRUE(lost_.empty());
  EXPECT_EQ(watcher_.state(kB), State::kArmed);  // as far as the watcher can know

  // What the caller does next: rearm every id and verify its volume. An intact watch stays; the
  // one of the removed dir is found gone and released.
  ASSERT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  auto rearmed = watcher_.Rearm(kB);
  ASSERT_FALSE(rearmed.ok());
  EXPECT_EQ(rearmed.status().sys_errno(), ENOENT);
  EXPECT_EQ(watcher_.state(kB), State::kUnarmed);
  EXPECT_EQ(watcher_.stats().kernel_watches, 2u);  // the sentinel's and A's
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
}

TEST_F(VolumeDirWatcherTest, TheWatchLimitMakesAVolumePolled) {
  const std::string a = Volume("a");
  refused_ = a;
  auto armed = watcher_.Watch(kA, a);
  ASSERT_TRUE(armed.ok()) << armed.status().message();
  EXPECT_EQ(*armed, Arming::kPolled);
  EXPECT_EQ(watcher_.state(kA), State::kPolled);
  EXPECT_EQ(watcher_.stats().polled, 1u);
  Swap(a);
  Drain();
  EXPECT_TRUE(swapped_.empty());

  // Still refused at the next resync, then accepted.
  EXPECT_EQ(*watcher_.Rearm(kA), Arming::kPolled);
  EXPECT_EQ(watcher_.stats().polled, 1u);
  refused_.clear();
  EXPECT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  EXPECT_EQ(watcher_.stats().polled, 0u);
  Swap(a);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});

  // A polled id that goes is no longer counted.
  refused_ = a;
  EXPECT_EQ(*watcher_.Rearm(kA), Arming::kPolled);
  watcher_.Unwatch(kA);
  EXPECT_EQ(watcher_.stats().polled, 0u);
}

TEST_F(VolumeDirWatcherTest, OtherFailuresAreErrorsNamingTheDir) {
  const std::string missing = root_ + "/pods/m/volumes/kubernetes.io~configmap/m";
  auto r = watcher_.Watch(kA, missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().sys_errno(), ENOENT);
  EXPECT_NE(r.status().message().find(missing), std::string::npos) << r.status().message();
  EXPECT_EQ(watcher_.state(kA), State::kUnarmed);
  EXPECT_EQ(watcher_.stats().polled, 0u);

  // A link at the volume dir's path is not followed; a file is not a dir.
  const std::string a = Volume("a");
  const std::string link = root_ + "/link";
  fs::create_directory_symlink(a, link);
  r = watcher_.Watch(kB, link);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().sys_errno(), ENOTDIR);
  r = watcher_.Watch(kB, a + "/..data/key");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().sys_errno(), ENOTDIR);

  // The id is kept: a rearm once the dir exists arms it.
  Volume("m");
  EXPECT_EQ(*watcher_.Rearm(kA), Arming::kArmed);
  EXPECT_FALSE(watcher_.Rearm(VolumeKey{"uid-x", "never-watched"}).ok());
}

TEST_F(VolumeDirWatcherTest, NothingIsReportedAfterStopAndTheFdIsClosed) {
  const std::string a = Volume("a");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  const int fds = InotifyFds();
  Swap(a);  // queued, never read
  watcher_.Stop();
  EXPECT_TRUE(loop_.Close());
  EXPECT_TRUE(swapped_.empty());
  EXPECT_EQ(InotifyFds(), fds - 1);
  EXPECT_FALSE(watcher_.Watch(kB, a).ok());
}

TEST_F(VolumeDirWatcherTest, AHandlerThatStopsEndsTheBurst) {
  const std::string a = Volume("a");
  const std::string b = Volume("b");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, b), Arming::kArmed);
  on_swapped_ = [&](const VolumeKey&) { watcher_.Stop(); };
  Swap(a);
  Swap(b);  // one burst, A's report first
  ASSERT_TRUE(loop_.RunUntil([&] { return !swapped_.empty(); }));
  EXPECT_TRUE(loop_.Close());
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
}

TEST_F(VolumeDirWatcherTest, AReportForAnIdTheHandlerUnwatchedIsDropped) {
  const std::string a = Volume("a");
  const std::string b = Volume("b");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, b), Arming::kArmed);
  on_swapped_ = [&](const VolumeKey& id) {
    if (id == kA) watcher_.Unwatch(kB);
  };
  Swap(a);
  Swap(b);  // one burst: B's report is read before A's handler unwatches it
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kA});
}

TEST_F(VolumeDirWatcherTest, AThrowingHandlerDoesNotStopTheOthers) {
  const std::string a = Volume("a");
  const std::string b = Volume("b");
  ASSERT_EQ(*watcher_.Watch(kA, a), Arming::kArmed);
  ASSERT_EQ(*watcher_.Watch(kB, b), Arming::kArmed);
  on_swapped_ = [&](const VolumeKey& id) {
    if (id == kA) throw std::runtime_error("handler failed");
  };
  Swap(a);
  Swap(b);
  Drain();
  EXPECT_EQ(swapped_, (std::vector<VolumeKey>{kA, kB}));
  // And the watcher keeps reading.
  swapped_.clear();
  Swap(b);
  Drain();
  EXPECT_EQ(swapped_, std::vector<VolumeKey>{kB});
}

}  // namespace
}  // namespace volumemanager
