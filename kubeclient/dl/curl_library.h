// CurlLibrary: libcurl, opened with dlopen the first time an HTTP client is created, and the
// functions of it the client calls. A daemon that never speaks HTTP (standalone mode without
// --manifest-url) never loads libcurl, nor the TLS, HTTP/2, Kerberos and LDAP libraries it pulls
// in: loading them costs several MiB of resident memory before a single request.
//
// The library's name is also in the binary's `.vm_dlopen` section, where
// image/runtime_packages.sh finds it to put the library in the image with those the binary links.
//
// LoadCurl() is thread-safe; it opens and initialises (curl_global_init) the library once per
// process, and the library stays loaded until the process exits.
#ifndef VOLUMEMANAGER_KUBECLIENT_DL_CURL_LIBRARY_H_
#define VOLUMEMANAGER_KUBECLIENT_DL_CURL_LIBRARY_H_

#include <curl/curl.h>

#include "base/status.h"

namespace kubeclient {

struct CurlLibrary {
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_multi_init) multi_init;
  decltype(&curl_multi_cleanup) multi_cleanup;
  decltype(&curl_multi_setopt) multi_setopt;
  decltype(&curl_multi_add_handle) multi_add_handle;
  decltype(&curl_multi_remove_handle) multi_remove_handle;
  decltype(&curl_multi_assign) multi_assign;
  decltype(&curl_multi_info_read) multi_info_read;
  decltype(&curl_multi_socket_action) multi_socket_action;
  decltype(&curl_multi_strerror) multi_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

// The loaded library, or why it could not be loaded (the library or a function missing, or
// curl_global_init failing): the same answer for the life of the process.
const base::Result<const CurlLibrary*>& LoadCurl();

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_DL_CURL_LIBRARY_H_
