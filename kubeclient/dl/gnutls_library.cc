#include "kubeclient/dl/gnutls_library.h"

#include <string>

#include "kubeclient/dl/dl_library.h"

namespace kubeclient {
namespace {

// GnuTLS's soname (ABI 30 since 3.4, 2015). In its own section so that the image build can read
// it.
[[gnu::used, gnu::section(".vm_dlopen")]] constexpr char kLibgnutls[] = "libgnutls.so.30";

template <typename Fn>
bool FindGnutls(void* handle, const char* name, Fn* fn, std::string* error) {
  return dl::Find(handle, kLibgnutls, name, fn, error);
}

base::Result<const GnutlsLibrary*> OpenGnutls() {
  std::string error;
  void* handle = dl::Open(kLibgnutls, &error);
  if (handle == nullptr) return base::Status::Error(error);
  static GnutlsLibrary lib;
  const bool found =
      FindGnutls(handle, "gnutls_certificate_allocate_credentials",
                 &lib.certificate_allocate_credentials, &error) &&
      FindGnutls(handle, "gnutls_certificate_free_credentials", &lib.certificate_free_credentials,
                 &error) &&
      FindGnutls(handle, "gnutls_certificate_set_x509_trust_mem",
                 &lib.certificate_set_x509_trust_mem, &error) &&
      FindGnutls(handle, "gnutls_certificate_set_x509_system_trust",
                 &lib.certificate_set_x509_system_trust, &error) &&
      FindGnutls(handle, "gnutls_certificate_set_x509_key_mem", &lib.certificate_set_x509_key_mem,
                 &error) &&
      FindGnutls(handle, "gnutls_certificate_verification_status_print",
                 &lib.certificate_verification_status_print, &error) &&
      FindGnutls(handle, "gnutls_init", &lib.init, &error) &&
      FindGnutls(handle, "gnutls_deinit", &lib.deinit, &error) &&
      FindGnutls(handle, "gnutls_set_default_priority", &lib.set_default_priority, &error) &&
      FindGnutls(handle, "gnutls_credentials_set", &lib.credentials_set, &error) &&
      FindGnutls(handle, "gnutls_server_name_set", &lib.server_name_set, &error) &&
      FindGnutls(handle, "gnutls_alpn_set_protocols", &lib.alpn_set_protocols, &error) &&
      FindGnutls(handle, "gnutls_alpn_get_selected_protocol", &lib.alpn_get_selected_protocol,
                 &error) &&
      FindGnutls(handle, "gnutls_session_set_verify_cert", &lib.session_set_verify_cert, &error) &&
      FindGnutls(handle, "gnutls_session_get_verify_cert_status",
                 &lib.session_get_verify_cert_status, &error) &&
      FindGnutls(handle, "gnutls_transport_set_int2", &lib.transport_set_int2, &error) &&
      FindGnutls(handle, "gnutls_transport_set_ptr2", &lib.transport_set_ptr2, &error) &&
      FindGnutls(handle, "gnutls_transport_set_pull_function", &lib.transport_set_pull_function,
                 &error) &&
      FindGnutls(handle, "gnutls_transport_set_pull_timeout_function",
                 &lib.transport_set_pull_timeout_function, &error) &&
      FindGnutls(handle, "gnutls_transport_set_errno", &lib.transport_set_errno, &error) &&
      FindGnutls(handle, "gnutls_handshake", &lib.handshake, &error) &&
      FindGnutls(handle, "gnutls_record_get_direction", &lib.record_get_direction, &error) &&
      FindGnutls(handle, "gnutls_record_recv", &lib.record_recv, &error) &&
      FindGnutls(handle, "gnutls_record_send", &lib.record_send, &error) &&
      FindGnutls(handle, "gnutls_strerror", &lib.strerror, &error) &&
      FindGnutls(handle, "gnutls_x509_crt_init", &lib.x509_crt_init, &error) &&
      FindGnutls(handle, "gnutls_x509_crt_deinit", &lib.x509_crt_deinit, &error) &&
      FindGnutls(handle, "gnutls_x509_crt_import", &lib.x509_crt_import, &error) &&
      FindGnutls(handle, "gnutls_x509_crt_get_activation_time", &lib.x509_crt_get_activation_time,
                 &error) &&
      FindGnutls(handle, "gnutls_x509_crt_get_expiration_time", &lib.x509_crt_get_expiration_time,
                 &error) &&
      FindGnutls(handle, "gnutls_x509_crt_get_key_id", &lib.x509_crt_get_key_id, &error) &&
      FindGnutls(handle, "gnutls_x509_privkey_init", &lib.x509_privkey_init, &error) &&
      FindGnutls(handle, "gnutls_x509_privkey_deinit", &lib.x509_privkey_deinit, &error) &&
      FindGnutls(handle, "gnutls_x509_privkey_import2", &lib.x509_privkey_import2, &error) &&
      FindGnutls(handle, "gnutls_x509_privkey_get_key_id", &lib.x509_privkey_get_key_id, &error) &&
      FindGnutls(handle, "gnutls_free", &lib.free, &error);
  if (!found) return base::Status::Error(error);
  return &lib;
}

}  // namespace

const base::Result<const GnutlsLibrary*>& LoadGnutls() {
  static const base::Result<const GnutlsLibrary*> loaded = OpenGnutls();
  return loaded;
}

}  // namespace kubeclient
