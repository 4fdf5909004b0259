// LeaderElectionRecord: what a lock stores about its holder, as client-go's resourcelock does
// (docs/kubernetes-api.md §6), and the Lease spec it maps to. Plain value.
//
// Times are kept as the text sent or received (metav1.MicroTime, RFC 3339 UTC with six fractional
// digits): the elector never compares them with its own clock (clock skew between writers must
// not matter); it only notices that the record changed and times expiry on its own monotonic
// clock.
#ifndef VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTION_RECORD_H_
#define VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTION_RECORD_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace leaderelection {

struct LeaderElectionRecord {
  // "" = nobody holds it (released).
  std::string holder_identity;
  int lease_duration_seconds = 0;
  std::string acquire_time;
  std::string renew_time;
  int lease_transitions = 0;

  bool operator==(const LeaderElectionRecord&) const = default;
};

// "2025-03-01T10:00:00.123456Z".
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

// The Lease `spec` for a record (empty times are left out, as client-go does with nil times).
nlohmann::json LeaseSpecFromRecord(const LeaderElectionRecord& record);
// The record in a Lease's `spec`; absent or null fields are zero values. Never throws.
LeaderElectionRecord RecordFromLeaseSpec(const nlohmann::json& spec);

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTION_RECORD_H_
