#include "leaderelection/leader_election_record.h"

#include "base/rfc3339.h"

namespace leaderelection {

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  return base::FormatRfc3339(t, 6);
}

nlohmann::json LeaseSpecFromRecord(const LeaderElectionRecord& record) {
  nlohmann::json spec = {{"holderIdentity", record.holder_identity},
                         {"leaseDurationSeconds", record.lease_duration_seconds},
                         {"leaseTransitions", record.lease_transitions}};
  if (!record.acquire_time.empty()) spec["acquireTime"] = record.acquire_time;
  if (!record.renew_time.empty()) spec["renewTime"] = record.renew_time;
  return spec;
}

namespace {

std::string StringField(const nlohmann::json& spec, const char* name) {
  auto it = spec.find(name);
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int IntField(const nlohmann::json& spec, const char* name) {
  auto it = spec.find(name);
  if (it == spec.end() || !it->is_number_integer()) return 0;
  const auto v = it->get<long long>();
  if (v < 0) return 0;
  return v > 0x7fffffff ? 0x7fffffff : static_cast<int>(v);
}

}  // namespace

LeaderElectionRecord RecordFromLeaseSpec(const nlohmann::json& spec) {
  LeaderElectionRecord record;
  if (!spec.is_object()) return record;
  record.holder_identity = StringField(spec, "holderIdentity");
  record.lease_duration_seconds = IntField(spec, "leaseDurationSeconds");
  record.acquire_time = StringField(spec, "acquireTime");
  record.renew_time = StringField(spec, "renewTime");
  record.lease_transitions = IntField(spec, "leaseTransitions");
  return record;
}

}  // namespace leaderelection
