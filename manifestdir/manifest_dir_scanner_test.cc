#include "manifestdir/manifest_dir_scanner.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/test_loop.h"

namespace manifestdir {
namespace {

using Scanner = ManifestDirScanner<std::string>;

struct Decoded {
  std::string text;
  std::thread::id thread;
};

TEST(ManifestDirScannerTest, ReadsAndDecodesOnThePoolAndDeliversOnTheLoop) {
  vmtest::TestLoop loop;
  vmtest::TempDir dir;
  vmtest::WriteFile(dir.File("a.yaml"), "one");
  ManifestDirScanner<Decoded> scanner({dir.path()}, [](const std::string&, const std::string& b) {
    return Decoded{b, std::this_thread::get_id()};
  });
  const auto start = scanner.ScanNow(ManifestScanScope::kReadAll);
  ASSERT_EQ(start.files.size(), 1u);
  ASSERT_TRUE(start.files[0].decoded);
  EXPECT_EQ(start.files[0].decoded->text, "one");

  std::vector<ManifestDirScanner<Decoded>::Outcome> outcomes;
  std::thread::id done_thread;
  scanner.Start(loop.get(), [&](ManifestDirScanner<Decoded>::Outcome o) {
    done_thread = std::this_thread::get_id();
    outcomes.push_back(std::move(o));
  });
  vmtest::WriteFile(dir.File("a.yaml"), "two");
  scanner.Request(ManifestScanScope::kNamed, {"a.yaml"});
  EXPECT_TRUE(outcomes.empty()) << "nothing is read on the caller's thread";
  ASSERT_TRUE(loop.RunUntil([&] { return !outcomes.empty(); }));
  ASSERT_EQ(outcomes[0].files.size(), 1u);
  ASSERT_TRUE(outcomes[0].files[0].decoded);
  EXPECT_EQ(outcomes[0].files[0].decoded->text, "two");
  EXPECT_NE(outcomes[0].files[0].decoded->thread, std::this_thread::get_id());
  EXPECT_EQ(done_thread, std::this_thread::get_id());
}

TEST(ManifestDirScannerTest, RequestsDuringAScanMergeIntoOneMore) {
  vmtest::TestLoop loop;
  vmtest::TempDir dir;
  vmtest::WriteFile(dir.File("a.yaml"), "a");
  vmtest::WriteFile(dir.File("b.yaml"), "b");
  Scanner scanner({dir.path()}, [](const std::string&, const std::string& b) { return b; });
  scanner.ScanNow(ManifestScanScope::kReadAll);
  std::vector<Scanner::Outcome> outcomes;
  scanner.Start(loop.get(), [&](Scanner::Outcome o) { outcomes.push_back(std::move(o)); });
  const uint64_t scans = scanner.scans();
  scanner.Request(ManifestScanScope::kNamed, {"a.yaml"});
  for (int i = 0; i < 50; ++i) scanner.Request(ManifestScanScope::kNamed, {"b.yaml"});
  scanner.Request(ManifestScanScope::kStatAll, {});
  ASSERT_TRUE(loop.RunUntil([&] { return scanner.idle(); }));
  EXPECT_EQ(scanner.scans() - scans, 2u);
  ASSERT_EQ(outcomes.size(), 2u);
  // The merged scan has the widest scope (a listing) and reads the named file whatever its stamp.
  EXPECT_EQ(outcomes[1].listing, ManifestDirScan::Listing::kListed);
  ASSERT_EQ(outcomes[1].files.size(), 1u);
  EXPECT_EQ(outcomes[1].files[0].name, "b.yaml");
}

TEST(ManifestDirScannerTest, NothingIsDeliveredAfterStop) {
  vmtest::TestLoop loop;
  vmtest::TempDir dir;
  vmtest::WriteFile(dir.File("a.yaml"), "a");
  int delivered = 0;
  {
    Scanner scanner({dir.path()}, [](const std::string&, const std::string& b) { return b; });
    scanner.Start(loop.get(), [&](Scanner::Outcome) { ++delivered; });
    scanner.Request(ManifestScanScope::kReadAll, {});
    scanner.Stop();
  }  // destroyed with the scan in flight
  loop.RunFor(std::chrono::milliseconds(50));
  EXPECT_EQ(delivered, 0);
}

}  // namespace
}  // namespace manifestdir
