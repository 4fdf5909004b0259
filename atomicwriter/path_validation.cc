#include "atomicwriter/path_validation.h"

#include <string_view>
#include <vector>

#include "base/strings.h"

namespace atomicwriter {
namespace {

constexpr size_t kMaxPathLength = 4096;
constexpr size_t kMaxFileNameLength = 255;

}  // namespace

base::Status ValidatePath(const std::string& path) {
  if (path.empty()) return base::Status::Error("invalid path: must not be empty: \"\"");
  // Before every other rule, which would pass "a/..\0x" (no element is ".."): each system call
  // cuts the name at the NUL, and "a/.." would escape the volume. The kubelet's Go writer never
  // reaches the disk with one either (EINVAL). The path is shown escaped.
  if (base::HasNul(path)) {
    return base::Status::Error("invalid path: must not contain a NUL byte: " + base::ShowNul(path));
  }
  if (path.front() == '/')
    return base::Status::Error("invalid path: must be relative path: " + path);
  if (path.size() > kMaxPathLength) {
    return base::Status::Error("invalid path: must be less than or equal to 4096 characters");
  }
  const std::vector<std::string_view> parts = base::Split(path, '/');
  for (std::string_view part : parts) {
    if (part == "..") return base::Status::Error("invalid path: must not contain '..': " + path);
    if (part.size() > kMaxFileNameLength) {
      return base::Status::Error(
          "invalid path: filenames must be less than or equal to 255 characters");
    }
  }
  if (parts.front().size() > 2 && parts.front().starts_with("..")) {
    return base::Status::Error("invalid path: must not start with '..': " + path);
  }
  return base::Status::OK();
}

std::string CleanPath(const std::string& path) {
  if (path.empty()) return ".";
  const bool rooted = path[0] == '/';
  std::vector<std::string_view> parts;
  for (std::string_view elem : base::Split(path, '/')) {
    if (elem.empty() || elem == ".") continue;
    if (elem == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!rooted) {
        parts.push_back(elem);
      }
      continue;
    }
    parts.push_back(elem);
  }
  const std::string out = (rooted ? "/" : "") + base::Join(parts, "/");
  return out.empty() ? "." : out;
}

}  // namespace atomicwriter
