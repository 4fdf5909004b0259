#include "leaderelection/leader_election_record.h"

#include <time.h>

#include <cstdio>

namespace leaderelection {

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto micros = duration_cast<microseconds>(t.time_since_epoch()).count();
  time_t seconds = static_cast<time_t>(micros / 1000000);
  long fraction = static_cast<long>(micros % 1000000);
  if (fraction < 0) {  // before 1970: floor, not truncation
    fraction += 1000000;
    seconds -= 1;
  }
  struct tm tm {};
  gmtime_r(&seconds, &tm);
  char buf[80];  // room for any int year, so the compiler sees no truncation
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, fraction);
  return buf;
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
