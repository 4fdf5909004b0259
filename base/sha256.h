// Sha256: an incremental SHA-256 (FIPS 180-4, no library: the daemon need not load and
// initialise a crypto library for digests alone), for recognising content without keeping it: a
// manifest file's bytes, an object revision, a volume's inputs. A digest reveals nothing of what it
// was computed from, but is still never logged (it would tell equal secrets apart).
//
// Not thread-safe: one instance per computation; the free function is safe on any thread.
#ifndef VOLUMEMANAGER_BASE_SHA256_H_
#define VOLUMEMANAGER_BASE_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace base {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Raw bytes, as they come.
  Sha256& Add(std::string_view bytes);
  // Length-prefixed bytes and fixed-width numbers: fields added this way cannot run into each
  // other, so two different field sequences never hash the same input.
  Sha256& AddField(std::string_view bytes);
  Sha256& AddNumber(uint64_t value);
  // The 32-byte digest; the instance is spent afterwards.
  std::string Finish();

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

// SHA-256 of `bytes`, 32 raw bytes.
std::string Sha256Of(std::string_view bytes);

// The compression function, for the tests that hold its two implementations to each other: it
// folds `blocks` 64-byte blocks into the state `h`. Sha256 takes the x86 SHA extensions' where
// the CPU has them (several times faster: every manifest read, object revision and volume write
// hashes its bytes), the portable one otherwise.
namespace sha256_internal {
using BlocksFn = void (*)(uint32_t h[8], const unsigned char* data, size_t blocks);
BlocksFn PortableBlocksFn();
BlocksFn ShaExtensionBlocksFn();  // null: not x86-64, or the CPU lacks the SHA extensions
}  // namespace sha256_internal

// A digest held inline: the 32 bytes of a SHA-256 and no allocation (one is kept per object
// revision and one or two per volume), or none (empty). Only compared, never shown.
class Digest {
 public:
  static constexpr size_t kMaxBytes = 32;

  Digest() = default;
  // `bytes`: a SHA-256 (tests give shorter strings); empty: none. Longer than kMaxBytes is a
  // programming error: the process aborts rather than compare a truncated digest.
  Digest(std::string_view bytes);  // NOLINT: a digest is its bytes
  Digest(const std::string& bytes) : Digest(std::string_view(bytes)) {}  // NOLINT
  Digest(const char* bytes) : Digest(std::string_view(bytes)) {}         // NOLINT

  bool empty() const { return size_ == 0; }
  std::string_view bytes() const { return {bytes_.data(), size_}; }
  bool operator==(const Digest& o) const { return bytes() == o.bytes(); }

 private:
  std::array<char, kMaxBytes> bytes_{};
  uint8_t size_ = 0;
};

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_SHA256_H_
