// The two halves of a heap-allocated libuv timer's life, shared by every module that owns one:
// a handle must stay allocated until libuv's close callback runs, so it is freed there.
#ifndef VOLUMEMANAGER_BASE_UV_TIMER_H_
#define VOLUMEMANAGER_BASE_UV_TIMER_H_

#include <uv.h>

namespace base {

// A new timer on `loop` whose `data` is `data`; never fails (uv_timer_init cannot, for a valid
// loop). Released only by CloseTimer.
inline uv_timer_t* NewTimer(uv_loop_t* loop, void* data) {
  auto* timer = new uv_timer_t;
  uv_timer_init(loop, timer);
  timer->data = data;
  return timer;
}

// Stops the timer and closes it; libuv frees it once the loop has run the close callback, so its
// callback never runs again and its memory outlives every pending libuv reference to it.
inline void CloseTimer(uv_timer_t* timer) {
  uv_timer_stop(timer);
  uv_close(reinterpret_cast<uv_handle_t*>(timer),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_UV_TIMER_H_
