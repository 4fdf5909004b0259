#include "cmd/volumemanager/process_hardening.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>

namespace volumemanager {
namespace {

TEST(ProcessHardeningTest, TheProcessIsNotDumpable) {
  ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
  ASSERT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
  ASSERT_TRUE(MakeNotDumpable().ok());
  EXPECT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
  ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);  // leave the test binary as it was
}

}  // namespace
}  // namespace volumemanager
