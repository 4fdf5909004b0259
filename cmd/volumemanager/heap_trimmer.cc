#include "cmd/volumemanager/heap_trimmer.h"

#include <malloc.h>

#include <exception>
#include <utility>

#include "base/uv_timer.h"

namespace volumemanager {

HeapTrimmer::~HeapTrimmer() { Stop(); }

void HeapTrimmer::Start(uv_loop_t* loop, HeapTrimmerOptions options) {
  if (timer_ != nullptr) return;
  loop_ = loop;
  options_ = std::move(options);
  state_ = std::make_shared<State>();
  state_->trim = options_.trim ? options_.trim : [] { return malloc_trim(0) != 0; };
  timer_ = base::NewTimer(loop_, this);
  // A pending trim never keeps the loop alive (a graceful stop does not wait for it).
  uv_unref(reinterpret_cast<uv_handle_t*>(timer_));
}

void HeapTrimmer::Request() {
  if (timer_ == nullptr) return;
  pending_ = true;
  uv_timer_start(
      timer_, [](uv_timer_t* t) { static_cast<HeapTrimmer*>(t->data)->Fire(); },
      static_cast<uint64_t>(options_.quiet.count()), 0);
}

void HeapTrimmer::Fire() {
  bool busy = false;
  try {
    busy = options_.busy && options_.busy();
  } catch (const std::exception&) {
    busy = false;
  }
  if (busy || state_->in_flight) {
    Request();  // once the work (or the trim still running) is over
    return;
  }
  pending_ = false;
  struct Work {
    uv_work_t req{};
    std::shared_ptr<State> state;
    bool released = false;
  };
  auto work = std::make_unique<Work>();
  work->req.data = work.get();
  work->state = state_;
  const int rc = uv_queue_work(
      loop_, &work->req,
      [](uv_work_t* req) {
        auto* w = static_cast<Work*>(req->data);
        try {  // no exception may cross into libuv
          w->released = w->state->trim();
        } catch (...) {
          w->released = false;
        }
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<Work> w(static_cast<Work*>(req->data));
        w->state->in_flight = false;
        if (w->state->stopped) return;
        ++w->state->trims;
        if (w->released) ++w->state->released;
      });
  if (rc != 0) return;  // the loop is closing
  state_->in_flight = true;
  work.release();  // owned by libuv until the after-work callback
}

void HeapTrimmer::Stop() {
  if (timer_ == nullptr) return;
  state_->stopped = true;
  base::CloseTimer(timer_);
  timer_ = nullptr;
  pending_ = false;
}

}  // namespace volumemanager
