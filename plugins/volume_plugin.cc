#include "plugins/volume_plugin.h"

#include <algorithm>

namespace plugins {

std::string VolumePlugin::EscapedName() const { return EscapePluginName(Name()); }

std::string EscapePluginName(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '/', '~');
  return out;
}

std::string UniqueVolumeName(const VolumePlugin& plugin, const std::string& pod_uid,
                             const std::string& volume_name) {
  return std::string(plugin.Name()) + "/" + pod_uid + "-" + volume_name;
}

}  // namespace plugins
