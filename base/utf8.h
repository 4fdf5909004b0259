// UTF-8 as Go reads it (unicode/utf8): one rune at a time, and whether a whole string is valid.
// Overlong forms, surrogates (U+D800..U+DFFF) and values above U+10FFFF are invalid. Header-only.
#ifndef VOLUMEMANAGER_BASE_UTF8_H_
#define VOLUMEMANAGER_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace base {

// Decodes the rune starting at s[i] (i < s.size()) into *rune; returns its length in bytes, or 0
// for an invalid or truncated sequence.
inline size_t DecodeUtf8Rune(std::string_view s, size_t i, uint32_t* rune) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  size_t len;
  uint32_t r;
  if (b0 < 0x80) {
    *rune = b0;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    r = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    r = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    r = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    r = (r << 6) | (b & 0x3F);
  }
  if ((len == 3 && r < 0x800) || (len == 4 && (r < 0x10000 || r > 0x10FFFF)) ||
      (r >= 0xD800 && r <= 0xDFFF)) {
    return 0;
  }
  *rune = r;
  return len;
}

// True when every byte of `s` belongs to a valid rune.
inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t rune;
    const size_t len = DecodeUtf8Rune(s, i, &rune);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_UTF8_H_
