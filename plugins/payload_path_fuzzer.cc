// libFuzzer target for payload paths: the API's rules for ConfigMap/Secret keys and item paths
// (kube/validation.h, which the plugins rely on) against the atomic writer's last line of defence
// (atomicwriter/path_validation.h). Whatever the string:
//  * CleanPath is Go's path.Clean, byte for byte (a literal port of it is the reference here);
//  * a path the writer accepts cleans to a path inside the volume: relative, no ".." element,
//    and cleaning it again changes nothing;
//  * whatever the API rules accept (a key; a non-empty item path within the length limits), the
//    writer accepts too, and a key is its own clean path (one file in the volume dir).
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string>

#include "atomicwriter/path_validation.h"
#include "kube/validation.h"

namespace {

// Go's path.Clean (src/path/path.go), with its lazy buffer as a string and a write index.
std::string GoClean(const std::string& path) {
  if (path.empty()) return ".";
  const bool rooted = path[0] == '/';
  const size_t n = path.size();
  std::string out;
  size_t r = 0, dotdot = 0;
  if (rooted) {
    out += '/';
    r = dotdot = 1;
  }
  while (r < n) {
    if (path[r] == '/') {
      ++r;
    } else if (path[r] == '.' && (r + 1 == n || path[r + 1] == '/')) {
      ++r;
    } else if (path[r] == '.' && path[r + 1] == '.' && (r + 2 == n || path[r + 2] == '/')) {
      r += 2;
      if (out.size() > dotdot) {
        size_t w = out.size() - 1;
        while (w > dotdot && out[w] != '/') --w;
        out.resize(w);
      } else if (!rooted) {
        if (!out.empty()) out += '/';
        out += "..";
        dotdot = out.size();
      }
    } else {
      if ((rooted && out.size() != 1) || (!rooted && !out.empty())) out += '/';
      for (; r < n && path[r] != '/'; ++r) out += path[r];
    }
  }
  return out.empty() ? "." : out;
}

bool HasDotDotElement(const std::string& p) {
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    if (slash - start == 2 && p.compare(start, 2, "..") == 0) return true;
    start = slash + 1;
  }
  return false;
}

bool WithinLengths(const std::string& p) {
  if (p.size() > 4096) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    if (slash - start > 255) return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path(reinterpret_cast<const char*>(data), size);
  const std::string clean = atomicwriter::CleanPath(path);
  if (clean != GoClean(path)) __builtin_trap();

  const base::Status writer = atomicwriter::ValidatePath(path);
  if (!writer.ok() && writer.message().empty()) __builtin_trap();
  if (writer.ok()) {
    if (clean.empty() || clean[0] == '/' || HasDotDotElement(clean)) __builtin_trap();
    if (atomicwriter::CleanPath(clean) != clean) __builtin_trap();
  }

  if (kube::ValidateConfigKey(path).empty()) {
    if (!writer.ok() || clean != path) __builtin_trap();
  }
  if (!path.empty() && WithinLengths(path) && kube::ValidateLocalPath(path).empty()) {
    if (!writer.ok()) __builtin_trap();
  }
  return 0;
}
