// ManifestDirScanner<Decoded>: runs the scans of one manifest directory (manifest_dir.h), and the
// decoding of every file whose bytes changed, on the libuv thread pool, and hands each outcome to
// the loop thread, so that no manifest is read or decoded on the loop.
//
// Promise: one scan at a time. A scan requested while one runs is merged into the next (the wider
// scope, the union of the named files), so a burst of requests costs at most two scans. Outcomes
// are delivered in order, on the loop thread, never after Stop. ScanNow runs one scan on the
// calling thread, for start-up (before the loop runs) only.
//
// `decode(path, bytes)` runs on a pool thread: it may use only its arguments and what it captured
// by value, never the owner's state. It must not throw (an exception is caught and turned into a
// failed scan, but the owner learns nothing more).
//
// Thread model: a loop-thread object. Stop (also from `done`) and the destructor end all `done`
// calls; a scan in flight then finishes on the pool and is dropped, and the loop must run on for
// its memory to be released.
#ifndef VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_SCANNER_H_
#define VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_SCANNER_H_

#include <uv.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "manifestdir/manifest_dir.h"

namespace manifestdir {

template <typename Decoded>
class ManifestDirScanner {
 public:
  struct File {
    std::string name;
    std::string path;
    base::Status status;             // not OK: the read failed
    std::optional<Decoded> decoded;  // set when the bytes differ from the last good read's
  };
  struct Outcome {
    ManifestDirScan::Listing listing = ManifestDirScan::Listing::kNotListed;
    std::string error;
    std::vector<std::string> removed;  // name order
    std::vector<File> files;           // name order
  };
  using Decode = std::function<Decoded(const std::string& path, const std::string& bytes)>;
  using Done = std::function<void(Outcome)>;

  ManifestDirScanner(ManifestDirOptions options, Decode decode)
      : state_(std::make_shared<State>(std::move(options), std::move(decode))) {}
  ~ManifestDirScanner() { Stop(); }
  ManifestDirScanner(const ManifestDirScanner&) = delete;
  ManifestDirScanner& operator=(const ManifestDirScanner&) = delete;

  // One scan on the calling thread. Only before Start.
  Outcome ScanNow(ManifestScanScope scope, const std::set<std::string>& named = {}) {
    return Run(*state_, scope, named);
  }

  // From now on Request scans on the pool of `loop`; `done` gets each outcome.
  void Start(uv_loop_t* loop, Done done) {
    loop_ = loop;
    state_->done = std::move(done);
  }

  void Request(ManifestScanScope scope, const std::set<std::string>& named) {
    if (loop_ == nullptr || !state_->done) return;
    if (!pending_ || static_cast<int>(scope) > static_cast<int>(*pending_)) pending_ = scope;
    pending_named_.insert(named.begin(), named.end());
    if (!state_->in_flight) StartNext();
  }

  void Stop() {
    state_->done = nullptr;
    pending_.reset();
  }

  // Files read so far (observability and tests); scans run so far.
  uint64_t reads() const { return state_->reads.load(); }
  uint64_t scans() const { return state_->scans.load(); }
  // No scan running or waiting.
  bool idle() const { return !state_->in_flight && !pending_; }

 private:
  struct State {
    State(ManifestDirOptions options, Decode d) : dir(std::move(options)), decode(std::move(d)) {}
    ManifestDir dir;  // touched by one scan at a time (pool), never by the loop while in flight
    Decode decode;
    Done done;  // loop thread; null once stopped
    bool in_flight = false;
    std::atomic<uint64_t> reads{0};
    std::atomic<uint64_t> scans{0};
  };
  struct Work {
    uv_work_t req{};
    std::shared_ptr<State> state;
    ManifestDirScanner* owner = nullptr;
    ManifestScanScope scope = ManifestScanScope::kStatAll;
    std::set<std::string> named;
    Outcome outcome;
  };

  static Outcome Run(State& s, ManifestScanScope scope, const std::set<std::string>& named) {
    ManifestDirScan scan = s.dir.Scan(scope, named);
    Outcome out;
    out.listing = scan.listing;
    out.error = std::move(scan.error);
    out.removed = std::move(scan.removed);
    for (ManifestFileRead& read : scan.reads) {
      File f{read.name, s.dir.PathOf(read.name), std::move(read.status), std::nullopt};
      if (read.bytes) {
        f.decoded = s.decode(f.path, *read.bytes);
        read.bytes.reset();  // the bytes go as soon as they are decoded
      }
      out.files.push_back(std::move(f));
    }
    s.reads = s.dir.reads();
    ++s.scans;
    return out;
  }

  void StartNext() {
    auto work = std::make_unique<Work>();
    work->req.data = work.get();
    work->state = state_;
    work->owner = this;
    work->scope = *pending_;
    work->named = std::move(pending_named_);
    pending_.reset();
    pending_named_.clear();
    const int rc = uv_queue_work(
        loop_, &work->req,
        [](uv_work_t* req) {
          auto* w = static_cast<Work*>(req->data);
          // No exception may cross into libuv.
          try {
            w->outcome = Run(*w->state, w->scope, w->named);
          } catch (const std::exception& e) {
            w->outcome = Outcome{};
            w->outcome.listing = ManifestDirScan::Listing::kFailed;
            w->outcome.error = std::string("scan failed: ") + e.what();
          } catch (...) {
            w->outcome = Outcome{};
            w->outcome.listing = ManifestDirScan::Listing::kFailed;
            w->outcome.error = "scan failed";
          }
        },
        [](uv_work_t* req, int) {
          std::unique_ptr<Work> w(static_cast<Work*>(req->data));
          State& s = *w->state;
          s.in_flight = false;
          if (!s.done) return;  // stopped: the owner may be gone
          ManifestDirScanner* self = w->owner;
          Done done = s.done;  // `done` may stop the scanner
          done(std::move(w->outcome));
          if (s.done && self->pending_) self->StartNext();
        });
    if (rc != 0) return;  // only when the loop is closing; the next request tries again
    state_->in_flight = true;
    work.release();  // owned by libuv until the after-work callback
  }

  std::shared_ptr<State> state_;
  uv_loop_t* loop_ = nullptr;
  std::optional<ManifestScanScope> pending_;
  std::set<std::string> pending_named_;
};

}  // namespace manifestdir

#endif  // VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_SCANNER_H_
