#include "manifestdir/manifest_grace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/test_loop.h"

namespace manifestdir {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class ManifestGraceTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds window) {
    grace_.Start(loop_.get(), window,
                 [this](const std::vector<std::string>& g, const std::vector<std::string>& i) {
                   gone_.insert(gone_.end(), g.begin(), g.end());
                   invalid_.insert(invalid_.end(), i.begin(), i.end());
                   ++calls_;
                 });
  }
  void TearDown() override {
    grace_.Stop();
    EXPECT_TRUE(loop_.Close()) << "a handle was left open";
  }

  vmtest::TestLoop loop_;
  ManifestGrace grace_;
  std::vector<std::string> gone_;
  std::vector<std::string> invalid_;
  int calls_ = 0;
};

// A file unlinked and created again, or caught half-written, within the window: nothing reported.
TEST_F(ManifestGraceTest, WhatComesBackWithinTheWindowIsNeverReported) {
  Start(std::chrono::hours(1));
  EXPECT_TRUE(grace_.Gone("a.yaml"));
  EXPECT_TRUE(grace_.GonePending("a.yaml"));
  EXPECT_TRUE(grace_.Present("a.yaml"));
  EXPECT_FALSE(grace_.Present("a.yaml")) << "cancelled once";
  EXPECT_TRUE(grace_.Invalid("b.yaml"));
  EXPECT_TRUE(grace_.InvalidPending("b.yaml"));
  EXPECT_TRUE(grace_.Valid("b.yaml"));
  EXPECT_FALSE(grace_.InvalidPending("b.yaml"));
  EXPECT_EQ(grace_.pending(), 0u);
  loop_.RunUntilIdle(std::chrono::milliseconds(50));
  EXPECT_EQ(calls_, 0);
}

// Still gone or still invalid when the window ends: reported, each once.
TEST_F(ManifestGraceTest, WhatStaysGoneOrInvalidIsReportedOnce) {
  Start(std::chrono::milliseconds(1));
  EXPECT_TRUE(grace_.Gone("a.yaml"));
  EXPECT_TRUE(grace_.Invalid("b.yaml"));
  EXPECT_TRUE(grace_.Invalid("b.yaml")) << "a second failure keeps the first one's deadline";
  ASSERT_TRUE(loop_.RunUntil([&] { return gone_.size() + invalid_.size() == 2; }));
  EXPECT_THAT(gone_, ElementsAre("a.yaml"));
  EXPECT_THAT(invalid_, ElementsAre("b.yaml"));
  EXPECT_EQ(grace_.pending(), 0u);
  EXPECT_FALSE(grace_.Present("a.yaml")) << "reported: nothing left to cancel";
}

// A file gone while its failure waits is reported as gone, not as invalid.
TEST_F(ManifestGraceTest, GoneReplacesAPendingFailure) {
  Start(std::chrono::milliseconds(1));
  EXPECT_TRUE(grace_.Invalid("a.yaml"));
  EXPECT_TRUE(grace_.Gone("a.yaml"));
  EXPECT_FALSE(grace_.InvalidPending("a.yaml"));
  ASSERT_TRUE(loop_.RunUntil([&] { return !gone_.empty(); }));
  EXPECT_THAT(gone_, ElementsAre("a.yaml"));
  EXPECT_THAT(invalid_, IsEmpty());
}

// No window: the caller acts at once, nothing waits.
TEST_F(ManifestGraceTest, NoWindowMeansNow) {
  Start(std::chrono::milliseconds(0));
  EXPECT_FALSE(grace_.Gone("a.yaml"));
  EXPECT_FALSE(grace_.Invalid("a.yaml"));
  EXPECT_EQ(grace_.pending(), 0u);
}

}  // namespace
}  // namespace manifestdir
