// Fails every filesystem call of a write in turn (the k-th call for every k) and checks that the
// volume then shows the old or the new payload in full, and that the next write succeeds and
// leaves no debris. Also as a sole writer on a filesystem that withholds freed inodes, which
// spreads its versions (Options::replaced_version).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/fault_injection_env.h"
#include "atomicwriter/volume_inspector.h"
#include "atomicwriter/writer_test_fixture.h"

namespace atomicwriter {
namespace {

struct Scenario {
  const char* name;
  Payload before;  // written without faults first; empty map = fresh volume
  bool has_before;
  Payload after;
};

std::vector<Scenario> Scenarios() {
  Payload v1 = MakePayload({{"keep", "k1"}, {"gone", "g1"}, {"dir/a", "a1"}, {"dir/sub/b", "b1"}});
  Payload v2 = MakePayload({{"keep", "k2"}, {"new", "n2"}, {"dir/a", "a2"}, {"other/x/y", "y2"}});
  v2["keep"].mode = 0400;
  return {
      {"first_mount", {}, false, v1},
      {"update", v1, true, v2},
      {"no_change_with_debris", v1, true, v1},
  };
}

class FaultInjectionTest : public WriterTest,
                           public ::testing::WithParamInterface<std::tuple<int, bool, bool>> {};

TEST_P(FaultInjectionTest, EveryCallFailingLeavesOldOrNewInFull) {
  const auto [err, durable, spread] = GetParam();
  for (const Scenario& sc : Scenarios()) {
    SCOPED_TRACE(sc.name);
    // Count the calls of a clean run, then fail each one in turn (and one past the end, which
    // must not fail anything).
    int total = 0;
    for (int k = 0; k <= total + 1; ++k) {
      TearDown();
      SetUp();
      FaultInjectionEnv faulty(PosixEnv());
      Options o = SoleWriter();
      o.fs = &faulty;
      o.durable = durable;
      if (spread) {
        o.replaced_version = ReplacedVersion::kAtOnce;
        o.probe = ProbeAsIfFreedInodesWait;
      }
      auto w = OpenWriter(o);
      ASSERT_NE(w, nullptr);
      if (sc.has_before) {
        ASSERT_TRUE(w->Write(sc.before).ok());
      }
      if (sc.has_before && sc.before == sc.after) {
        // Debris a crash could have left, for the no-change write to clean up.
        std::filesystem::create_directory(vol_ + "/..2020_01_01_00_00_00.1");
        std::filesystem::create_symlink("..2020_01_01_00_00_00.1",
                                        vol_ + "/..volumemanager_tmp.00000000000000aa");
        std::filesystem::create_symlink("..data/stale", vol_ + "/stale");
      }
      faulty.FailCall(k, err);
      auto r = w->Write(sc.after);
      if (k == 0) {
        ASSERT_TRUE(r.ok()) << r.status().message();
        total = faulty.calls();
        ASSERT_GT(total, 5);
      }
      SCOPED_TRACE("failed call " + std::to_string(k) + " (" + faulty.failed_call() + ") of " +
                   std::to_string(total) + ": " + (r.ok() ? "ok" : r.status().message()));

      const auto visible = VisibleContent(vol_);
      const auto old_view = ExpectedContent(sc.before);
      const auto new_view = ExpectedContent(sc.after);
      EXPECT_TRUE(visible == old_view || visible == new_view);
      if (r.ok()) {
        EXPECT_EQ(visible, new_view);
        // A failure after the swap is reported as cleanup to retry, never as a failed write.
        if (r->cleanup_error.empty()) {
          EXPECT_EQ(DescribeDebris(vol_, sc.after), "");
        } else {
          EXPECT_NE(r->cleanup_error.find(std::strerror(err)), std::string::npos)
              << r->cleanup_error;
        }
      } else {
        EXPECT_EQ(r.status().sys_errno(), err) << r.status().message();
        // A write reported as failed never published: the volume still shows the old payload
        // (a first mount: nothing). Reporting failure after publishing makes the caller undo
        // a live volume.
        if (sc.before != sc.after) {
          EXPECT_EQ(visible, old_view);
        }
      }

      faulty.FailCall(0, 0);
      auto again = w->Write(sc.after);
      ASSERT_TRUE(again.ok()) << again.status().message();
      EXPECT_EQ(VisibleContent(vol_), new_view);
      EXPECT_EQ(DescribeDebris(vol_, sc.after), "");
      for (const auto& [path, file] : ReadVisibleFiles(vol_)) {
        EXPECT_EQ(file.mode, sc.after.at(path).mode) << path;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Errnos, FaultInjectionTest,
    ::testing::Combine(::testing::Values(ENOSPC, EIO), ::testing::Bool(), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<int, bool, bool>>& param_info) {
      return std::string(std::get<0>(param_info.param) == ENOSPC ? "ENOSPC" : "EIO") +
             (std::get<1>(param_info.param) ? "_durable" : "_plain") +
             (std::get<2>(param_info.param) ? "_spread" : "");
    });

}  // namespace
}  // namespace atomicwriter
