// RandomUuid: a random (version 4) UUID in its text form, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx",
// for names that must be unique (event names, leader-election identities). Not for secrets: the
// generator is a per-thread mt19937_64 seeded from std::random_device.
#ifndef VOLUMEMANAGER_BASE_RANDOM_UUID_H_
#define VOLUMEMANAGER_BASE_RANDOM_UUID_H_

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace base {

inline std::string RandomUuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~0xf000ULL) | 0x4000ULL;        // version 4
  lo = (lo & ~(3ULL << 62)) | (2ULL << 62);  // variant 10
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(hi >> 32),
                static_cast<unsigned long long>((hi >> 16) & 0xffff),
                static_cast<unsigned long long>(hi & 0xffff),
                static_cast<unsigned long long>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_RANDOM_UUID_H_
