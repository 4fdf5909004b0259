// Quantity: a Kubernetes resource quantity ("500m", "64Mi", "1e3", "2Ki"), parsed exactly as
// k8s.io/apimachinery's resource.ParseQuantity does:
//
//   <sign>? <digits> ( "." <digits> )? <suffix>
//   suffix: binary SI (Ki Mi Gi Ti Pi Ei), decimal SI (n u m "" k M G T P E) or a decimal
//           exponent (e|E followed by a signed integer, e.g. "1e3", "5E-2").
//
// As upstream, the value is rounded away from zero to the next nano (10^-9) unit and its magnitude
// is capped at 2^63-1; leading zeros, "1." and "-" are accepted, an unknown suffix is not.
// (Upstream's int64 fast path leaves a few short spellings such as "12E" uncapped, and its Value()
// then overflows; here every value beyond the cap saturates.)
// Value() and MilliValue() round up (towards +infinity) like Quantity.Value() / MilliValue().
//
// A Quantity is an immutable value type.
#ifndef VOLUMEMANAGER_KUBE_QUANTITY_H_
#define VOLUMEMANAGER_KUBE_QUANTITY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kube {

// A 128-bit integer (a GCC/Clang extension; __extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 Int128;

class Quantity {
 public:
  // Zero.
  Quantity() = default;

  // Parses `text` (no surrounding whitespace). Errors are upstream's texts:
  // "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
  // or "unable to parse quantity's suffix".
  static base::Result<Quantity> Parse(std::string_view text);

  // An integral quantity.
  static Quantity FromInt(int64_t units);

  // ceil(value); e.g. "1500m" -> 2, "-1500m" -> -1.
  int64_t Value() const;
  // ceil(value * 1000); e.g. "0.1" -> 100, "1n" -> 1.
  int64_t MilliValue() const;
  bool IsZero() const { return nanos_ == 0; }

  // The exact value in units of 10^-9, within +-(2^63-1) * 10^9.
  Int128 nanos() const { return nanos_; }

  // The text it was parsed from ("" for FromInt and the default zero); for messages.
  const std::string& text() const { return text_; }

  // Equal values compare equal whatever their spelling ("1k" == "1000").
  bool operator==(const Quantity& other) const { return nanos_ == other.nanos_; }

 private:
  Int128 nanos_ = 0;
  std::string text_;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_QUANTITY_H_
