// Metric values in the shape of the Prometheus data model, and their text exposition format
// (version 0.0.4, what /metrics serves and `promtool check metrics` validates).
//
// Histogram is a plain value the loop thread updates (Observe) and copies into a snapshot; the
// families are built on the loop thread and rendered on a server thread. Nothing here is
// thread-safe or needs to be: a snapshot is immutable once published.
#ifndef VOLUMEMANAGER_SERVER_METRICS_H_
#define VOLUMEMANAGER_SERVER_METRICS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace server {

// Cumulative buckets with fixed upper bounds, as a Prometheus histogram (the +Inf bucket is
// implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Observations at or below each bound (cumulative), one per bound.
  std::vector<uint64_t> CumulativeCounts() const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is (bounds_.back(), +Inf)
  uint64_t count_ = 0;
  double sum_ = 0;
};

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// One metric name with its help text, type and samples (one per label set). Counter names end in
// "_total".
struct MetricFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::pair<Labels, double>> values;         // counters and gauges
  std::vector<std::pair<Labels, Histogram>> histograms;  // histograms
};

// The text exposition format: # HELP and # TYPE per family, then its samples; label values and
// help text escaped. Families without samples are still listed (HELP and TYPE), so a scraper sees
// every name.
std::string RenderPrometheusText(const std::vector<MetricFamily>& families);

// A number as Prometheus writes it: the shortest text that reads back to the same double, +Inf,
// -Inf, NaN.
std::string FormatMetricValue(double value);

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_METRICS_H_
