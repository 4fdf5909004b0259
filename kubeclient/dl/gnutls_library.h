// GnutlsLibrary: GnuTLS, opened with dlopen the first time the HTTP/2 transport needs TLS
// (http2_transport.h) or a client certificate is checked (client_cert_source.h), and the functions
// of it the transport calls. A daemon that never talks to an API server (standalone mode) never
// maps it, nor what it pulls in (p11-kit, nettle, gmp, libtasn1, libidn2, libunistring: about 2 MiB
// resident), as for libcurl (curl_library.h).
//
// The library's name is also in the binary's `.vm_dlopen` section, where
// image/runtime_packages.sh finds it to put the library in the image.
//
// LoadGnutls() is thread-safe; it opens the library once per process, and the library stays
// loaded until the process exits.
#ifndef VOLUMEMANAGER_KUBECLIENT_DL_GNUTLS_LIBRARY_H_
#define VOLUMEMANAGER_KUBECLIENT_DL_GNUTLS_LIBRARY_H_

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "base/status.h"

namespace kubeclient {

struct GnutlsLibrary {
  decltype(&gnutls_certificate_allocate_credentials) certificate_allocate_credentials;
  decltype(&gnutls_certificate_free_credentials) certificate_free_credentials;
  decltype(&gnutls_certificate_set_x509_trust_mem) certificate_set_x509_trust_mem;
  decltype(&gnutls_certificate_set_x509_system_trust) certificate_set_x509_system_trust;
  decltype(&gnutls_certificate_set_x509_key_mem) certificate_set_x509_key_mem;
  decltype(&gnutls_certificate_verification_status_print) certificate_verification_status_print;
  decltype(&gnutls_init) init;
  decltype(&gnutls_deinit) deinit;
  decltype(&gnutls_set_default_priority) set_default_priority;
  decltype(&gnutls_credentials_set) credentials_set;
  decltype(&gnutls_server_name_set) server_name_set;
  decltype(&gnutls_alpn_set_protocols) alpn_set_protocols;
  decltype(&gnutls_alpn_get_selected_protocol) alpn_get_selected_protocol;
  decltype(&gnutls_session_set_verify_cert) session_set_verify_cert;
  decltype(&gnutls_session_get_verify_cert_status) session_get_verify_cert_status;
  decltype(&gnutls_transport_set_int2) transport_set_int2;
  // The transport's own read side (http2_transport.cc: one recv serves several records).
  decltype(&gnutls_transport_set_ptr2) transport_set_ptr2;
  decltype(&gnutls_transport_set_pull_function) transport_set_pull_function;
  decltype(&gnutls_transport_set_pull_timeout_function) transport_set_pull_timeout_function;
  decltype(&gnutls_transport_set_errno) transport_set_errno;
  decltype(&gnutls_handshake) handshake;
  decltype(&gnutls_record_get_direction) record_get_direction;
  decltype(&gnutls_record_recv) record_recv;
  decltype(&gnutls_record_send) record_send;
  decltype(&gnutls_strerror) strerror;
  // A client certificate's validity period (client_cert_source.h).
  decltype(&gnutls_x509_crt_init) x509_crt_init;
  decltype(&gnutls_x509_crt_deinit) x509_crt_deinit;
  decltype(&gnutls_x509_crt_import) x509_crt_import;
  decltype(&gnutls_x509_crt_get_activation_time) x509_crt_get_activation_time;
  decltype(&gnutls_x509_crt_get_expiration_time) x509_crt_get_expiration_time;
  // Whether a client key belongs to its certificate, compared by key id before the two are set
  // together (gnutls_certificate_set_x509_key_mem2 of GnuTLS 3.7 leaks a certificate when they
  // do not match).
  decltype(&gnutls_x509_crt_get_key_id) x509_crt_get_key_id;
  decltype(&gnutls_x509_privkey_init) x509_privkey_init;
  decltype(&gnutls_x509_privkey_deinit) x509_privkey_deinit;
  decltype(&gnutls_x509_privkey_import2) x509_privkey_import2;
  decltype(&gnutls_x509_privkey_get_key_id) x509_privkey_get_key_id;
  // GnuTLS's deallocator for what it hands out (a variable in the library, not a function).
  gnutls_free_function* free;
};

// The loaded library, or why it could not be loaded: the same answer for the life of the process.
const base::Result<const GnutlsLibrary*>& LoadGnutls();

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_DL_GNUTLS_LIBRARY_H_
