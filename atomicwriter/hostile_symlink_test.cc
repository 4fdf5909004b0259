// Someone with write access to a volume dir (a compromised container, a confused tool) replaces
// the writer's own names with symlinks pointing elsewhere. The writer must never follow them: the
// tree outside the volume dir stays byte for byte the same, and the volume ends up consistent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "atomicwriter/volume_inspector.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

namespace fs = std::filesystem;

class HostileSymlinkTest : public WriterTest {
 protected:
  void SetUp() override {
    WriterTest::SetUp();
    outside_ = root_ + "/outside";
    // Looks like a volume, with the payload's names, so a writer that follows links would find
    // "unchanged" files to keep and extra files to remove.
    fs::create_directories(outside_ + "/..2024_01_01_00_00_00.1/dir");
    fs::create_directories(outside_ + "/dir");
    for (const char* f : {"/a", "/dir/b", "/extra", "/..2024_01_01_00_00_00.1/a",
                          "/..2024_01_01_00_00_00.1/dir/b", "/..2024_01_01_00_00_00.1/extra"}) {
      std::ofstream(outside_ + f) << "outside" << f;
    }
    std::ofstream(outside_ + "/secret") << "do not read or delete";
  }

  std::string outside_;
};

struct HostileCase {
  const char* name;
  // Runs after a first good write of `v1`; gets the volume dir, the outside dir and the live
  // version's name.
  std::function<void(const fs::path& vol, const std::string& outside, const std::string& live)>
      attack;
  // A top-level entry the writer did not make points outside; docs/kubelet-behavior.md §2 step 10
  // leaves such entries alone, so only the outside tree and ..data are checked.
  bool foreign_top_level_entry = false;
};

TEST_F(HostileSymlinkTest, NothingOutsideTheVolumeIsReadWrittenOrDeleted) {
  const HostileCase cases[] = {
      {"data_absolute_outside",
       [](const fs::path& v, const std::string& out, const std::string&) {
         fs::remove(v / "..data");
         fs::create_directory_symlink(out, v / "..data");
       }},
      {"data_relative_outside",
       [](const fs::path& v, const std::string&, const std::string&) {
         fs::remove(v / "..data");
         fs::create_directory_symlink("../outside", v / "..data");
       }},
      {"data_to_parent",
       [](const fs::path& v, const std::string&, const std::string&) {
         fs::remove(v / "..data");
         fs::create_directory_symlink("..", v / "..data");
       }},
      {"live_version_dir_replaced",
       [](const fs::path& v, const std::string& out, const std::string& live) {
         fs::remove_all(v / live);
         fs::create_directory_symlink(out + "/..2024_01_01_00_00_00.1", v / live);
       }},
      {"data_tmp_to_outside",
       [](const fs::path& v, const std::string& out, const std::string&) {
         fs::create_directory_symlink(out, v / "..data_tmp");
       }},
      {"unpublished_version_dir_is_a_link",
       [](const fs::path& v, const std::string& out, const std::string&) {
         fs::create_directory_symlink(out + "/..2024_01_01_00_00_00.1",
                                      v / "..2023_01_01_00_00_00.7");
       }},
      {"file_in_live_version_replaced",
       [](const fs::path& v, const std::string& out, const std::string& live) {
         fs::remove(v / live / "a");
         fs::create_symlink(out + "/a", v / live / "a");
         fs::create_symlink(out + "/secret", v / live / "stolen");
       }},
      {"dir_in_live_version_replaced",
       [](const fs::path& v, const std::string& out, const std::string& live) {
         fs::remove_all(v / live / "dir");
         fs::create_directory_symlink(out + "/dir", v / live / "dir");
       }},
      {"top_level_name_hijacked",
       [](const fs::path& v, const std::string& out, const std::string&) {
         fs::remove(v / "dir");
         fs::create_directory_symlink(out + "/dir", v / "dir");
       },
       true},
      {"foreign_top_level_link_to_outside",
       [](const fs::path& v, const std::string& out, const std::string&) {
         fs::create_symlink(out + "/extra", v / "extra");
       },
       true},
  };
  const Payload v1 = MakePayload({{"a", "outside/a"}, {"dir/b", "outside/dir/b"}});
  const Payload v2 = MakePayload({{"a", "v2-a"}, {"dir/b", "v2-b"}});
  for (const HostileCase& c : cases) {
    SCOPED_TRACE(c.name);
    TearDown();
    SetUp();
    auto w = OpenWriter();
    auto r1 = w->Write(v1);
    ASSERT_TRUE(r1.ok());
    c.attack(fs::path(vol_), outside_, r1->ts_dir);
    const auto outside_before = SnapshotTree(outside_);

    // Same content first (a naive writer would see the outside copies as "unchanged"), then new.
    for (const Payload* p : {&v1, &v2}) {
      auto r = w->Write(*p);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(SnapshotTree(outside_), outside_before);
      if (!c.foreign_top_level_entry) {
        EXPECT_EQ(VisibleContent(vol_), ExpectedContent(*p));
        EXPECT_EQ(DescribeDebris(vol_, *p), "");
      }
      // Whatever happens, ..data ends up a link to a real version dir inside the volume.
      EXPECT_TRUE(fs::is_directory(fs::symlink_status(fs::path(vol_) / LiveTsDir())));
    }
  }
}

// The writer's durable pass (an fsync of every dir of the new version) opens each dir with the
// process's one beneath-walk (open_beneath.h): a dir of the new version replaced by a link
// between its files' write and that pass is refused as a link (ELOOP), never followed. (The
// writer's own walk, before, said ENOTDIR for it: the stricter answer of the two walks won.)
TEST_F(WriterTest, TheDurablePassRefusesALinkPlantedInTheNewVersionWithTheOneWalk) {
  const std::string outside = root_ + "/outside";
  std::filesystem::create_directories(outside);
  std::ofstream(outside + "/f") << "not the volume's";
  // After the write opened sub/ for its file, the next open of "sub" (the durable pass's) finds
  // a link there.
  class PlantingEnv final : public EnvWrapper {
   public:
    PlantingEnv(std::string vol, std::string outside)
        : EnvWrapper(PosixEnv()), vol_(std::move(vol)), outside_(std::move(outside)) {}
    int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
      Plant(path);
      return EnvWrapper::OpenAt(dirfd, path, flags, mode);
    }
    int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) override {
      Plant(rel);
      return EnvWrapper::OpenAt2Beneath(dirfd, rel, flags, mode);
    }
    bool planted = false;

   private:
    void Plant(const std::string& path) {
      if (path != "sub" || ++opens_ != 2) return;
      for (const auto& e : std::filesystem::directory_iterator(vol_)) {
        const std::string name = e.path().filename().string();
        if (!name.starts_with("..") || name == "..data") continue;
        std::filesystem::rename(e.path() / "sub", e.path() / "sub.real");
        std::filesystem::create_directory_symlink(outside_, e.path() / "sub");
        planted = true;
      }
    }
    std::string vol_, outside_;
    int opens_ = 0;
  } env(vol_, outside);
  Options options = SoleWriter();
  options.durable = true;
  options.fs = &env;
  auto writer = OpenWriter(options);
  ASSERT_NE(writer, nullptr);
  auto r = writer->Write({{"sub/f", {"v", 0644, std::nullopt}}});
  ASSERT_TRUE(env.planted);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().sys_errno(), ELOOP) << r.status().message();
  EXPECT_EQ(LiveTsDir(), "") << "nothing published";
  std::ifstream in(outside + "/f");
  std::string bytes;
  std::getline(in, bytes);
  EXPECT_EQ(bytes, "not the volume's");
}

}  // namespace
}  // namespace atomicwriter
