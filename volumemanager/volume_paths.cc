#include "volumemanager/volume_paths.h"

namespace volumemanager {

base::Status CheckPathComponent(const std::string& value, const char* what) {
  if (value.empty() || value == "." || value == ".." || value.size() > 255 ||
      value.find('/') != std::string::npos || value.find('\0') != std::string::npos) {
    return base::Status::Error(std::string("invalid ") + what + " \"" + value +
                               "\": must be a single path component");
  }
  return base::Status::OK();
}

}  // namespace volumemanager
