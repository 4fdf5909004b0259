#include "base/version.h"

namespace base {

const char kVersion[] = VM_VERSION;

}  // namespace base
