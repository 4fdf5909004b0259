// What the libraries the client opens at run time (curl_library.h, nghttp2_library.h) share:
// opening one by its soname and finding its functions, each failure as a message naming both.
#ifndef VOLUMEMANAGER_KUBECLIENT_DL_LIBRARY_H_
#define VOLUMEMANAGER_KUBECLIENT_DL_LIBRARY_H_

#include <dlfcn.h>

#include <string>

namespace kubeclient::dl {

// dlopen(soname), or null with "cannot load <soname>: <why>" in *error.
inline void* Open(const char* soname, std::string* error) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = std::string("cannot load ") + soname + ": " + (why != nullptr ? why : "unknown error");
  }
  return handle;
}

// Sets `fn` to the library's `name`; false (and "<soname> has no <name>" in *error) without it.
template <typename Fn>
bool Find(void* handle, const char* soname, const char* name, Fn* fn, std::string* error) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    *error = std::string(soname) + " has no " + name;
    return false;
  }
  *fn = reinterpret_cast<Fn>(symbol);
  return true;
}

}  // namespace kubeclient::dl

#endif  // VOLUMEMANAGER_KUBECLIENT_DL_LIBRARY_H_
