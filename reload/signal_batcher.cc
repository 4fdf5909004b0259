#include "reload/signal_batcher.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "base/catch_all.h"
#include "base/uv_timer.h"

namespace reload {

SignalBatcher::SignalBatcher(uv_loop_t* loop, Send send) : loop_(loop), send_(std::move(send)) {
  kick_ = base::NewTimer(loop_, this);
  async_ = new uv_async_t;
  uv_async_init(loop_, async_, [](uv_async_t* h) {
    auto* self = static_cast<SignalBatcher*>(h->data);
    if (base::Status s =
            base::CatchAll("a reload signal batch's end", [self] { self->OnBatchDone(); });
        !s.ok()) {
      spdlog::error("{}", s.message());
    }
  });
  async_->data = this;
  // Only a running batch keeps the loop alive (as a uv_queue_work would).
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));
}

SignalBatcher::~SignalBatcher() {
  // Close() has run: the thread has ended (joined there) and the handles are closed. Should it not
  // have, stop the thread rather than let std::thread's destructor terminate the process.
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

void SignalBatcher::Submit(std::vector<ContainerSignal> requests,
                           std::function<void(Results)> done) {
  if (closing_) return;
  queued_.push_back({std::move(requests), std::move(done)});
  // At the end of this turn, so that every submission of the turn goes in one batch. While a
  // batch runs the queue waits for its end instead (OnBatchDone).
  if (running_.empty() && !uv_is_active(reinterpret_cast<uv_handle_t*>(kick_))) {
    uv_timer_start(
        kick_,
        [](uv_timer_t* h) {
          auto* self = static_cast<SignalBatcher*>(h->data);
          if (base::Status s =
                  base::CatchAll("a reload signal batch", [self] { self->Dispatch(); });
              !s.ok()) {
            spdlog::error("{}", s.message());
          }
        },
        0, 0);
  }
}

void SignalBatcher::Dispatch() {
  if (closing_ || !running_.empty() || queued_.empty()) return;
  running_ = std::move(queued_);
  queued_.clear();
  std::vector<ContainerSignal> job;
  for (const Submission& s : running_) job.insert(job.end(), s.requests.begin(), s.requests.end());
  ++stats_.batches;
  stats_.requests += job.size();
  if (!thread_.joinable()) thread_ = std::thread([this] { ThreadMain(); });
  uv_ref(reinterpret_cast<uv_handle_t*>(async_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    job_ready_ = true;
  }
  cv_.notify_one();
}

void SignalBatcher::ThreadMain() {
  pthread_setname_np(pthread_self(), "vm-signals");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return job_ready_ || stop_; });
    if (stop_) return;
    std::vector<ContainerSignal> job = std::move(job_);
    job_.clear();
    job_ready_ = false;
    lock.unlock();
    Results results;
    std::string failure = "not sent: no result for this request";
    if (base::Status s = base::CatchAll("sending reload signals", [&] { results = send_(job); });
        !s.ok()) {
      results.clear();
      failure = "not sent: " + s.message();
    }
    // One result per request, whatever `send` returned.
    if (results.size() > job.size()) results.erase(results.begin() + job.size(), results.end());
    while (results.size() < job.size()) results.emplace_back(base::Status::Error(failure));
    lock.lock();
    results_ = std::move(results);
    results_ready_ = true;
    uv_async_send(async_);
  }
}

void SignalBatcher::OnBatchDone() {
  Results results;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!results_ready_) return;  // no batch has ended since the last wake-up
    results = std::move(results_);
    results_.clear();
    results_ready_ = false;
  }
  if (running_.empty()) return;
  std::vector<Submission> ended = std::move(running_);
  running_.clear();
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));
  if (closing_) return MaybeClosed();
  // Those waiting go at once, before the `done`s run: a pod that submits again from its `done`
  // joins the batch after.
  Dispatch();
  size_t at = 0;
  for (Submission& s : ended) {
    Results mine;
    mine.reserve(s.requests.size());
    for (size_t i = 0; i < s.requests.size(); ++i) mine.push_back(std::move(results[at++]));
    s.done(std::move(mine));
  }
}

void SignalBatcher::Close(std::function<void()> done) {
  if (closing_) return;
  closing_ = true;
  close_done_ = std::move(done);
  queued_.clear();
  MaybeClosed();
}

void SignalBatcher::MaybeClosed() {
  if (!closing_ || !running_.empty() || kick_ == nullptr) return;
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // idle: it waits for a job, so it ends at once
  }
  base::CloseTimer(kick_);
  kick_ = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(async_), [](uv_handle_t* h) {
    auto* self = static_cast<SignalBatcher*>(h->data);
    delete reinterpret_cast<uv_async_t*>(h);
    std::function<void()> done = std::move(self->close_done_);
    if (done) done();
  });
  async_ = nullptr;
}

}  // namespace reload
