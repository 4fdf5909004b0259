#include "kube/quantity.h"

#include <cstddef>
#include <limits>
#include <string>

namespace kube {
namespace {

constexpr char kErrFormatWrong[] =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr char kErrSuffix[] = "unable to parse quantity's suffix";

constexpr Int128 kNanosPerUnit = 1'000'000'000;
// Upstream caps a quantity's magnitude at 2^63-1 units.
constexpr Int128 kMaxNanos = Int128{std::numeric_limits<int64_t>::max()} * kNanosPerUnit;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The pieces of a quantity string, split as upstream's parseQuantityString does.
struct QuantityParts {
  bool positive = true;
  std::string num;    // integer digits without leading zeros; "0" when there are none
  std::string denom;  // fraction digits, may be empty
  std::string suffix;
};

base::Result<QuantityParts> SplitQuantity(std::string_view str) {
  QuantityParts p;
  size_t pos = 0;
  const size_t end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    p.positive = str[0] == '+';
    ++pos;
  }
  while (pos < end && str[pos] == '0') ++pos;
  if (pos >= end) {
    p.num = "0";
    return p;
  }
  size_t i = pos;
  while (i < end && IsDigit(str[i])) ++i;
  p.num = std::string(str.substr(pos, i - pos));
  pos = i;
  if (p.num.empty()) p.num = "0";
  if (pos < end && str[pos] == '.') {
    ++pos;
    i = pos;
    while (i < end && IsDigit(str[i])) ++i;
    p.denom = std::string(str.substr(pos, i - pos));
    pos = i;
  }
  const size_t suffix_start = pos;
  constexpr std::string_view kSuffixLetters = "eEinumkKMGTP";
  while (pos < end && kSuffixLetters.find(str[pos]) != std::string_view::npos) ++pos;
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  while (pos < end && IsDigit(str[pos])) ++pos;
  if (pos < end) return base::Status::Error(kErrFormatWrong);
  p.suffix = std::string(str.substr(suffix_start));
  return p;
}

// Base (2 or 10) and exponent of a suffix, as upstream's quantitySuffixer.interpret.
bool InterpretSuffix(const std::string& suffix, int* base, int32_t* exponent) {
  static const struct {
    const char* name;
    int base;
    int32_t exponent;
  } kTable[] = {
      {"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
      {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},   {"k", 10, 3},  {"M", 10, 6},
      {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
  };
  for (const auto& e : kTable) {
    if (suffix == e.name) {
      *base = e.base;
      *exponent = e.exponent;
      return true;
    }
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    // strconv.ParseInt(suffix[1:], 10, 64), then truncated to int32 as upstream does.
    size_t i = 1;
    bool negative = false;
    if (suffix[i] == '+' || suffix[i] == '-') negative = suffix[i++] == '-';
    if (i >= suffix.size()) return false;
    uint64_t magnitude = 0;
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    for (; i < suffix.size(); ++i) {
      if (!IsDigit(suffix[i])) return false;
      const uint64_t digit = static_cast<uint64_t>(suffix[i] - '0');
      if (magnitude > (limit - digit) / 10) return false;
      magnitude = magnitude * 10 + digit;
    }
    const uint64_t bits = negative ? ~magnitude + 1 : magnitude;
    *base = 10;
    *exponent = static_cast<int32_t>(static_cast<uint32_t>(bits));
    return true;
  }
  return false;
}

// digits * 10^exp10, digits without leading zeros (empty means zero).
struct Decimal {
  std::string digits;
  int64_t exp10 = 0;
};

void Normalize(Decimal* d) {
  size_t lead = d->digits.find_first_not_of('0');
  if (lead == std::string::npos) {
    d->digits.clear();
    d->exp10 = 0;
    return;
  }
  d->digits.erase(0, lead);
  size_t last = d->digits.find_last_not_of('0');
  d->exp10 += static_cast<int64_t>(d->digits.size() - 1 - last);
  d->digits.resize(last + 1);
}

void DoubleInPlace(Decimal* d) {
  int carry = 0;
  for (size_t i = d->digits.size(); i-- > 0;) {
    int v = (d->digits[i] - '0') * 2 + carry;
    d->digits[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  if (carry) d->digits.insert(d->digits.begin(), static_cast<char>('0' + carry));
}

Int128 ParseDigits(std::string_view digits) {
  Int128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

// ceil(|d| in nanos), capped at kMaxNanos.
Int128 CeilNanos(const Decimal& d) {
  if (d.digits.empty()) return 0;
  const int64_t len = static_cast<int64_t>(d.digits.size());
  // |d| >= 10^(len-1+exp10); 10^19 units is beyond the cap.
  if (len - 1 + d.exp10 >= 19) return kMaxNanos;
  const int64_t shift = d.exp10 + 9;  // nanos = digits * 10^shift
  Int128 nanos;
  if (shift >= 0) {
    nanos = ParseDigits(d.digits);  // at most 28 digits here
    for (int64_t i = 0; i < shift; ++i) nanos *= 10;
  } else {
    const int64_t keep = len + shift;  // digits left of the nano point
    if (keep <= 0) return 1;           // a non-zero value below one nano rounds up to 1n
    nanos = ParseDigits(std::string_view(d.digits).substr(0, static_cast<size_t>(keep)));
    // Normalize stripped trailing zeros, so any dropped digit makes the value inexact.
    nanos += 1;
  }
  return nanos > kMaxNanos ? kMaxNanos : nanos;
}

}  // namespace

base::Result<Quantity> Quantity::Parse(std::string_view text) {
  if (text.empty()) return base::Status::Error(kErrFormatWrong);
  auto parts = SplitQuantity(text);
  if (!parts.ok()) return parts.status();
  int base = 10;
  int32_t exponent = 0;
  if (!InterpretSuffix(parts->suffix, &base, &exponent)) return base::Status::Error(kErrSuffix);

  Decimal d;
  d.digits = parts->num + parts->denom;
  d.exp10 = -static_cast<int64_t>(parts->denom.size());
  Normalize(&d);
  if (base == 10) {
    d.exp10 += exponent;
  } else if (!d.digits.empty() &&
             static_cast<int64_t>(d.digits.size()) - 1 + d.exp10 < 19) {  // else capped anyway
    for (int32_t i = 0; i < exponent; ++i) DoubleInPlace(&d);
    Normalize(&d);
  } else if (!d.digits.empty()) {
    d.exp10 = 19;  // at least 10^19 units: capped below
  }

  Quantity q;
  q.nanos_ = CeilNanos(d);
  if (!parts->positive) q.nanos_ = -q.nanos_;
  q.text_ = std::string(text);
  return q;
}

Quantity Quantity::FromInt(int64_t units) {
  Quantity q;
  q.nanos_ = Int128{units} * kNanosPerUnit;
  return q;
}

namespace {
// ceil(a / b) for b > 0.
Int128 CeilDiv(Int128 a, Int128 b) { return a > 0 ? (a + b - 1) / b : a / b; }
}  // namespace

int64_t Quantity::Value() const { return static_cast<int64_t>(CeilDiv(nanos_, kNanosPerUnit)); }

int64_t Quantity::MilliValue() const {
  // Beyond int64 millis upstream's result is unspecified; saturate.
  Int128 milli = CeilDiv(nanos_, 1'000'000);
  constexpr Int128 kMax = std::numeric_limits<int64_t>::max();
  if (milli > kMax) return std::numeric_limits<int64_t>::max();
  if (milli < -kMax) return -std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(milli);
}

}  // namespace kube
