#include "plugins/object_payload.h"

#include "logging/structured_log.h"

namespace plugins {

base::Result<atomicwriter::Payload> MakeKeysPayload(const std::vector<kube::KeyToPath>& items,
                                                    const std::vector<const KeyMap*>& maps,
                                                    std::optional<int32_t> default_mode,
                                                    bool optional, std::string_view missing_key) {
  if (!default_mode) {
    return base::Status::Error("no defaultMode used, not even the default value for it");
  }
  atomicwriter::Payload payload;
  if (items.empty()) {
    for (const KeyMap* map : maps) {
      for (const auto& [key, value] : *map) {
        payload[key] = {value, static_cast<mode_t>(*default_mode), std::nullopt};
      }
    }
    return payload;
  }
  for (const kube::KeyToPath& item : items) {
    const std::string* bytes = nullptr;
    for (const KeyMap* map : maps) {
      if (auto it = map->find(item.key); it != map->end()) {
        bytes = &it->second;
        break;
      }
    }
    if (bytes == nullptr) {
      if (optional) continue;
      return base::Status::Error(std::string(missing_key) + item.key);
    }
    payload[item.path] = {*bytes, static_cast<mode_t>(item.mode.value_or(*default_mode)),
                          std::nullopt};
  }
  return payload;
}

void LogReceived(std::string_view kind, const std::string& namespace_, const std::string& name,
                 const std::vector<const KeyMap*>& maps) {
  if (!logging::Enabled(spdlog::level::debug)) return;
  size_t pieces = 0;
  size_t total = 0;
  for (const KeyMap* map : maps) {
    pieces += map->size();
    for (const auto& [key, value] : *map) total += value.size();
  }
  logging::Debug(
      "Received object data",
      {{"object", logging::KRef(kind, namespace_, name)}, {"pieces", pieces}, {"bytes", total}});
}

}  // namespace plugins
