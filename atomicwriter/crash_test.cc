// Kills a writer process with SIGKILL at random moments while it alternates payloads, then checks
// that the volume shows one payload in full and that one more write repairs everything.
// Iterations: 200 by default; VM_CRASH_ITERATIONS=<n> for longer runs.
//
// The writing child says when it has made its first change to the volume dir, and pauses briefly
// after each change (PausingEnv), so most of a write's time lies between two of its changes and
// the kill, a random time after the first change, lands there on any machine. Before, the child
// said so before its first write: how often a kill found a write half done then depended on the
// machine (6 % of kills on an ext4 dir here, none of 200 in one CI run under ASan).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "atomicwriter/volume_inspector.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

// Every file carries the version; even and odd versions have different file sets, so crashes
// also land in link creation and pruning.
Payload VersionPayload(long v) {
  const std::string tag = "version " + std::to_string(v);
  if (v % 2 == 0) {
    return MakePayload({{"common", tag}, {"even/deep/file", tag}, {"even-top", tag}});
  }
  return MakePayload({{"common", tag}, {"odd/x", tag}, {"odd/y/z", tag}, {"odd-top", tag}});
}

// Forwards to the real calls. After each one that changes a directory entry or a file's bytes it
// writes one byte to `ready_fd` the first time, and sleeps.
class PausingEnv final : public EnvWrapper {
 public:
  explicit PausingEnv(int ready_fd) : EnvWrapper(PosixEnv()), ready_fd_(ready_fd) {}

  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
    return Paused(EnvWrapper::OpenAt(dirfd, path, flags, mode), (flags & O_CREAT) != 0);
  }
  int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) override {
    return Paused(EnvWrapper::OpenAt2Beneath(dirfd, rel, flags, mode), (flags & O_CREAT) != 0);
  }
  ssize_t WriteAll(int fd, const void* buf, size_t n) override {
    return Paused(EnvWrapper::WriteAll(fd, buf, n));
  }
  int MkdirAt(int dirfd, const std::string& path, mode_t mode) override {
    return Paused(EnvWrapper::MkdirAt(dirfd, path, mode));
  }
  int SymlinkAt(const std::string& link_target, int dirfd, const std::string& linkpath) override {
    return Paused(EnvWrapper::SymlinkAt(link_target, dirfd, linkpath));
  }
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override {
    return Paused(EnvWrapper::RenameAt(olddirfd, oldpath, newdirfd, newpath));
  }
  int UnlinkAt(int dirfd, const std::string& path, int flags) override {
    return Paused(EnvWrapper::UnlinkAt(dirfd, path, flags));
  }

 private:
  template <typename T>
  T Paused(T result, bool changes = true) {
    if (!changes) return result;
    const int saved = errno;  // the writer reads errno after a failed call
    if (ready_fd_ >= 0) {
      const char go = 'w';
      if (::write(ready_fd_, &go, 1) != 1) ::_exit(4);
      ::close(ready_fd_);
      ready_fd_ = -1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    errno = saved;
    return result;
  }

  int ready_fd_;
};

int Iterations() {
  const char* env = std::getenv("VM_CRASH_ITERATIONS");
  return env != nullptr ? std::atoi(env) : 200;
}

class CrashTest : public WriterTest {};

TEST_F(CrashTest, SigkillDuringWritesLeavesOnePayloadInFull) {
  const int iterations = Iterations();
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_us(0, 4000);
  int found_debris = 0;
  long final_version = -1;
  for (int i = 0; i < iterations; ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    // The child says, through a pipe, when its first write has made its first change; the kill
    // comes a random time after that. So the kill lands among the writes whatever the machine's
    // speed (under ASan the child had not begun 4 ms after fork on a loaded machine): the property
    // tested is the writer's.
    int ready[2];
    ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(ready[0]);
      static PausingEnv pausing(ready[1]);
      Options options = SoleWriter();
      options.fs = &pausing;
      auto w = AtomicWriter::Open(vol_, std::move(options));
      if (!w.ok()) ::_exit(2);
      for (long v = static_cast<long>(i) * 1000000;; ++v) {
        if (!(*w)->Write(VersionPayload(v)).ok()) ::_exit(3);
      }
    }
    ::close(ready[1]);
    char got = 0;
    const ssize_t n = ::read(ready[0], &got, 1);
    ::close(ready[0]);
    ASSERT_EQ(n, 1) << "the writer ended before its first write";
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited early with status " << status;

    const auto visible = VisibleContent(vol_);
    if (!visible.empty() || i > 0) {
      ASSERT_TRUE(visible.count("common")) << "no payload visible";
      const std::string tag = visible.at("common");
      const long v = std::stol(tag.substr(tag.find(' ') + 1));
      EXPECT_EQ(visible, ExpectedContent(VersionPayload(v))) << "torn volume at " << tag;
      if (DescribeDebris(vol_, VersionPayload(v)) != "") ++found_debris;
    }

    // The next start: one more write repairs everything and leaves no debris.
    final_version = -1 - i;
    auto w = AtomicWriter::Open(vol_, SoleWriter());
    ASSERT_TRUE(w.ok());
    auto r = (*w)->Write(VersionPayload(final_version));
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(DescribeDebris(vol_, VersionPayload(final_version)), "");
    ASSERT_EQ(VisibleContent(vol_), ExpectedContent(VersionPayload(final_version)));
  }
  RecordProperty("iterations_with_debris", found_debris);
  // The kills must really land inside writes, or the test proves nothing. With the pauses nearly
  // every kill finds a write half done (199 of 200 here); a quarter allows for a machine that
  // oversleeps.
  if (iterations >= 50) {
    EXPECT_GT(found_debris, iterations / 4);
  }
}

}  // namespace
}  // namespace atomicwriter
