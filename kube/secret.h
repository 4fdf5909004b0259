// Secret and SecretList (core/v1). `data` holds the decoded bytes (the wire form is base64); a
// manifest's write-only `stringData` is merged into `data` at decode time, overriding keys of the
// same name, as the API server does on write. Values are secret: never log them.
#ifndef VOLUMEMANAGER_KUBE_SECRET_H_
#define VOLUMEMANAGER_KUBE_SECRET_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube/object_meta.h"

namespace kube {

struct Secret {
  ObjectMeta metadata;
  std::string type;                         // "Opaque", "kubernetes.io/tls", ...; not interpreted
  std::map<std::string, std::string> data;  // raw bytes
  std::optional<bool> immutable;

  bool operator==(const Secret&) const = default;
};

struct SecretList {
  ListMeta metadata;
  std::vector<Secret> items;

  bool operator==(const SecretList&) const = default;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_SECRET_H_
