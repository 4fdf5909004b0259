// ClientCertSource: the client certificate and key to present on a new connection, following the
// files a kubeconfig names as they rotate, the way the kubelet rotates its own
// (/var/lib/kubelet/pki/kubelet-client-current.pem: certificate and key in one file, a symlink
// swapped to a new file some time before the old certificate expires).
//
// Promises:
// * The certificate and key are read together (once when both are the same file) and used only
//   as a pair that GnuTLS accepts: the CERTIFICATE blocks of the certificate file and the first
//   private-key block of the key file, the key matching the certificate. Paths are resolved anew
//   at every read, so a swapped symlink is followed.
// * The files are looked at (one stat each) at most once per `check_interval`, and read only when
//   what a stat sees changed (inode, size, modification time) or when the certificate in hand is
//   in the last tenth of its life (so a rewrite that a stat cannot tell apart is still found
//   before the old certificate expires). A new, different pair gets a new generation.
// * A pair that cannot be read, does not parse or does not match keeps the last good pair, with
//   one warning per failure streak naming the files, never their contents.
// * Fixed PEMs (kubeconfig `*-data` fields) never change.
// Single-threaded: use it from the loop thread (HttpClient owns one).
#ifndef VOLUMEMANAGER_KUBECLIENT_AUTH_CLIENT_CERT_SOURCE_H_
#define VOLUMEMANAGER_KUBECLIENT_AUTH_CLIENT_CERT_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kubeclient/auth/credentials.h"

namespace kubeclient {

struct ClientCertPair {
  std::string cert_pem;  // the CERTIFICATE blocks, leaf first
  std::string key_pem;   // the private-key block
  std::chrono::system_clock::time_point not_before;
  std::chrono::system_clock::time_point not_after;
  // 1 for the pair loaded first, one more for each different pair since.
  uint64_t generation = 0;
};

// Splits and checks a pair: `cert_text` must hold a certificate and `key_text` a private key
// (the same text may hold both) that match. Errors name `what` and never quote the texts.
base::Result<ClientCertPair> ParseClientCertPair(std::string_view cert_text,
                                                 std::string_view key_text,
                                                 const std::string& what);

class ClientCertSource {
 public:
  struct Options {
    std::chrono::milliseconds check_interval{30000};
    // Tests inject their own clocks: steady for the checks, wall for the certificate's life.
    std::function<std::chrono::steady_clock::time_point()> clock;
    std::function<std::chrono::system_clock::time_point()> wall_clock;
  };

  // Null when `tls` has no client certificate; an error when the pair it names cannot be used.
  static base::Result<std::unique_ptr<ClientCertSource>> Create(const TlsConfig& tls,
                                                                Options options);

  // A source of pairs handed to it (an exec plugin's, through Replace); never looks at files.
  static std::unique_ptr<ClientCertSource> FromPair(const ClientCertPair& pair);
  // A new pair (one more generation) when it differs from the current one.
  void Replace(const ClientCertPair& pair);

  // The pair for a new connection; looks at the files when a check is due.
  std::shared_ptr<const ClientCertPair> Current();
  // Looks at the files now (the rotation timer, a 401). True when the pair changed.
  bool CheckNow();
  // The next Current() looks at the files.
  void Invalidate() { checked_at_.reset(); }
  // False for fixed PEMs: nothing to check.
  bool FollowsFiles() const { return !cert_file_.empty() || !key_file_.empty(); }
  std::chrono::milliseconds check_interval() const { return options_.check_interval; }
  // "client certificate FILE" / "... and key FILE": for logs, never secret.
  std::string Describe() const;

 private:
  ClientCertSource(const TlsConfig& tls, Options options);
  std::string Identity() const;
  bool NearExpiry() const;

  std::string cert_file_;
  std::string key_file_;
  std::string fixed_cert_;  // when cert_file_ is empty
  std::string fixed_key_;   // when key_file_ is empty
  Options options_;
  std::shared_ptr<const ClientCertPair> current_;
  std::string identity_;         // of the files when current_ was read
  std::string failed_identity_;  // of the files when a read last failed
  std::optional<std::chrono::steady_clock::time_point> checked_at_;
  bool failing_ = false;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_AUTH_CLIENT_CERT_SOURCE_H_
