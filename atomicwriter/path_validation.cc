#include "atomicwriter/path_validation.h"

#include <string_view>
#include <vector>

namespace atomicwriter {
namespace {

constexpr size_t kMaxPathLength = 4096;
constexpr size_t kMaxFileNameLength = 255;

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      parts.push_back(path.substr(start));
      return parts;
    }
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
}

}  // namespace

base::Status ValidatePath(const std::string& path) {
  if (path.empty()) return base::Status::Error("invalid path: must not be empty: \"\"");
  if (path.front() == '/')
    return base::Status::Error("invalid path: must be relative path: " + path);
  if (path.size() > kMaxPathLength) {
    return base::Status::Error("invalid path: must be less than or equal to 4096 characters");
  }
  const std::vector<std::string_view> parts = SplitPath(path);
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
  std::string out;
  for (std::string_view part : SplitPath(path)) {
    if (part.empty() || part == ".") continue;
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

}  // namespace atomicwriter
