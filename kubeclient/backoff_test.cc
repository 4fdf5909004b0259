#include "kubeclient/backoff.h"

#include <gtest/gtest.h>

namespace kubeclient {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesToTheCapWithJitterAndResetsAfterQuiet) {
  auto now = std::chrono::steady_clock::time_point{};
  double r = 0.0;
  Backoff backoff(
      {}, [&] { return now; }, [&] { return r; });
  const std::vector<long long> expected = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
  for (long long e : expected) {
    EXPECT_EQ(backoff.Next(), milliseconds(e));
    now += std::chrono::seconds(1);
  }
  r = 0.5;  // jitter 1.0: wait in [d, 2d)
  EXPECT_EQ(backoff.Next(), milliseconds(45000));
  now += std::chrono::minutes(3);  // more than 2 min without a wait
  r = 0.0;
  EXPECT_EQ(backoff.Next(), milliseconds(800));
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), milliseconds(800));
}

}  // namespace
}  // namespace kubeclient
