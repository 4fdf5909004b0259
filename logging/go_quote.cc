#include "logging/go_quote.h"

#include <cstdint>

#include "base/utf8.h"

namespace logging {
namespace {

constexpr char kHex[] = "0123456789abcdef";

bool IsPrint(uint32_t r) {
  if (r < 0x20 || r == 0x7F) return false;
  if (r < 0x7F) return true;
  if (r >= 0x80 && r <= 0xA0) return false;  // C1 controls and NO-BREAK SPACE (Zs)
  if (r == 0xAD) return false;               // SOFT HYPHEN (Cf)
  if (r >= 0x600 && r <= 0x605) return false;
  if (r == 0x61C || r == 0x6DD || r == 0x70F || r == 0x180E || r == 0x1680) return false;
  if (r >= 0x2000 && r <= 0x200F) return false;  // spaces, zero-width and direction marks
  if (r >= 0x2028 && r <= 0x202F) return false;  // separators, embeddings, narrow NBSP
  if (r >= 0x205F && r <= 0x206F) return false;
  if (r == 0x3000 || r == 0xFEFF) return false;
  if (r >= 0xE000 && r <= 0xF8FF) return false;  // private use
  if (r >= 0xFFF9 && r <= 0xFFFB) return false;
  if ((r & 0xFFFE) == 0xFFFE) return false;  // noncharacters U+xxFFFE/U+xxFFFF
  if (r >= 0xFDD0 && r <= 0xFDEF) return false;
  if (r >= 0xF0000) return false;                  // supplementary private use planes
  if (r >= 0xE0000 && r <= 0xE007F) return false;  // tags (Cf)
  return true;
}

}  // namespace

std::string GoQuote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    uint32_t r = 0;
    const size_t len = base::DecodeUtf8Rune(s, i, &r);
    if (len == 0) {
      const auto b = static_cast<uint8_t>(s[i]);
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
      ++i;
      continue;
    }
    switch (r) {
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\v':
        out += "\\v";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        if (IsPrint(r)) {
          out.append(s.substr(i, len));
        } else if (r < 0x80) {
          out += "\\x";
          out += kHex[r >> 4];
          out += kHex[r & 15];
        } else if (r < 0x10000) {
          out += "\\u";
          for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(r >> shift) & 15];
        } else {
          out += "\\U";
          for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(r >> shift) & 15];
        }
    }
    i += len;
  }
  return out + "\"";
}

}  // namespace logging
