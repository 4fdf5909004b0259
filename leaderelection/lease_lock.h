// LeaseLock: the leader-election lock as a coordination.k8s.io/v1 Lease (docs/kubernetes-api.md
// §2.3, §6), for operators who want the holder visible in the API. Optimistic concurrency: Update
// PUTs the Lease last read or written with its resourceVersion, so a writer that raced us gets
// 409 Conflict and the attempt fails; Create POSTs and fails with 409 AlreadyExists when someone
// else created it first.
//
// Calls go through the given ApiClient (its retry rules and rate limiter apply; a client of its
// own keeps renewals from queueing behind other traffic). Error messages name the Lease and the
// API error. Not thread-safe; loop thread only. The ApiClient must outlive the lock.
#ifndef VOLUMEMANAGER_LEADERELECTION_LEASE_LOCK_H_
#define VOLUMEMANAGER_LEADERELECTION_LEASE_LOCK_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kubeclient/api_client.h"
#include "leaderelection/resource_lock.h"

namespace leaderelection {

class LeaseLock : public ResourceLock {
 public:
  LeaseLock(kubeclient::ApiClient* api, std::string lease_namespace, std::string name);
  ~LeaseLock() override;
  LeaseLock(const LeaseLock&) = delete;
  LeaseLock& operator=(const LeaseLock&) = delete;

  void Get(std::function<void(GetResult)> done) override;
  void Create(const LeaderElectionRecord& record, std::function<void(base::Status)> done) override;
  // Fails without a request when no Lease was read or written yet.
  void Update(const LeaderElectionRecord& record, std::function<void(base::Status)> done) override;
  void CancelPending() override;
  std::string Describe() const override { return "lease " + namespace_ + "/" + name_; }

 private:
  std::string CollectionPath() const;
  std::string ObjectPath() const;
  // Marks a call started; its sequence number.
  uint64_t Begin();
  // Remembers `id` as the outstanding call unless it already finished.
  void Track(uint64_t seq, kubeclient::ApiClient::CallId id);
  void Finish();

  kubeclient::ApiClient* api_;
  std::string namespace_;
  std::string name_;
  // The Lease as last read or written (carries the resourceVersion to PUT against).
  nlohmann::json lease_;
  bool in_flight_ = false;
  kubeclient::ApiClient::CallId call_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_LEASE_LOCK_H_
