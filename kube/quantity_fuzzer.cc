// libFuzzer target for resource quantities. Any string must parse or fail with one of upstream's
// two messages; a parsed quantity must:
//  * stay within the cap, +-(2^63-1) units, and carry the sign it was written with;
//  * give Value() and MilliValue() equal to the exact ceilings of its nanos (milli saturating);
//  * equal the quantity its exact value written in nanos ("<nanos>n") parses to, and its integer
//    value written plainly when it is whole: one value, whatever the spelling.
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "kube/quantity.h"

namespace {

using kube::Int128;

constexpr Int128 kNanosPerUnit = 1'000'000'000;
constexpr Int128 kInt64Max = std::numeric_limits<int64_t>::max();

Int128 CeilDiv(Int128 a, Int128 b) {
  const Int128 q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}

std::string Decimal(Int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  for (; v != 0; v /= 10)
    digits.insert(digits.begin(), static_cast<char>('0' + (negative ? -(v % 10) : v % 10)));
  return negative ? "-" + digits : digits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto q = kube::Quantity::Parse(text);
  if (!q.ok()) {
    const std::string m = q.status().message();
    if (m != "unable to parse quantity's suffix" && m.rfind("quantities must match", 0) != 0) {
      __builtin_trap();
    }
    return 0;
  }
  const Int128 nanos = q->nanos();
  if (nanos > kInt64Max * kNanosPerUnit || nanos < -kInt64Max * kNanosPerUnit) __builtin_trap();
  if (text.front() == '-' && nanos > 0) __builtin_trap();
  if (text.front() != '-' && nanos < 0) __builtin_trap();
  if (q->IsZero() != (nanos == 0)) __builtin_trap();
  if (q->text() != text) __builtin_trap();

  if (Int128{q->Value()} != CeilDiv(nanos, kNanosPerUnit)) __builtin_trap();
  Int128 milli = CeilDiv(nanos, 1'000'000);
  if (milli > kInt64Max) milli = kInt64Max;
  if (milli < -kInt64Max) milli = -kInt64Max;
  if (Int128{q->MilliValue()} != milli) __builtin_trap();

  auto in_nanos = kube::Quantity::Parse(Decimal(nanos) + "n");
  if (!in_nanos.ok() || !(*in_nanos == *q)) __builtin_trap();
  if (nanos % kNanosPerUnit == 0) {
    auto whole = kube::Quantity::Parse(Decimal(nanos / kNanosPerUnit));
    if (!whole.ok() || !(*whole == *q)) __builtin_trap();
  }
  return 0;
}
