#include "kubeclient/dl/curl_library.h"

#include <string>

#include "kubeclient/dl/dl_library.h"

namespace kubeclient {
namespace {

// libcurl's soname (ABI 4 since 2006). In its own section so that the image build can read it.
[[gnu::used, gnu::section(".vm_dlopen")]] constexpr char kLibcurl[] = "libcurl.so.4";

template <typename Fn>
bool FindCurl(void* handle, const char* name, Fn* fn, std::string* error) {
  return dl::Find(handle, kLibcurl, name, fn, error);
}

base::Result<const CurlLibrary*> OpenCurl() {
  std::string error;
  void* handle = dl::Open(kLibcurl, &error);
  if (handle == nullptr) return base::Status::Error(error);
  static CurlLibrary lib;
  decltype(&curl_global_init) global_init = nullptr;
  const bool found =
      FindCurl(handle, "curl_global_init", &global_init, &error) &&
      FindCurl(handle, "curl_easy_init", &lib.easy_init, &error) &&
      FindCurl(handle, "curl_easy_cleanup", &lib.easy_cleanup, &error) &&
      FindCurl(handle, "curl_easy_setopt", &lib.easy_setopt, &error) &&
      FindCurl(handle, "curl_easy_getinfo", &lib.easy_getinfo, &error) &&
      FindCurl(handle, "curl_easy_strerror", &lib.easy_strerror, &error) &&
      FindCurl(handle, "curl_multi_init", &lib.multi_init, &error) &&
      FindCurl(handle, "curl_multi_cleanup", &lib.multi_cleanup, &error) &&
      FindCurl(handle, "curl_multi_setopt", &lib.multi_setopt, &error) &&
      FindCurl(handle, "curl_multi_add_handle", &lib.multi_add_handle, &error) &&
      FindCurl(handle, "curl_multi_remove_handle", &lib.multi_remove_handle, &error) &&
      FindCurl(handle, "curl_multi_assign", &lib.multi_assign, &error) &&
      FindCurl(handle, "curl_multi_info_read", &lib.multi_info_read, &error) &&
      FindCurl(handle, "curl_multi_socket_action", &lib.multi_socket_action, &error) &&
      FindCurl(handle, "curl_multi_strerror", &lib.multi_strerror, &error) &&
      FindCurl(handle, "curl_slist_append", &lib.slist_append, &error) &&
      FindCurl(handle, "curl_slist_free_all", &lib.slist_free_all, &error);
  if (!found) return base::Status::Error(error);
  if (CURLcode rc = global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
    return base::Status::Error("curl_global_init failed with code " + std::to_string(rc));
  }
  return &lib;
}

}  // namespace

const base::Result<const CurlLibrary*>& LoadCurl() {
  // A function-local static: initialised once, thread-safe, the same outcome every time.
  static const base::Result<const CurlLibrary*> loaded = OpenCurl();
  return loaded;
}

}  // namespace kubeclient
