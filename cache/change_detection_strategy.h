// ChangeDetectionStrategy: --config-map-and-secret-change-detection-strategy, the kubelet's
// configMapAndSecretChangeDetectionStrategy (docs/kubelet-behavior.md §5): how an object manager
// notices changes.
#ifndef VOLUMEMANAGER_CACHE_CHANGE_DETECTION_STRATEGY_H_
#define VOLUMEMANAGER_CACHE_CHANGE_DETECTION_STRATEGY_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace cache {

enum class ChangeDetectionStrategy {
  kGet,    // read the source on every get
  kCache,  // serve reads younger than a TTL, read again after
  kWatch,  // keep a live copy current from change events (the default)
};

// "Get", "Cache" or "Watch", exactly; anything else fails with the kubelet's text
// `unknown configmap and secret manager mode: <value>`.
inline base::Result<ChangeDetectionStrategy> ParseChangeDetectionStrategy(std::string_view value) {
  if (value == "Get") return ChangeDetectionStrategy::kGet;
  if (value == "Cache") return ChangeDetectionStrategy::kCache;
  if (value == "Watch") return ChangeDetectionStrategy::kWatch;
  return base::Status::Error("unknown configmap and secret manager mode: " + std::string(value));
}

inline const char* ChangeDetectionStrategyName(ChangeDetectionStrategy s) {
  switch (s) {
    case ChangeDetectionStrategy::kGet:
      return "Get";
    case ChangeDetectionStrategy::kCache:
      return "Cache";
    case ChangeDetectionStrategy::kWatch:
      return "Watch";
  }
  return "Watch";
}

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_CHANGE_DETECTION_STRATEGY_H_
