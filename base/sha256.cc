#include "base/sha256.h"

#include <openssl/evp.h>

namespace base {

struct Sha256::Context {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  EVP_DigestInit_ex(ctx_->md.get(), EVP_sha256(), nullptr);
}

Sha256::~Sha256() = default;

Sha256& Sha256::Add(std::string_view bytes) {
  EVP_DigestUpdate(ctx_->md.get(), bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::AddNumber(uint64_t value) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(value >> (8 * i));
  EVP_DigestUpdate(ctx_->md.get(), b, sizeof(b));
  return *this;
}

Sha256& Sha256::AddField(std::string_view bytes) {
  AddNumber(bytes.size());
  return Add(bytes);
}

std::string Sha256::Finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md.get(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Sha256Of(std::string_view bytes) { return Sha256().Add(bytes).Finish(); }

}  // namespace base
