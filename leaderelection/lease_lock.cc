#include "leaderelection/lease_lock.h"

#include <utility>

namespace leaderelection {
namespace {

constexpr char kApiVersion[] = "coordination.k8s.io/v1";

}  // namespace

LeaseLock::LeaseLock(kubeclient::ApiClient* api, std::string lease_namespace, std::string name)
    : api_(api), namespace_(std::move(lease_namespace)), name_(std::move(name)) {}

LeaseLock::~LeaseLock() { CancelPending(); }

std::string LeaseLock::CollectionPath() const {
  return "/apis/coordination.k8s.io/v1/namespaces/" + namespace_ + "/leases";
}

std::string LeaseLock::ObjectPath() const { return CollectionPath() + "/" + name_; }

void LeaseLock::CancelPending() {
  if (in_flight_) api_->Cancel(call_);
  in_flight_ = false;
}

uint64_t LeaseLock::Begin() {
  in_flight_ = true;
  return ++seq_;
}

void LeaseLock::Track(uint64_t seq, kubeclient::ApiClient::CallId id) {
  // A callback that ran before the call returned may have started the next call already.
  if (seq == seq_ && in_flight_) call_ = id;
}

void LeaseLock::Finish() { in_flight_ = false; }

void LeaseLock::Get(std::function<void(GetResult)> done) {
  const uint64_t seq = Begin();
  auto id = api_->Get(ObjectPath(), [this, done = std::move(done)](kubeclient::ApiResult result) {
    Finish();
    GetResult out;
    if (!result.ok()) {
      if (result.error->IsNotFound()) {
        out.not_found = true;
      } else {
        out.status = base::Status::Error("get " + Describe() + ": " + result.error->ToString());
      }
    } else {
      lease_ = std::move(result.object);
      out.record = RecordFromLeaseSpec(lease_.value("spec", nlohmann::json::object()));
    }
    done(std::move(out));
  });
  Track(seq, id);
}

void LeaseLock::Create(const LeaderElectionRecord& record, std::function<void(base::Status)> done) {
  nlohmann::json lease = {{"apiVersion", kApiVersion},
                          {"kind", "Lease"},
                          {"metadata", {{"name", name_}, {"namespace", namespace_}}},
                          {"spec", LeaseSpecFromRecord(record)}};
  const uint64_t seq = Begin();
  auto id = api_->Create(
      CollectionPath(), lease, [this, done = std::move(done)](kubeclient::ApiResult result) {
        Finish();
        if (!result.ok()) {
          done(base::Status::Error("create " + Describe() + ": " + result.error->ToString()));
          return;
        }
        lease_ = std::move(result.object);
        done(base::Status::OK());
      });
  Track(seq, id);
}

void LeaseLock::Update(const LeaderElectionRecord& record, std::function<void(base::Status)> done) {
  if (!lease_.is_object()) {
    done(base::Status::Error("update " + Describe() + ": the Lease was not read yet"));
    return;
  }
  nlohmann::json lease = lease_;
  lease["apiVersion"] = kApiVersion;
  lease["kind"] = "Lease";
  lease["spec"] = LeaseSpecFromRecord(record);
  const uint64_t seq = Begin();
  auto id = api_->Update(
      ObjectPath(), lease, [this, done = std::move(done)](kubeclient::ApiResult result) {
        Finish();
        if (!result.ok()) {
          done(base::Status::Error("update " + Describe() + ": " + result.error->ToString()));
          return;
        }
        lease_ = std::move(result.object);
        done(base::Status::OK());
      });
  Track(seq, id);
}

}  // namespace leaderelection
