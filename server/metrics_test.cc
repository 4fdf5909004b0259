#include "server/metrics.h"

#include <gtest/gtest.h>

#include <limits>

namespace server {
namespace {

TEST(HistogramTest, BucketsAreCumulativeAndInclusive) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 20.0}) h.Observe(v);
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{2, 4, 4}));
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 21.65);
}

TEST(MetricsTextTest, RendersEachTypeWithEscapedLabelsAndHelp) {
  std::vector<MetricFamily> families;
  MetricFamily counter{"x_total", "Counts \\ things\nover lines", MetricType::kCounter, {}, {}};
  counter.values.push_back({{{"reason", "a\"b\\c\nd"}}, 3});
  families.push_back(counter);
  MetricFamily gauge{"y", "A gauge", MetricType::kGauge, {}, {}};
  gauge.values.push_back({{}, 0.25});
  families.push_back(gauge);
  MetricFamily hist{"z_seconds", "A histogram", MetricType::kHistogram, {}, {}};
  Histogram h({0.1, 2.5});
  h.Observe(0.2);
  hist.histograms.push_back({{{"op", "m"}}, h});
  families.push_back(hist);
  families.push_back({"empty_total", "Nothing yet", MetricType::kCounter, {}, {}});

  EXPECT_EQ(RenderPrometheusText(families),
            "# HELP x_total Counts \\\\ things\\nover lines\n"
            "# TYPE x_total counter\n"
            "x_total{reason=\"a\\\"b\\\\c\\nd\"} 3\n"
            "# HELP y A gauge\n"
            "# TYPE y gauge\n"
            "y 0.25\n"
            "# HELP z_seconds A histogram\n"
            "# TYPE z_seconds histogram\n"
            "z_seconds_bucket{op=\"m\",le=\"0.1\"} 0\n"
            "z_seconds_bucket{op=\"m\",le=\"2.5\"} 1\n"
            "z_seconds_bucket{op=\"m\",le=\"+Inf\"} 1\n"
            "z_seconds_sum{op=\"m\"} 0.2\n"
            "z_seconds_count{op=\"m\"} 1\n"
            "# HELP empty_total Nothing yet\n"
            "# TYPE empty_total counter\n");
}

TEST(MetricsTextTest, ValuesAsPrometheusWritesThem) {
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(600), "600");
  EXPECT_EQ(FormatMetricValue(1e-9), "1e-09");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

}  // namespace
}  // namespace server
