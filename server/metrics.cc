#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::Observe(double value) {
  // The first bucket whose upper bound is >= value ("le" is inclusive).
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  ++counts_[i];
  ++count_;
  sum_ += value;
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    running += counts_[i];
    out[i] = running;
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// HELP text escapes backslash and newline; label values also the double quote.
std::string Escape(const std::string& s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendLabels(std::string& out, const Labels& labels, const char* le = nullptr) {
  if (labels.empty() && le == nullptr) return;
  out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    out += Escape(value, true);
    out += '"';
  }
  if (le != nullptr) {
    if (!first) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

}  // namespace

std::string RenderPrometheusText(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    out += "# HELP " + f.name + " " + Escape(f.help, false) + "\n";
    out += "# TYPE " + f.name + " " + TypeName(f.type) + "\n";
    for (const auto& [labels, value] : f.values) {
      out += f.name;
      AppendLabels(out, labels);
      out += ' ' + FormatMetricValue(value) + '\n';
    }
    for (const auto& [labels, h] : f.histograms) {
      const std::vector<uint64_t> cumulative = h.CumulativeCounts();
      for (size_t i = 0; i < cumulative.size(); ++i) {
        out += f.name + "_bucket";
        AppendLabels(out, labels, FormatMetricValue(h.upper_bounds()[i]).c_str());
        out += ' ' + std::to_string(cumulative[i]) + '\n';
      }
      out += f.name + "_bucket";
      AppendLabels(out, labels, "+Inf");
      out += ' ' + std::to_string(h.count()) + '\n';
      out += f.name + "_sum";
      AppendLabels(out, labels);
      out += ' ' + FormatMetricValue(h.sum()) + '\n';
      out += f.name + "_count";
      AppendLabels(out, labels);
      out += ' ' + std::to_string(h.count()) + '\n';
    }
  }
  return out;
}

}  // namespace server
