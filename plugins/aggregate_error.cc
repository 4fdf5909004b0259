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
  base::Status out = base::Status::Error(seen.size() == 1 ? joined : "[" + joined + "]");
  // Several refusals of one kind (a projected volume's Secrets all 403) are still that answer.
  const base::Status& first = *failed.front();
  for (const base::Status* s : failed) {
    if (s->api_code() != first.api_code() || s->api_reason() != first.api_reason()) return out;
  }
  return first.api_code() != 0 ? out.WithApiStatus(first.api_code(), first.api_reason()) : out;
}

}  // namespace plugins
