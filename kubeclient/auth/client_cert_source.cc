#include "kubeclient/auth/client_cert_source.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <ctime>

#include "base/durable_file.h"
#include "base/rfc3339.h"
#include "kubeclient/dl/gnutls_library.h"

namespace kubeclient {
namespace {

// The PEM blocks of `text` whose label satisfies `want`, each whole with its END line.
template <typename Pred>
std::string PemBlocks(std::string_view text, Pred want, bool first_only) {
  std::string out;
  size_t at = 0;
  constexpr std::string_view kBegin = "-----BEGIN ";
  while ((at = text.find(kBegin, at)) != std::string_view::npos) {
    const size_t label_at = at + kBegin.size();
    const size_t label_end = text.find("-----", label_at);
    if (label_end == std::string_view::npos) break;
    const std::string_view label = text.substr(label_at, label_end - label_at);
    const std::string end_line = "-----END " + std::string(label) + "-----";
    const size_t end = text.find(end_line, label_end);
    if (end == std::string_view::npos) break;
    const size_t stop = end + end_line.size();
    if (want(label)) {
      out.append(text.substr(at, stop - at));
      out.push_back('\n');
      if (first_only) break;
    }
    at = stop;
  }
  return out;
}

std::string CertFileIdentity(const std::string& path) {
  if (path.empty()) return "-";
  std::string stamp = base::FileStamp(path);
  return stamp.empty() ? "missing" : stamp;
}

gnutls_datum_t Datum(const std::string& s) {
  return gnutls_datum_t{reinterpret_cast<unsigned char*>(const_cast<char*>(s.data())),
                        static_cast<unsigned>(s.size())};
}

}  // namespace

base::Result<ClientCertPair> ParseClientCertPair(std::string_view cert_text,
                                                 std::string_view key_text,
                                                 const std::string& what) {
  ClientCertPair pair;
  pair.cert_pem = PemBlocks(
      cert_text, [](std::string_view label) { return label == "CERTIFICATE"; }, false);
  if (pair.cert_pem.empty()) return base::Status::Error(what + ": no PEM certificate found");
  pair.key_pem = PemBlocks(
      key_text, [](std::string_view label) { return label.ends_with("PRIVATE KEY"); }, true);
  if (pair.key_pem.empty()) return base::Status::Error(what + ": no PEM private key found");
  const auto& loaded = LoadGnutls();
  if (!loaded.ok()) return loaded.status().WithContext(what);
  const GnutlsLibrary& tls = **loaded;

  gnutls_datum_t cert = Datum(pair.cert_pem), key = Datum(pair.key_pem);
  gnutls_x509_crt_t crt = nullptr;
  if (int rc = tls.x509_crt_init(&crt); rc < 0) {
    return base::Status::Error(what + ": " + tls.strerror(rc));
  }
  int rc = tls.x509_crt_import(crt, &cert, GNUTLS_X509_FMT_PEM);  // the first block: the leaf
  if (rc < 0) {
    tls.x509_crt_deinit(crt);
    return base::Status::Error(what + ": the certificate: " + tls.strerror(rc));
  }
  const time_t not_before = tls.x509_crt_get_activation_time(crt);
  const time_t not_after = tls.x509_crt_get_expiration_time(crt);
  unsigned char cert_id[64];
  size_t cert_id_size = sizeof(cert_id);
  rc = tls.x509_crt_get_key_id(crt, 0, cert_id, &cert_id_size);
  tls.x509_crt_deinit(crt);
  if (rc < 0) return base::Status::Error(what + ": the certificate's key: " + tls.strerror(rc));
  if (not_before == -1 || not_after == -1) {
    return base::Status::Error(what + ": the certificate has no readable validity period");
  }

  // The key must belong to the certificate: their key ids compared here, before GnuTLS sets them
  // together (which checks it too, but leaks on a mismatch).
  gnutls_x509_privkey_t private_key = nullptr;
  if (rc = tls.x509_privkey_init(&private_key); rc < 0) {
    return base::Status::Error(what + ": " + tls.strerror(rc));
  }
  rc = tls.x509_privkey_import2(private_key, &key, GNUTLS_X509_FMT_PEM, nullptr, 0);
  unsigned char key_id[64];
  size_t key_id_size = sizeof(key_id);
  if (rc >= 0) rc = tls.x509_privkey_get_key_id(private_key, 0, key_id, &key_id_size);
  tls.x509_privkey_deinit(private_key);
  if (rc < 0) return base::Status::Error(what + ": the private key: " + tls.strerror(rc));
  if (key_id_size != cert_id_size || std::memcmp(key_id, cert_id, key_id_size) != 0) {
    return base::Status::Error(what +
                               ": the certificate and key cannot be used together: the key is "
                               "not the certificate's");
  }
  gnutls_certificate_credentials_t cred = nullptr;
  if (rc = tls.certificate_allocate_credentials(&cred); rc < 0) {
    return base::Status::Error(what + ": " + tls.strerror(rc));
  }
  rc = tls.certificate_set_x509_key_mem(cred, &cert, &key, GNUTLS_X509_FMT_PEM);
  tls.certificate_free_credentials(cred);
  if (rc < 0) {
    return base::Status::Error(
        what + ": the certificate and key cannot be used together: " + tls.strerror(rc));
  }
  pair.not_before = std::chrono::system_clock::from_time_t(not_before);
  pair.not_after = std::chrono::system_clock::from_time_t(not_after);
  return pair;
}

base::Result<std::unique_ptr<ClientCertSource>> ClientCertSource::Create(const TlsConfig& tls,
                                                                         Options options) {
  if (tls.client_cert_pem.empty() && tls.client_cert_file.empty())
    return std::unique_ptr<ClientCertSource>();
  std::unique_ptr<ClientCertSource> source(new ClientCertSource(tls, std::move(options)));
  // The copies read at load time come first: the pair the kubeconfig was checked with.
  auto pair = ParseClientCertPair(tls.client_cert_pem, tls.client_key_pem, source->Describe());
  if (!pair.ok()) return pair.status();
  pair->generation = 1;
  source->identity_ = source->Identity();
  source->current_ = std::make_shared<const ClientCertPair>(std::move(*pair));
  source->checked_at_ = source->options_.clock();
  return source;
}

ClientCertSource::ClientCertSource(const TlsConfig& tls, Options options)
    : cert_file_(tls.client_cert_file),
      key_file_(tls.client_key_file),
      fixed_cert_(tls.client_cert_file.empty() ? tls.client_cert_pem : ""),
      fixed_key_(tls.client_key_file.empty() ? tls.client_key_pem : ""),
      options_(std::move(options)) {
  if (!options_.clock) options_.clock = [] { return std::chrono::steady_clock::now(); };
  if (!options_.wall_clock) options_.wall_clock = [] { return std::chrono::system_clock::now(); };
}

std::unique_ptr<ClientCertSource> ClientCertSource::FromPair(const ClientCertPair& pair) {
  std::unique_ptr<ClientCertSource> source(new ClientCertSource(TlsConfig{}, Options{}));
  auto first = std::make_shared<ClientCertPair>(pair);
  first->generation = 1;
  source->current_ = std::move(first);
  return source;
}

void ClientCertSource::Replace(const ClientCertPair& pair) {
  if (pair.cert_pem == current_->cert_pem && pair.key_pem == current_->key_pem) return;
  auto next = std::make_shared<ClientCertPair>(pair);
  next->generation = current_->generation + 1;
  current_ = std::move(next);
}

std::string ClientCertSource::Describe() const {
  if (cert_file_.empty() && key_file_.empty()) return "client certificate (kubeconfig data)";
  if (cert_file_ == key_file_) return "client certificate and key " + cert_file_;
  return "client certificate " + (cert_file_.empty() ? "(kubeconfig data)" : cert_file_) +
         " and key " + (key_file_.empty() ? "(kubeconfig data)" : key_file_);
}

std::string ClientCertSource::Identity() const {
  return CertFileIdentity(cert_file_) + "|" + CertFileIdentity(key_file_);
}

bool ClientCertSource::NearExpiry() const {
  const auto life = current_->not_after - current_->not_before;
  return options_.wall_clock() >= current_->not_after - life / 10;
}

std::shared_ptr<const ClientCertPair> ClientCertSource::Current() {
  if (FollowsFiles() &&
      (!checked_at_ || options_.clock() - *checked_at_ >= options_.check_interval)) {
    CheckNow();
  }
  return current_;
}

bool ClientCertSource::CheckNow() {
  if (!FollowsFiles()) return false;
  checked_at_ = options_.clock();
  const std::string identity = Identity();
  const bool changed = identity != identity_ && identity != failed_identity_;
  if (!changed && !NearExpiry()) return false;
  // Read together: one read when one file holds both.
  auto read = [](const std::string& path) {
    return base::ReadRegularFile(path, kMaxCredentialFileBytes, /*follow_symlinks=*/true);
  };
  base::Result<std::string> cert_text =
      cert_file_.empty() ? base::Result<std::string>(fixed_cert_) : read(cert_file_);
  base::Result<std::string> key_text = key_file_.empty() ? base::Result<std::string>(fixed_key_)
                                       : key_file_ == cert_file_ ? cert_text
                                                                 : read(key_file_);
  base::Result<ClientCertPair> pair = base::Status::Error("");
  if (!cert_text.ok()) {
    pair = base::Status::Error(Describe() + ": cannot read " + cert_text.status().message());
  } else if (!key_text.ok()) {
    pair = base::Status::Error(Describe() + ": cannot read " + key_text.status().message());
  } else {
    pair = ParseClientCertPair(*cert_text, *key_text, Describe());
  }
  if (!pair.ok()) {
    failed_identity_ = identity;
    if (!failing_) {
      spdlog::warn("{}; keeping the certificate in use (valid until {})", pair.status().message(),
                   base::FormatRfc3339(current_->not_after));
    }
    failing_ = true;
    return false;
  }
  if (failing_) spdlog::info("{} usable again", Describe());
  failing_ = false;
  failed_identity_.clear();
  identity_ = identity;
  if (pair->cert_pem == current_->cert_pem && pair->key_pem == current_->key_pem) return false;
  pair->generation = current_->generation + 1;
  current_ = std::make_shared<const ClientCertPair>(std::move(*pair));
  spdlog::info("{} changed: new connections use the new certificate (valid until {})", Describe(),
               base::FormatRfc3339(current_->not_after));
  if (options_.wall_clock() >= current_->not_after) {
    spdlog::warn("{}: the new certificate has already expired", Describe());
  }
  return true;
}

}  // namespace kubeclient
