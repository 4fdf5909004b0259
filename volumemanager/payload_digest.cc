#include "volumemanager/payload_digest.h"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>

namespace volumemanager {
namespace {

void AddNumber(EVP_MD_CTX* ctx, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  EVP_DigestUpdate(ctx, b, sizeof(b));
}

// Length-prefixed, so no two different payloads serialize to the same bytes.
void AddBytes(EVP_MD_CTX* ctx, const std::string& s) {
  AddNumber(ctx, s.size());
  EVP_DigestUpdate(ctx, s.data(), s.size());
}

}  // namespace

std::string PayloadDigest(const atomicwriter::Payload& payload) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  AddNumber(ctx.get(), payload.size());
  for (const auto& [path, file] : payload) {
    AddBytes(ctx.get(), path);
    AddNumber(ctx.get(), file.mode);
    AddNumber(ctx.get(), file.fs_user ? 1 : 0);
    AddNumber(ctx.get(), file.fs_user.value_or(0));
    AddBytes(ctx.get(), file.data);
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace volumemanager
