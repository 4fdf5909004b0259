#include "volumemanager/reconciler/operation_executor.h"

#include <exception>
#include <memory>
#include <utility>

#include "base/catch_all.h"
#include "logging/structured_log.h"

namespace volumemanager {

struct OperationExecutor::Request {
  uv_work_t work_req;
  OperationExecutor* executor;
  VolumeKey key;
  std::function<base::Status()> work;
  std::function<void(const base::Status&)> done;
  const WriteGate* gate;
  base::Status result;
  bool cancelled = false;
};

bool OperationExecutor::CanStart(const VolumeKey& key, Clock::time_point now) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return true;
  return !it->second.in_flight && it->second.backoff.Ready(now);
}

bool OperationExecutor::Run(const VolumeKey& key, std::function<base::Status()> work,
                            std::function<void(const base::Status&)> done) {
  if (!CanStart(key, clock_())) return false;
  auto req = std::make_unique<Request>();
  req->work_req.data = req.get();
  req->executor = this;
  req->key = key;
  req->work = std::move(work);
  req->done = std::move(done);
  req->gate = gate_;
  const int rc = uv_queue_work(
      loop_, &req->work_req,
      [](uv_work_t* w) {
        auto* r = static_cast<Request*>(w->data);
        // Asked here, on the pool thread, not when queued: an operation that waited in the pool's
        // queue past the loss of the lock does not start.
        if (r->gate != nullptr && !r->gate->Open()) {
          r->cancelled = true;
          return;
        }
        WriteGate::Scope scope(r->gate);
        r->result = base::CatchAll("operation", r->work);
        if (r->gate != nullptr && !r->gate->Open()) {
          // Started while the lock was held and finished after it was lost: each such write is
          // named with its writer, so that the overlap with a successor can be told.
          logging::Warn(
              "Operation finished after the node's lock was lost",
              {{"podUID", r->key.pod_uid.str()},
               {"volume", r->key.volume_name},
               {"writer", r->gate->writer()},
               {"err", r->result.ok() ? logging::Value::Absent() : logging::Value(r->result)}});
        }
      },
      [](uv_work_t* w, int status) {
        std::unique_ptr<Request> r(static_cast<Request*>(w->data));
        OperationExecutor* self = r->executor;
        if (status == UV_ECANCELED) r->result = base::Status::Error("operation cancelled");
        // Cancelled before it started, or by the work itself (a write refused right before
        // publishing: WriteGate::Current()).
        if (r->cancelled || IsCancelled(r->result)) {
          r->cancelled = true;
          r->result = CancelledStatus();
          ++self->cancelled_count_;
        }
        --self->in_flight_count_;
        // Run() created the entry and Forget() keeps it while in flight: no insert here.
        if (auto it = self->entries_.find(r->key); it != self->entries_.end()) {
          Entry& e = it->second;
          e.in_flight = false;
          if (r->result.ok()) {
            e.backoff.Reset();
            e.last_error = base::Status::OK();
          } else if (IsCancelled(r->result)) {
            // Not run (writes revoked): nothing to back off from, and the last outcome stands.
          } else {
            e.backoff.RecordFailure(self->clock_());
            e.last_error = r->result;
          }
          // Nothing to remember (no backoff, no error): the entry goes, and with it its memory
          // (one per volume at rest otherwise). Whether an operation for the volume ever ended
          // is the reconciler's record (VolumeRecord::operation_ended), not this.
          if (e.backoff.delay().count() == 0 && e.last_error.ok()) self->entries_.erase(it);
        }
        if (!r->done) return;
        if (base::Status s = base::CatchAll("operation completion", [&] { r->done(r->result); });
            !s.ok()) {
          logging::Error(
              "Operation completion failed",
              {{"podUID", r->key.pod_uid.str()}, {"volume", r->key.volume_name}, {"err", s}});
        }
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

std::string OperationExecutor::LastError(const VolumeKey& key) const {
  return LastErrorStatus(key).message();
}

base::Status OperationExecutor::LastErrorStatus(const VolumeKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? base::Status::OK() : it->second.last_error;
}

void OperationExecutor::RetryNow(const VolumeKey& key) {
  if (auto it = entries_.find(key); it != entries_.end()) it->second.backoff.AllowNow();
}

void OperationExecutor::Forget(const VolumeKey& key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && !it->second.in_flight) entries_.erase(it);
}

}  // namespace volumemanager
