#include "base/durable_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace base {
namespace {

namespace fs = std::filesystem;

class DurableFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/durable-file-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DurableFileTest, TempNamesAreUniquePerCallAndNameTheProcess) {
  std::set<std::string> names;
  for (int i = 0; i < 100; ++i) names.insert(DurableTempName("ownership.journal"));
  EXPECT_EQ(names.size(), 100u);
  const std::string one = *names.begin();
  EXPECT_EQ(one.rfind("ownership.journal.tmp." + std::to_string(::getpid()) + ".", 0), 0u) << one;
  EXPECT_NE(one, "ownership.journal.tmp");
}

// FileStamp changes when the file is replaced or rewritten, and is empty when it is missing.
TEST_F(DurableFileTest, FileStampChangesWithTheFileAndIsEmptyWhenMissing) {
  EXPECT_EQ(FileStamp(dir_ + "/none"), "");
  ASSERT_TRUE(WriteFileDurably(dir_, "f", "one").ok());
  const std::string first = FileStamp(dir_ + "/f");
  EXPECT_NE(first, "");
  EXPECT_EQ(FileStamp(dir_ + "/f"), first);
  ASSERT_TRUE(WriteFileDurably(dir_, "f", "two!").ok());  // a new inode, another size
  EXPECT_NE(FileStamp(dir_ + "/f"), first);
}

// ReadRegularFile reads what the file holds, whatever size it has or claims: empty, one byte
// short of the limit, exactly at it, one past it (refused), larger than its first read, and a
// /proc file whose stat says 0 bytes; anything but a regular file is refused by name.
TEST_F(DurableFileTest, ReadRegularFileReadsEverySizeUpToTheLimit) {
  for (const size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097},
                            size_t{70000}, size_t{200000}}) {
    std::string content(size, 'x');
    for (size_t i = 0; i < size; ++i) content[i] = static_cast<char>('a' + i % 26);
    ASSERT_TRUE(WriteFileDurably(dir_, "f", content).ok());
    auto read = ReadRegularFile(dir_ + "/f", 200000, false);
    ASSERT_TRUE(read.ok()) << size << ": " << read.status().message();
    EXPECT_EQ(*read, content) << size;
    if (size > 0) {
      auto at_limit = ReadRegularFile(dir_ + "/f", size, false);
      ASSERT_TRUE(at_limit.ok()) << size;
      EXPECT_EQ(at_limit->size(), size);
      auto over = ReadRegularFile(dir_ + "/f", size - 1, false);
      ASSERT_FALSE(over.ok()) << size;
      EXPECT_NE(over.status().message().find("larger than the limit of " +
                                             std::to_string(size - 1) + " bytes"),
                std::string::npos)
          << over.status().message();
    }
  }
  // stat says 0 bytes; the content is read in full all the same.
  auto status = ReadRegularFile("/proc/self/status", 1 << 20, true);
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->rfind("Name:", 0), 0u) << status->substr(0, 40);
  EXPECT_NE(status->find("\nVmRSS:"), std::string::npos);
  auto dir = ReadRegularFile(dir_, 1 << 20, false);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a regular file (a directory)"), std::string::npos)
      << dir.status().message();
}

// Two writers replacing one file at once (two daemons' compaction and rewrite, or the threads of
// one): each rename installs one writer's whole content, and no temporary file is left.
TEST_F(DurableFileTest, ConcurrentReplacementsNeverMixOrFail) {
  constexpr int kWriters = 4;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(kWriters, 0);
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      const std::string content(4096, static_cast<char>('a' + w));
      for (int i = 0; i < kRounds; ++i) {
        if (!WriteFileDurably(dir_, "f", content).ok()) ++failures[w];
      }
    });
  }
  bool mixed = false;
  for (int i = 0; i < 200; ++i) {
    auto data = ReadWholeFile(dir_ + "/f");
    if (!data.ok()) continue;  // not yet created
    if (data->size() != 4096 || data->find_first_not_of((*data)[0]) != std::string::npos) {
      mixed = true;
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(mixed);
  EXPECT_EQ(failures, std::vector<int>(kWriters, 0));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"f"});
}

}  // namespace
}  // namespace base
