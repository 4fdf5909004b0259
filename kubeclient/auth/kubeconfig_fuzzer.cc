// libFuzzer target for kubeconfig parsing (ParseKubeconfig, the text half of LoadKubeconfig). The
// input is one kubeconfig file; the files it names read as a fixed marker (key material), or fail
// when their path contains "missing". Whatever the text:
//  * parsing returns a Status, never throws (a kubeconfig is user input read at start-up), and
//    never needs its last wall (a yaml-cpp exception turned into "unexpected structure");
//  * an error says why and never quotes the bytes of a file the kubeconfig named (the marker
//    counts only when the kubeconfig text does not hold it itself);
//  * success means what the HTTP client relies on: an https:// server without a trailing slash,
//    a client certificate exactly when there is a key, no CA together with
//    insecure-skip-tls-verify, and a namespace.
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string>

#include "kubeclient/auth/credentials.h"

namespace {

constexpr char kFileBytes[] = "FUZZ-KEY-MATERIAL";

base::Result<std::string> ReadMarker(const std::string& path) {
  if (path.find("missing") != std::string::npos) return base::Status::Error("cannot read " + path);
  return std::string(kFileBytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto creds = kubeclient::ParseKubeconfig({kubeclient::KubeconfigFile{"/fuzz/kubeconfig", text}},
                                           "", ReadMarker);
  if (!creds.ok()) {
    const std::string m = creds.status().message();
    if (m.empty()) __builtin_trap();
    // The marker in the error is a file's bytes quoted, unless the kubeconfig's own text holds
    // it (an error may quote a value of the file, e.g. a malformed server URL).
    if (m.find(kFileBytes) != std::string::npos && text.find(kFileBytes) == std::string::npos) {
      __builtin_trap();
    }
    // ParseKubeconfig's last wall caught a yaml-cpp exception: a shape the parser should have
    // checked for and named. (Its prefix, not the words anywhere: an error may quote a value of
    // the file, and a value may read "unexpected structure".)
    if (m.rfind("kubeconfig: unexpected structure: ", 0) == 0) __builtin_trap();
    return 0;
  }
  if (creds->server.rfind("https://", 0) != 0 || creds->server.back() == '/') __builtin_trap();
  if (creds->tls.client_cert_pem.empty() != creds->tls.client_key_pem.empty()) __builtin_trap();
  if (creds->tls.insecure_skip_tls_verify &&
      (!creds->tls.ca_pem.empty() || !creds->tls.ca_file.empty())) {
    __builtin_trap();
  }
  if (creds->default_namespace.empty() || creds->source.empty()) __builtin_trap();
  return 0;
}
