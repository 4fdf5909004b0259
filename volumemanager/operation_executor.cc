#include "volumemanager/operation_executor.h"

#include <exception>
#include <memory>
#include <utility>

namespace volumemanager {

struct OperationExecutor::Request {
  uv_work_t work_req;
  OperationExecutor* executor;
  VolumeKey key;
  std::function<base::Status()> work;
  std::function<void(const base::Status&)> done;
  base::Status result;
};

bool OperationExecutor::CanStart(const VolumeKey& key, Clock::time_point now) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return true;
  return !it->second.in_flight && it->second.backoff.Ready(now);
}

bool OperationExecutor::Run(const VolumeKey& key, std::function<base::Status()> work,
                            std::function<void(const base::Status&)> done) {
  if (!CanStart(key, Clock::now())) return false;
  auto req = std::make_unique<Request>();
  req->work_req.data = req.get();
  req->executor = this;
  req->key = key;
  req->work = std::move(work);
  req->done = std::move(done);
  const int rc = uv_queue_work(
      loop_, &req->work_req,
      [](uv_work_t* w) {
        auto* r = static_cast<Request*>(w->data);
        // No exception may cross into libuv.
        try {
          r->result = r->work();
        } catch (const std::exception& e) {
          r->result = base::Status::Error(std::string("operation failed: ") + e.what());
        } catch (...) {
          r->result = base::Status::Error("operation failed: unknown exception");
        }
      },
      [](uv_work_t* w, int status) {
        std::unique_ptr<Request> r(static_cast<Request*>(w->data));
        OperationExecutor* self = r->executor;
        if (status == UV_ECANCELED) r->result = base::Status::Error("operation cancelled");
        Entry& e = self->entries_[r->key];
        e.in_flight = false;
        --self->in_flight_count_;
        if (r->result.ok()) {
          e.backoff.Reset();
        } else {
          e.backoff.RecordFailure(Clock::now());
        }
        if (r->done) r->done(r->result);
      });
  if (rc != 0) return false;
  entries_[key].in_flight = true;
  ++in_flight_count_;
  req.release();  // owned by libuv until the after-work callback
  return true;
}

const ExponentialBackoff* OperationExecutor::Backoff(const VolumeKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second.backoff;
}

void OperationExecutor::Forget(const VolumeKey& key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && !it->second.in_flight) entries_.erase(it);
}

}  // namespace volumemanager
