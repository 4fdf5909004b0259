// AggregateError: several errors reported as one, formatted as Kubernetes' utilerrors.Aggregate:
// no errors -> OK; one -> its message; several -> "[msg1, msg2]" with repeated messages dropped.
// The API status (code, reason) is kept when every error carries the same one.
// Used where the kubelet collects errors (downward API items, projected sources).
#ifndef VOLUMEMANAGER_PLUGINS_AGGREGATE_ERROR_H_
#define VOLUMEMANAGER_PLUGINS_AGGREGATE_ERROR_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace plugins {

base::Status AggregateError(const std::vector<base::Status>& errors);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_AGGREGATE_ERROR_H_
