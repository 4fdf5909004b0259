#include "volumemanager/state/volume_paths.h"

#include "base/strings.h"

namespace volumemanager {

base::Status CheckPathComponent(const std::string& value, const char* what) {
  // First, and on its own: "..\0x" would pass the other checks, and every system call would cut
  // it to "..". The value is shown with each NUL escaped.
  if (base::HasNul(value)) {
    return base::Status::Error(std::string("invalid ") + what + " \"" + base::ShowNul(value) +
                               "\": must not contain a NUL byte");
  }
  if (value.empty() || value == "." || value == ".." || value.size() > 255 ||
      value.find('/') != std::string::npos) {
    return base::Status::Error(std::string("invalid ") + what + " \"" + value +
                               "\": must be a single path component");
  }
  return base::Status::OK();
}

}  // namespace volumemanager
