// ConfigMap and ConfigMapList (core/v1), as the API returns them. `binary_data` holds the decoded
// bytes (the wire form is base64). Plain values.
#ifndef VOLUMEMANAGER_KUBE_CONFIG_MAP_H_
#define VOLUMEMANAGER_KUBE_CONFIG_MAP_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube/object_meta.h"

namespace kube {

struct ConfigMap {
  ObjectMeta metadata;
  std::map<std::string, std::string> data;         // UTF-8 values
  std::map<std::string, std::string> binary_data;  // raw bytes
  std::optional<bool> immutable;

  bool operator==(const ConfigMap&) const = default;
};

struct ConfigMapList {
  ListMeta metadata;
  std::vector<ConfigMap> items;

  bool operator==(const ConfigMapList&) const = default;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_CONFIG_MAP_H_
