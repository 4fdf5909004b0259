// The Env's helpers beyond the system calls themselves.
#include "atomicwriter/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "atomicwriter/fault_injection_env.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path().string() + "/env-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
};

// FileHolds compares every byte, across its 64 KiB reads, and leaves the file offset alone.
TEST_F(EnvTest, FileHoldsComparesEveryByteWithoutMovingTheOffset) {
  std::string data(200 * 1024, 'a');
  data[150 * 1024] = 'b';
  std::ofstream(dir_ + "/f", std::ios::binary) << data;
  const int fd = ::open((dir_ + "/f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  Env& env = *PosixEnv();
  const off_t size = static_cast<off_t>(data.size());
  EXPECT_TRUE(FileHolds(env, fd, data, size));
  EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 0);
  std::string other = data;
  other[150 * 1024] = 'c';  // differs in the third read only
  EXPECT_FALSE(FileHolds(env, fd, other, size));
  EXPECT_FALSE(FileHolds(env, fd, data.substr(1), size));  // sizes differ
  EXPECT_FALSE(FileHolds(env, fd, data + "x", size + 1));  // the file is shorter than said
  EXPECT_FALSE(FileHolds(env, fd, data, -1));
  // The file grew after its size was taken: the bytes past `data` count.
  EXPECT_FALSE(FileHolds(env, fd, data.substr(0, data.size() - 1), size - 1));
  // A read that fails is "does not hold" (a write then replaces the bytes).
  FaultInjectionEnv failing(&env);
  failing.FailNext("pread", EIO);
  EXPECT_FALSE(FileHolds(failing, fd, data, size));
  EXPECT_EQ(failing.failed_call(), "pread");
  ::close(fd);
}

// The fault injector's clocks move only when told, both together.
TEST_F(EnvTest, TheFaultInjectorsClocksMoveForwardWhenTold) {
  FaultInjectionEnv env(PosixEnv());
  const auto steady = env.SteadyNow();
  const auto wall = env.WallNow();
  env.AdvanceClock(std::chrono::hours(1));
  EXPECT_GE(env.SteadyNow() - steady, std::chrono::hours(1));
  EXPECT_GE(env.WallNow() - wall, std::chrono::hours(1));
  EXPECT_LT(env.SteadyNow() - steady, std::chrono::hours(1) + std::chrono::minutes(1));
}

}  // namespace
}  // namespace atomicwriter
