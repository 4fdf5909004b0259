// Go's time.ParseDuration syntax, which the kubelet's duration flags use: a sequence of decimal
// numbers, each with an optional fraction and a unit ("ns", "us", "µs", "ms", "s", "m", "h"),
// e.g. "500ms", "1m30s", "1.5h". "0" needs no unit. Negative durations are rejected here: no
// flag of the daemon takes one. Values are Go's to the nanosecond (its float64 step for
// fractions included), except that a sum past the int64 range is an error: Go's unsigned sum wraps
// at 2^64, so two terms of 2^63 ns parse as 0 there.
#ifndef VOLUMEMANAGER_CONFIG_GO_DURATION_H_
#define VOLUMEMANAGER_CONFIG_GO_DURATION_H_

#include <chrono>
#include <string>

#include "base/status.h"

namespace config {

base::Result<std::chrono::nanoseconds> ParseGoDuration(const std::string& text);

// The shortest Go-style rendering: "1m0s" is "1m", "1500ms" is "1.5s".
std::string FormatGoDuration(std::chrono::nanoseconds d);

}  // namespace config

#endif  // VOLUMEMANAGER_CONFIG_GO_DURATION_H_
