#include "base/sha256.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace base {
namespace {

// FIPS 180-4, section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void PortableBlocks(uint32_t h[8], const unsigned char* p, size_t blocks) {
  for (; blocks > 0; --blocks, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = uint32_t{p[4 * i]} << 24 | uint32_t{p[4 * i + 1]} << 16 | uint32_t{p[4 * i + 2]} << 8 |
             uint32_t{p[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 =
          k + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      k = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
  }
}

#if defined(__x86_64__)
// The same function through the x86 SHA extensions (SHA256RNDS2 does two rounds, SHA256MSG1/2
// extend the message schedule four words at a time). The instructions keep the state as two
// vectors, ABEF and CDGH; each group of four rounds adds four schedule words and their round
// constants, and the two vectors swap roles after every two rounds.
__attribute__((target("sha,sse4.1,ssse3"))) void ShaExtensionBlocks(uint32_t h[8],
                                                                    const unsigned char* p,
                                                                    size_t blocks) {
  // Each 32-bit word of the message is big-endian.
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  const __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
  const __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 4));
  const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (; blocks > 0; --blocks, p += 64) {
    const __m128i abef_before = abef;
    const __m128i cdgh_before = cdgh;
    __m128i w[4];  // schedule words 4i..4i+3 of group i, in a ring
    for (int i = 0; i < 16; ++i) {
      __m128i& now = w[i % 4];
      if (i < 4) {
        now = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)),
                               byte_swap);
      } else {
        // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], t = 4i..4i+3: MSG1 gives
        // W[t-16] + s0(W[t-15]), the align W[t-7], MSG2 the s1 terms (some on words it makes).
        const __m128i& back1 = w[(i + 3) % 4];            // group i-1
        const __m128i& back2 = w[(i + 2) % 4];            // group i-2
        const __m128i& back3 = w[(i + 1) % 4];            // group i-3
        __m128i next = _mm_sha256msg1_epu32(now, back3);  // `now` still holds group i-4
        next = _mm_add_epi32(next, _mm_alignr_epi8(back1, back2, 4));
        now = _mm_sha256msg2_epu32(next, back1);
      }
      __m128i wk = _mm_add_epi32(
          now, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound.data() + 4 * i)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      wk = _mm_shuffle_epi32(wk, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
    }
    abef = _mm_add_epi32(abef, abef_before);
    cdgh = _mm_add_epi32(cdgh, cdgh_before);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h + 4), _mm_alignr_epi8(dchg, feba, 8));
}

bool CpuHasShaExtensions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  if ((c & bit_SSSE3) == 0 || (c & bit_SSE4_1) == 0) return false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & bit_SHA) != 0;
}
#endif

}  // namespace

namespace sha256_internal {

BlocksFn PortableBlocksFn() { return &PortableBlocks; }

BlocksFn ShaExtensionBlocksFn() {
#if defined(__x86_64__)
  static const bool has = CpuHasShaExtensions();
  return has ? &ShaExtensionBlocks : nullptr;
#else
  return nullptr;
#endif
}

}  // namespace sha256_internal

namespace {

// Chosen once: the CPU's instructions where it has them.
sha256_internal::BlocksFn Blocks() {
  static const sha256_internal::BlocksFn fast = sha256_internal::ShaExtensionBlocksFn();
  return fast != nullptr ? fast : sha256_internal::PortableBlocksFn();
}

}  // namespace

struct Sha256::Context {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char block[64];
  size_t used = 0;     // bytes of `block` filled
  uint64_t total = 0;  // bytes added so far
  sha256_internal::BlocksFn blocks = Blocks();

  void Update(const unsigned char* p, size_t n) {
    total += n;
    if (used > 0) {
      const size_t take = std::min(n, sizeof(block) - used);
      std::memcpy(block + used, p, take);
      used += take;
      p += take;
      n -= take;
      if (used < sizeof(block)) return;
      blocks(h, block, 1);
      used = 0;
    }
    if (n >= sizeof(block)) {
      blocks(h, p, n / sizeof(block));
      p += n - n % sizeof(block);
      n %= sizeof(block);
    }
    std::memcpy(block, p, n);
    used = n;
  }
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {}

Sha256::~Sha256() = default;

Sha256& Sha256::Add(std::string_view bytes) {
  ctx_->Update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return *this;
}

Sha256& Sha256::AddNumber(uint64_t value) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(value >> (8 * i));
  ctx_->Update(b, sizeof(b));
  return *this;
}

Sha256& Sha256::AddField(std::string_view bytes) {
  AddNumber(bytes.size());
  return Add(bytes);
}

std::string Sha256::Finish() {
  // Padding (FIPS 180-4, 5.1.1): 0x80, zeros up to 56 mod 64, the length in bits big-endian.
  const uint64_t bits = ctx_->total * 8;
  unsigned char pad[72] = {0x80};
  const size_t pad_len = (ctx_->used < 56 ? 56 : 120) - ctx_->used;
  for (int i = 0; i < 8; ++i) pad[pad_len + i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  ctx_->Update(pad, pad_len + 8);
  std::string out(32, '\0');
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<char>(ctx_->h[i] >> (24 - 8 * j));
  }
  return out;
}

std::string Sha256Of(std::string_view bytes) { return Sha256().Add(bytes).Finish(); }

Digest::Digest(std::string_view bytes) {
  if (bytes.size() > kMaxBytes) {
    std::fprintf(stderr, "Digest: %zu bytes, more than a SHA-256's %zu\n", bytes.size(), kMaxBytes);
    std::abort();
  }
  bytes.copy(bytes_.data(), bytes.size());
  size_ = static_cast<uint8_t>(bytes.size());
}

}  // namespace base
