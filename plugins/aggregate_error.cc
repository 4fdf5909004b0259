#include "plugins/aggregate_error.h"

#include <set>

namespace plugins {

base::Status AggregateError(const std::vector<base::Status>& errors) {
  std::vector<const base::Status*> failed;
  for (const base::Status& s : errors) {
    if (!s.ok()) failed.push_back(&s);
  }
  if (failed.empty()) return base::Status::OK();
  if (failed.size() == 1) return *failed[0];
  std::set<std::string> seen;
  std::string joined;
  for (const base::Status* s : failed) {
    if (!seen.insert(s->message()).second) continue;
    if (seen.size() > 1) joined += ", ";
    joined += s->message();
  }
  if (seen.size() == 1) return base::Status::Error(joined);
  return base::Status::Error("[" + joined + "]");
}

}  // namespace plugins
