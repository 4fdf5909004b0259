// RFC 3339 time text, the one formatter and parser of the tree: Kubernetes' metav1.Time
// ("2026-11-30T12:00:00Z"), metav1.MicroTime ("2026-11-30T12:00:00.123456Z"), the log and
// /debug/state timestamps, and every time the API server, the kubelet or an exec plugin writes.
//
// Plain digits and days-from-civil arithmetic: no strftime, strptime, gmtime_r or timegm, so no
// locale, no time zone database and no shared state. Safe on any thread.
#ifndef VOLUMEMANAGER_BASE_RFC3339_H_
#define VOLUMEMANAGER_BASE_RFC3339_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace base {

// Room FormatRfc3339To needs: any year a time_point can hold, nine fractional digits, "Z".
inline constexpr size_t kRfc3339MaxSize = 48;

// `t` in UTC with a "Z" zone and `fraction_digits` (0-9, clamped) fractional digits, truncated
// towards the past (never rounded; before 1970 too, as Go formats): 0 is metav1.Time
// ("2026-11-30T12:00:00Z"), 3 milliseconds, 6 metav1.MicroTime ("2026-11-30T12:00:00.123456Z").
// Years 0-9999 have four digits (every year system_clock's nanoseconds reach, 1677-2262).
std::string FormatRfc3339(std::chrono::system_clock::time_point t, int fraction_digits = 0);
// The same text written to `out` (at least kRfc3339MaxSize bytes), not NUL-terminated; returns
// its length. No allocation, for hot paths (the JSON log formatter).
size_t FormatRfc3339To(std::chrono::system_clock::time_point t, int fraction_digits, char* out);

// The time `text` names, as Go's time.Parse(time.RFC3339 or RFC3339Nano) reads it on its RFC 3339
// path (what Kubernetes' metav1.Time and MicroTime unmarshal with):
//   YYYY-MM-DD "T" HH:MM:SS [ "." 1*DIGIT ] ( "Z" / ("+" / "-") HH:MM )
// exactly that, the offset applied. Fields are range-checked: month 1-12, day within its month
// (29 February in leap years only), hour 0-23, minute and second 0-59 (a leap second, 60, is
// refused, as Go refuses it), offset hours 0-23 and minutes 0-59. Fraction digits past the ninth
// are read but ignored (Go truncates there too). Only the upper-case "T" and "Z" are accepted, as
// in Go (RFC 3339 allows "t" and "z"; neither Go nor the API server writes them). nullopt for
// anything else, and for a valid time a system_clock::time_point cannot hold (before 1677 or
// after 2262 with libstdc++'s nanoseconds).
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_RFC3339_H_
