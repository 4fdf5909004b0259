#include "kube/base64.h"

#include <cstdint>

namespace kube {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int DecodeChar(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

base::Status Illegal(size_t offset) {
  return base::Status::Error("illegal base64 data at input byte " + std::to_string(offset));
}

}  // namespace

base::Result<std::string> DecodeBase64(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size() / 4 * 3);
  uint32_t quantum = 0;
  int filled = 0;   // sextets in `quantum`
  int padding = 0;  // '=' seen in the current quantum
  size_t offset = 0;
  for (; offset < encoded.size(); ++offset) {
    const char c = encoded[offset];
    if (c == '\r' || c == '\n') continue;
    if (padding > 0) {
      // After the first '=', only a second '=' completing "xx==" may follow.
      if (c == '=' && filled == 2 && padding == 1) {
        padding = 2;
        continue;
      }
      return Illegal(offset);
    }
    if (c == '=') {
      if (filled < 2) return Illegal(offset);
      padding = 1;
      if (filled == 3) {
        out.push_back(static_cast<char>((quantum >> 10) & 0xff));
        out.push_back(static_cast<char>((quantum >> 2) & 0xff));
        filled = 4;  // quantum complete
      }
      continue;
    }
    const int v = DecodeChar(c);
    if (v < 0) return Illegal(offset);
    quantum = (quantum << 6) | static_cast<uint32_t>(v);
    if (++filled == 4) {
      out.push_back(static_cast<char>((quantum >> 16) & 0xff));
      out.push_back(static_cast<char>((quantum >> 8) & 0xff));
      out.push_back(static_cast<char>(quantum & 0xff));
      quantum = 0;
      filled = 0;
    }
  }
  if (padding == 1 && filled == 2) return Illegal(encoded.size());  // "xx=" lacks its second '='
  if (padding == 2) out.push_back(static_cast<char>((quantum >> 4) & 0xff));
  if (padding == 0 && filled != 0) return Illegal(encoded.size());
  return out;
}

std::string EncodeBase64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  if (i < bytes.size()) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

}  // namespace kube
