// ManifestGrace: how long the owner of a manifest directory waits before it acts on what is most
// likely the middle of a change, so that the change is seen once, as a whole:
//   * a file that is gone: `git checkout` unlinks a file and creates it again, an editor may save
//     by removing and renaming; a file back within the window is the same file, changed or not
//     (no teardown, no "object deleted" in between);
//   * a file that cannot be decoded: `cat > file` creates it empty and then writes it, a copy
//     lands in pieces; a file that decodes within the window was never broken (no error logged).
// The owner tells it what each scan found (Gone, Present, Invalid, Valid); `expired` gets, on the
// loop thread, the names whose window ended with the file still gone or still invalid: only then
// does the owner drop the file's content, or log and list it as rejected.
//
// Thread model: a loop-thread object; `expired` runs inside the loop, never after Stop. A window
// of 0 reports at once (from the call that started it, not from a timer).
#ifndef VOLUMEMANAGER_MANIFESTDIR_MANIFEST_GRACE_H_
#define VOLUMEMANAGER_MANIFESTDIR_MANIFEST_GRACE_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace manifestdir {

// The default window (--manifest-settle-time): well above the few milliseconds between the
// unlink and the create of a checkout or the create and the write of a shell redirect, well below
// anything a person would notice.
inline constexpr std::chrono::milliseconds kDefaultManifestSettleTime{1000};

// A file of a manifest directory that is there but rejected (cannot be read, decoded or
// validated) and has stayed so for the settle time: for /debug/state and the
// volumemanager_manifest_errors gauge.
struct RejectedManifest {
  std::string file;    // its path
  std::string reason;  // the error, naming the field (never a value)
};

class ManifestGrace {
 public:
  using Expired = std::function<void(const std::vector<std::string>& gone,
                                     const std::vector<std::string>& invalid)>;

  ManifestGrace() = default;
  ~ManifestGrace();
  ManifestGrace(const ManifestGrace&) = delete;
  ManifestGrace& operator=(const ManifestGrace&) = delete;

  void Start(uv_loop_t* loop, std::chrono::milliseconds window, Expired expired);
  // No `expired` call after it returns. Idempotent; the loop must run on for the timer to close.
  void Stop();

  // `name` was reported gone: reported through `expired` once the window passes, unless Present
  // comes first. A pending Invalid for it is dropped. With no window (or before Start), false and
  // nothing pending: the caller acts at once. True when the removal waits.
  bool Gone(const std::string& name);
  // `name` was read (whatever its content): a pending Gone is cancelled. True when one was.
  bool Present(const std::string& name);
  // `name` failed to decode or read: reported through `expired` once the window passes since the
  // first of a run of failures, unless Valid comes first. False with no window: report at once.
  bool Invalid(const std::string& name);
  // `name` decoded well: a pending Invalid is cancelled. True when one was.
  bool Valid(const std::string& name);

  bool GonePending(const std::string& name) const;
  bool InvalidPending(const std::string& name) const;
  size_t pending() const { return pending_.size(); }

 private:
  enum class Kind { kGone, kInvalid };
  struct Pending {
    Kind kind;
    std::chrono::steady_clock::time_point deadline;
  };
  void Arm();
  void Fire();

  uv_loop_t* loop_ = nullptr;
  std::chrono::milliseconds window_{0};
  Expired expired_;
  uv_timer_t* timer_ = nullptr;
  std::map<std::string, Pending> pending_;
};

}  // namespace manifestdir

#endif  // VOLUMEMANAGER_MANIFESTDIR_MANIFEST_GRACE_H_
