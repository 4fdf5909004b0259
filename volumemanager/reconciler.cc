#include "volumemanager/reconciler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>
#include <utility>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/path_validation.h"
#include "base/errno_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"
#include "logging/structured_log.h"
#include "plugins/ownership_pass.h"
#include "volumemanager/volume_setup.h"

namespace volumemanager {
namespace {

// The objects one operation reads, taken on the loop thread when it starts: the plugin builds
// the payload from these on a pool thread and never touches the loop-owned object caches. The
// revisions are immutable and the snapshot is not changed after it was taken.
class SnapshotLookup final : public plugins::ObjectLookup {
 public:
  explicit SnapshotLookup(ObjectSnapshot objects) : objects_(std::move(objects)) {}

  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override {
    base::Result<const cache::ObjectRevision*> found =
        Find({kube::ObjectKind::kConfigMap, ns, name});
    if (!found.ok()) return found.status();
    return (*found)->config_map;
  }
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override {
    base::Result<const cache::ObjectRevision*> found = Find({kube::ObjectKind::kSecret, ns, name});
    if (!found.ok()) return found.status();
    return (*found)->secret;
  }

 private:
  base::Result<const cache::ObjectRevision*> Find(const kube::ObjectRef& ref) const {
    for (const auto& [r, revision] : objects_) {
      if (!(r == ref)) continue;
      if (!revision.ok()) return revision.status();
      return &*revision;
    }
    // Not among the volume's references: the plugin asked for something it did not declare.
    return cache::NotRegisteredError(ref.namespace_, ref.name);
  }

  ObjectSnapshot objects_;
};

// The service account tokens one operation includes, taken on the loop thread with the objects:
// the plugin finds each source's token here (by kube::TokenRefFor, as the populator named it).
class SnapshotTokens final : public plugins::ServiceAccountTokenSource {
 public:
  explicit SnapshotTokens(TokenSnapshot tokens) : tokens_(std::move(tokens)) {}

  base::Result<std::string> GetToken(
      const kube::Pod& pod, const kube::ServiceAccountTokenProjection& projection) override {
    const kube::TokenRef ref = kube::TokenRefFor(pod, projection);
    for (const auto& [r, revision] : tokens_) {
      if (!(r == ref)) continue;
      if (!revision.ok()) return revision.status();
      return *revision->token;
    }
    return base::Status::Error("token for " + ref.Account() + " not registered for pod " +
                               ref.namespace_ + "/" + ref.pod_name);
  }

 private:
  TokenSnapshot tokens_;
};

// The files of a volume's live version, read through its ..data link (pool thread): the volume
// dir opened beneath the root dir, `..data` read as a link that must name a version dir in it,
// and the file opened beneath that version dir; no other link is followed.
class LiveFiles final : public plugins::LiveContent {
 public:
  explicit LiveFiles(VolumeLocation location) : location_(std::move(location)) {}

  base::Result<std::string> Read(const std::string& path) override {
    const std::string full = location_.dir() + "/" + atomicwriter::kDataDirName + "/" + path;
    if (!vol_.valid()) {
      auto vol = OpenVolumeDir(location_);
      if (!vol.ok()) return vol.status();
      vol_ = std::move(vol).value();
    }
    char target[256];
    const ssize_t len =
        ::readlinkat(vol_.get(), atomicwriter::kDataDirName, target, sizeof(target));
    if (len < 0) return base::ErrnoError("readlink", location_.dir() + "/..data", errno);
    const std::string version(target, static_cast<size_t>(len));
    if (!version.starts_with("..") || version.find('/') != std::string::npos || version == "..") {
      return base::Status::Error(location_.dir() + "/..data: points at " + version +
                                 ", not a version dir of the volume");
    }
    const int fd = atomicwriter::OpenBeneath(
        vol_.get(), version + "/" + atomicwriter::CleanPath(path), O_RDONLY);
    if (fd < 0) return atomicwriter::OpenBeneathError(base::ShowNul(full), errno);
    std::string out;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        return base::ErrnoError("read", full, err);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

 private:
  VolumeLocation location_;
  base::UniqueFd vol_;
};

std::string FormatTime(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatDelay(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + "ms";
  const long ms = d.count();
  if (ms % 1000 == 0 && ms < 60000) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms / 60000) + "m" + std::to_string((ms % 60000) / 1000) + "s";
}

// The daemon's VolumeDisk: volume_setup.h.
class RealDisk final : public VolumeDisk {
 public:
  base::Result<bool> KubeletHasSetUp(const VolumeLocation& location) override {
    return volumemanager::KubeletHasSetUp(location);
  }
  base::Result<atomicwriter::WriteResult> SetUp(const SetUpRequest& request) override {
    return SetUpVolume(request);
  }
  base::Result<TearDownOutcome> TearDown(const VolumeLocation& location,
                                         OwnershipJournal* journal) override {
    return TearDownVolume(location, *journal);
  }
  base::Result<std::optional<std::string>> DataLinkTarget(const VolumeLocation& location) override {
    auto vol = OpenVolumeDir(location);
    if (!vol.ok()) {
      // Gone (torn down by the kubelet): not set up. A link or file on its path: an error.
      if (vol.status().sys_errno() == ENOENT) return std::optional<std::string>();
      return vol.status();
    }
    char buf[PATH_MAX];
    const ssize_t n = ::readlinkat(vol->get(), atomicwriter::kDataDirName, buf, sizeof(buf));
    if (n < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
      return base::ErrnoError("readlink", location.dir() + "/" + atomicwriter::kDataDirName, errno);
    }
    return std::optional<std::string>(std::string(buf, static_cast<size_t>(n)));
  }
  std::unique_ptr<plugins::LiveContent> LiveVersion(const VolumeLocation& location) override {
    return std::make_unique<LiveFiles>(location);
  }
  std::vector<SubPathCopy> UpdateSubPaths(const SubPathUpdateRequest& request) override {
    return volumemanager::UpdateSubPaths(request);
  }
};

// Phases in which a record waits for no operation and no pass of its own (a timer or an event
// brings it back): what was under way for the volume has ended.
bool Rests(VolumePhase phase) {
  return phase == VolumePhase::kIdle || phase == VolumePhase::kBackingOff ||
         phase == VolumePhase::kAwaitingKubelet || phase == VolumePhase::kAwaitingSources;
}

// The daemon's OperationRunner: the OperationExecutor.
class ExecutorRunner final : public OperationRunner {
 public:
  explicit ExecutorRunner(OperationExecutor* executor) : executor_(executor) {}
  bool CanStart(const VolumeKey& key, SteadyTime now) const override {
    return executor_->CanStart(key, now);
  }
  bool Run(const VolumeKey& key, std::function<base::Status()> work,
           std::function<void(const base::Status&)> done) override {
    return executor_->Run(key, std::move(work), std::move(done));
  }
  const ExponentialBackoff* Backoff(const VolumeKey& key) const override {
    return executor_->Backoff(key);
  }
  bool InFlight(const VolumeKey& key) const override { return executor_->InFlight(key); }
  void Forget(const VolumeKey& key) override { executor_->Forget(key); }

 private:
  OperationExecutor* executor_;
};

}  // namespace

std::shared_ptr<VolumeDisk> RealVolumeDisk() { return std::make_shared<RealDisk>(); }

const char* VolumePhaseName(VolumePhase phase) {
  switch (phase) {
    case VolumePhase::kDue:
      return "due";
    case VolumePhase::kIdle:
      return "idle";
    case VolumePhase::kAwaitingSources:
      return "awaiting-sources";
    case VolumePhase::kAwaitingKubelet:
      return "awaiting-kubelet";
    case VolumePhase::kCheckingSetUp:
      return "checking-set-up";
    case VolumePhase::kFetching:
      return "fetching";
    case VolumePhase::kFetched:
      return "fetched";
    case VolumePhase::kWriting:
      return "writing";
    case VolumePhase::kVerifying:
      return "verifying";
    case VolumePhase::kTearingDown:
      return "tearing-down";
    case VolumePhase::kBackingOff:
      return "backing-off";
  }
  return "?";
}

Reconciler::Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
                       OperationExecutor* executor, cache::ObjectManager* objects)
    : Reconciler(std::move(options), dsw, asw, std::make_unique<ExecutorRunner>(executor), nullptr,
                 objects) {}

Reconciler::Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
                       OperationRunner* runner, cache::ObjectManager* objects)
    : Reconciler(std::move(options), dsw, asw, nullptr, runner, objects) {}

Reconciler::Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
                       std::unique_ptr<OperationRunner> owned, OperationRunner* runner,
                       cache::ObjectManager* objects)
    : options_(std::move(options)),
      policy_(options_.kubelet_owns_volumes ? OwnershipPolicy::KubeletOwned()
                                            : OwnershipPolicy::SelfOwned()),
      node_allocatable_(std::make_shared<const kube::ResourceList>(options_.node_allocatable)),
      dsw_(dsw),
      asw_(asw),
      owned_runner_(std::move(owned)),
      executor_(owned_runner_ != nullptr ? owned_runner_.get() : runner),
      objects_(objects) {
  if (!options_.disk) options_.disk = RealVolumeDisk();
  if (!options_.clock) options_.clock = &std::chrono::steady_clock::now;
}

Reconciler::~Reconciler() = default;

const VolumeRecord* Reconciler::Find(const VolumeKey& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

size_t Reconciler::ledger_count() const {
  size_t n = 0;
  for (const auto& [key, record] : records_) n += record.ledger != nullptr ? 1 : 0;
  return n;
}

size_t Reconciler::cleanup_due_count() const {
  size_t n = 0;
  for (const auto& [key, record] : records_) n += record.cleanup_timer.has_value() ? 1 : 0;
  return n;
}

size_t Reconciler::fetch_state_count() const {
  size_t n = 0;
  for (const auto& [key, record] : records_) {
    const bool fetch = record.phase == VolumePhase::kFetching ||
                       record.phase == VolumePhase::kFetched ||
                       record.phase == VolumePhase::kCheckingSetUp;
    n += fetch || record.verify_requested || record.fresh_read_owed() || record.kubelet_set_up_seen
             ? 1
             : 0;
  }
  return n;
}

std::optional<Reconciler::SteadyTime> Reconciler::NextTimer() const {
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first;
}

VolumeRecord& Reconciler::Record(const VolumeKey& key) {
  auto [it, inserted] = records_.try_emplace(key);
  if (inserted) {  // a new record is kDue
    due_now_.insert(key);
    ++phase_counts_[static_cast<size_t>(VolumePhase::kDue)];
    WorkAdded();
  }
  return it->second;
}

void Reconciler::Enter(const VolumeKey& key, VolumeRecord& record, VolumePhase phase,
                       SteadyTime due) {
  const bool was_resting = Rests(record.phase);
  // Leave: what belonged to the old phase goes.
  switch (record.phase) {
    case VolumePhase::kDue:
    case VolumePhase::kFetched:
      due_now_.erase(key);
      break;
    case VolumePhase::kAwaitingSources:
      awaiting_sources_.erase(key);
      break;
    default:
      break;
  }
  if (record.timer) {
    timers_.erase(*record.timer);
    record.timer.reset();
  }
  const bool keeps_fetch = record.phase == VolumePhase::kFetching && phase == VolumePhase::kFetched;
  if (!keeps_fetch) {
    // A fetch is for the operation it precedes: a completion of this one is ignored from now on.
    record.fetch_mode = cache::ObjectManager::FetchMode::kStrategy;
    record.fetch_id = 0;
    record.fetch_covers = 0;
  }
  // Enter.
  --phase_counts_[static_cast<size_t>(record.phase)];
  ++phase_counts_[static_cast<size_t>(phase)];
  record.phase = phase;
  bool work = true;
  switch (phase) {
    case VolumePhase::kDue:
    case VolumePhase::kFetched:
      due_now_.insert(key);
      break;
    case VolumePhase::kAwaitingSources:
      awaiting_sources_.insert(key);  // work once every pod source is seen: the caller looks
      break;
    case VolumePhase::kAwaitingKubelet:
    case VolumePhase::kBackingOff:
      record.timer = timers_.emplace(due, key);
      break;
    default:
      work = false;
      break;
  }
  if (work) WorkAdded();
  // Whoever waits for the volume's new content must hear that its way to disk ended, and not
  // every end is an operation's completion: a remount that finds the inputs it last wrote, or a
  // pass that finds nothing to do, comes to rest here, on the loop.
  if (on_settled_ && Rests(phase) && !was_resting) on_settled_(key);
}

VolumeProgress Reconciler::Progress(const VolumeKey& key) const {
  auto it = records_.find(key);
  const VolumeRecord* record = it == records_.end() ? nullptr : &it->second;
  // No record yet: the next pass makes one (the volume's state changed).
  const VolumePhase phase = record != nullptr ? record->phase : VolumePhase::kDue;
  switch (phase) {
    case VolumePhase::kCheckingSetUp:
    case VolumePhase::kFetching:
    case VolumePhase::kWriting:
    case VolumePhase::kVerifying:
      return VolumeProgress::kWriting;  // its end reports (on_done_, on_settled_)
    case VolumePhase::kBackingOff:
      return VolumeProgress::kFailing;
    case VolumePhase::kAwaitingKubelet:
    case VolumePhase::kAwaitingSources:
    case VolumePhase::kTearingDown:
      return VolumeProgress::kSettled;
    case VolumePhase::kDue:
    case VolumePhase::kFetched:
    case VolumePhase::kIdle:
      break;
  }
  const MountedVolume* mounted = asw_->Find(key);
  bool owed = false;  // not desired: no longer refreshed
  if (dsw_->Find(key) != nullptr && mounted == nullptr) {
    // A first mount; beside the kubelet, only of a volume seen set up by the kubelet.
    owed = !policy_.waits_for_set_up() || (record != nullptr && record->kubelet_set_up_seen);
  } else if (dsw_->Find(key) != nullptr) {
    owed = mounted->uncertain || mounted->remount_required ||
           (record != nullptr && (record->verify_requested || record->fresh_read_owed()));
  }
  // An idle record that owes work with nothing changed since the last pass is not written until
  // an event comes (an object's first read) or at all (its pod is terminating).
  const bool looked_at = phase != VolumePhase::kIdle || asw_->Changed(key) || dsw_->Changed(key);
  if (owed && looked_at) return VolumeProgress::kWriting;
  const ExponentialBackoff* backoff = executor_->Backoff(key);
  return backoff != nullptr && backoff->delay().count() > 0 ? VolumeProgress::kFailing
                                                            : VolumeProgress::kSettled;
}

void Reconciler::MarkDue(const VolumeKey& key) {
  auto it = records_.find(key);
  if (it == records_.end()) {
    if (dsw_->Find(key) == nullptr && asw_->Find(key) == nullptr) {
      // Neither desired nor mounted (added and removed between passes): nothing about the volume
      // is worth keeping, including the backoff of a volume that never mounted.
      asw_->ForgetRequests(key);
      executor_->Forget(key);
      return;
    }
    Record(key);
    return;
  }
  VolumeRecord& record = it->second;
  switch (record.phase) {
    case VolumePhase::kIdle:
    case VolumePhase::kAwaitingSources:
    case VolumePhase::kAwaitingKubelet:
    case VolumePhase::kBackingOff:
      Enter(key, record, VolumePhase::kDue);
      break;
    default:
      // kDue, kFetched: looked at by the next pass anyway. In flight: its completion makes the
      // record due, and the change is looked at then.
      break;
  }
}

void Reconciler::Poke(const VolumeKey& key) { MarkDue(key); }

void Reconciler::Erase(const VolumeKey& key) {
  auto it = records_.find(key);
  if (it == records_.end()) return;
  VolumeRecord& record = it->second;
  Enter(key, record, VolumePhase::kIdle);  // leaves every index
  if (record.cleanup_timer) timers_.erase(*record.cleanup_timer);
  --phase_counts_[static_cast<size_t>(VolumePhase::kIdle)];
  records_.erase(it);
}

void Reconciler::Reconcile(SteadyTime now, bool ready_to_unmount,
                           const std::function<bool(const std::string&)>& is_terminating) {
  ++pass_stats_.passes;
  in_pass_ = true;
  struct PassEnd {
    bool* in_pass;
    ~PassEnd() { *in_pass = false; }
  } pass_end{&in_pass_};
  // Changed desired or actual state (O(1) when none: an empty set is moved, nothing allocated).
  for (const VolumeKey& key : dsw_->TakeChanged()) MarkDue(key);
  for (const VolumeKey& key : asw_->TakeChanged()) MarkDue(key);
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const auto timer = timers_.begin();
    const VolumeKey key = timer->second;
    VolumeRecord& record = records_.at(key);  // a timer lives no longer than its record
    if (record.cleanup_timer == timer) {
      // Back to the disk once the leftovers may go: a remount, whatever the record's phase.
      record.cleanup_timer.reset();
      timers_.erase(timer);
      if (dsw_->Find(key) != nullptr) asw_->MarkRemountRequired(key, now);
      MarkDue(key);
    } else {
      Enter(key, record, VolumePhase::kDue);  // a kubelet recheck or a backoff ended
    }
  }
  if (ready_to_unmount && !was_ready_to_unmount_) {
    while (!awaiting_sources_.empty()) {
      const VolumeKey key = *awaiting_sources_.begin();
      Enter(key, records_.at(key), VolumePhase::kDue);
    }
  }
  was_ready_to_unmount_ = ready_to_unmount;
  if (due_now_.empty()) {
    ++pass_stats_.idle_passes;
    return;
  }
  // Records made due while this pass runs (a fetch that completes at once goes on in the same
  // call) are looked at by the next pass.
  std::set<VolumeKey> due;
  due.swap(due_now_);
  for (const VolumeKey& key : due) {
    auto it = records_.find(key);
    if (it == records_.end()) continue;
    VolumeRecord& record = it->second;
    if (record.phase != VolumePhase::kDue && record.phase != VolumePhase::kFetched) continue;
    due_now_.insert(key);  // the index holds it until Evaluate moves it on
    Evaluate(key, record, now, ready_to_unmount, is_terminating);
  }
}

void Reconciler::Evaluate(const VolumeKey& key, VolumeRecord& record, SteadyTime now,
                          bool ready_to_unmount,
                          const std::function<bool(const std::string&)>& is_terminating) {
  ++pass_stats_.volumes_visited;
  const DesiredVolume* desired = dsw_->Find(key);
  const MountedVolume* mounted = asw_->Find(key);
  if (desired == nullptr) {
    if (mounted == nullptr) {
      // Neither desired nor mounted: nothing about the volume is worth keeping, including the
      // backoff of a volume that never mounted.
      asw_->ForgetRequests(key);
      executor_->Forget(key);
      Erase(key);
      return;
    }
    if (!policy_.tears_down()) {
      // The kubelet tears it down: the daemon only stops refreshing it.
      asw_->Remove(key);
      asw_->ForgetRequests(key);
      executor_->Forget(key);
      Erase(key);
      if (options_.on_volume_released) options_.on_volume_released(key);
      ++stats_.released_to_kubelet;
      logging::Debug("Volume no longer refreshed; the kubelet tears it down",
                     {{"pod", PodName(key)}, {"podUID", key.pod_uid}, {"volume", key.volume_name}});
      return;
    }
    if (!ready_to_unmount) {
      Enter(key, record, VolumePhase::kAwaitingSources);
      return;
    }
    if (!executor_->CanStart(key, now)) return Blocked(key, record, now);
    return StartTearDown(*mounted, record);
  }
  if (mounted != nullptr && !mounted->uncertain && record.verify_requested) {
    if (!executor_->CanStart(key, now)) return Blocked(key, record, now);
    return StartVerify(*mounted, record);
  }
  // A fresh read owed is a remount owed (its request marked one; a write in flight may have
  // served the mark but not the read).
  const bool needed =
      mounted == nullptr || mounted->uncertain ||
      ((mounted->remount_required || record.fresh_read_owed()) && !is_terminating(key.pod_uid));
  if (!needed) {
    Enter(key, record, VolumePhase::kIdle);  // a fetch done is for the operation it preceded
    return;
  }
  if (!executor_->CanStart(key, now)) return Blocked(key, record, now);
  if (policy_.waits_for_set_up() && mounted == nullptr && !record.kubelet_set_up_seen) {
    return StartSetUpCheck(*desired, record);
  }
  // The write follows a read that covers every fresh read requested before it: a fresh request
  // drops a fetch in flight or done (RequestFreshRemount), and this is the one place a write
  // starts, so a cached read never stands in for a fresh one.
  const bool read_covers =
      record.phase == VolumePhase::kFetched &&
      (!record.fresh_read_owed() || (record.fetch_mode == cache::ObjectManager::FetchMode::kFresh &&
                                     record.fetch_covers == record.fresh_requested));
  if (!read_covers) {
    StartFetch(*desired, record);
    if (record.phase != VolumePhase::kFetched) return;  // its completion makes it due
  }
  if (policy_.waits_for_first_read()) {
    // The kubelet's content is there; an object whose first read has not landed (1,000 watches
    // being set up at the client's QPS) is no reason for a FailedMount on a healthy pod. Its
    // first read notifies, and the volume comes back then.
    for (const kube::ObjectRef& ref : desired->objects) {
      if (!objects_->Unread(ref)) continue;
      ++stats_.waits_for_first_read;
      spdlog::debug("volume \"{}\" of pod UID \"{}\" waits for the first read of {}",
                    key.volume_name, key.pod_uid, ref.ToString());
      Enter(key, record, VolumePhase::kIdle);
      return;
    }
  }
  StartWrite(*desired, mounted, record, now);
}

void Reconciler::Blocked(const VolumeKey& key, VolumeRecord& record, SteadyTime now) {
  const ExponentialBackoff* backoff = executor_->Backoff(key);
  if (!executor_->InFlight(key) && backoff != nullptr && !backoff->Ready(now)) {
    Enter(key, record, VolumePhase::kBackingOff, backoff->retry_at());
  } else {
    // An operation the record does not know of is in flight (none should be): look next pass.
    Enter(key, record, VolumePhase::kDue);
  }
}

void Reconciler::AfterOperation(const VolumeKey& key, const base::Status& s) {
  auto it = records_.find(key);
  if (it != records_.end()) {
    VolumeRecord& record = it->second;
    const ExponentialBackoff* backoff = executor_->Backoff(key);
    if (IsCancelled(s)) {
      // Writes were revoked before the operation touched the disk: nothing failed, and the volume
      // is due again (the next pass runs once writes are allowed).
      ++pass_stats_.operations_cancelled;
      Enter(key, record, VolumePhase::kDue);
    } else if (!s.ok() && backoff != nullptr && !backoff->Ready(Now())) {
      Enter(key, record, VolumePhase::kBackingOff, backoff->retry_at());
    } else {
      Enter(key, record, VolumePhase::kDue);  // a success may have more to do
    }
  }
  if (on_done_) on_done_(key);
}

void Reconciler::RecordSubPathCopies(const VolumeKey& key, const SubPathPlan& plan,
                                     std::vector<SubPathCopy> copies) {
  const DesiredVolume* desired = dsw_->Find(key);
  auto report = [&](const std::string& error) {
    if (desired != nullptr && options_.on_subpath_failure) {
      options_.on_subpath_failure(*desired->pod, key.volume_name, error);
    }
  };
  if (!plan.annotation_error.empty()) {
    logging::Warn("FailedSubPathUpdate: invalid annotation", {{"pod", PodName(key)},
                                                              {"podUID", key.pod_uid},
                                                              {"volume", key.volume_name},
                                                              {"err", plan.annotation_error}});
    report(plan.annotation_error);
  }
  for (const SubPathCopy& c : copies) {
    switch (c.result) {
      case SubPathResult::kUpdated:
        ++subpath_stats_.updated;
        logging::Info("subPath file updated in place", {{"pod", PodName(key)},
                                                        {"podUID", key.pod_uid},
                                                        {"volume", key.volume_name},
                                                        {"container", c.container},
                                                        {"subPath", c.sub_path},
                                                        {"version", c.version}});
        continue;
      case SubPathResult::kCurrent:
        ++subpath_stats_.current;
        continue;
      case SubPathResult::kNotBound:
        // The container has not started: the kubelet binds the file at its start, to the
        // version live then. Nothing to report; the volume's next write looks again.
        ++subpath_stats_.not_bound;
        logging::Debug("subPath file not bound yet: its container has not started",
                       {{"pod", PodName(key)},
                        {"podUID", key.pod_uid},
                        {"volume", key.volume_name},
                        {"container", c.container},
                        {"subPath", c.sub_path}});
        continue;
      case SubPathResult::kRefused:
        ++subpath_stats_.refused;
        break;
      case SubPathResult::kFailed:
        ++subpath_stats_.failed;
        break;
    }
    const std::string error = "subPath \"" + c.sub_path + "\" of container \"" + c.container +
                              "\" (volumeMounts[" + std::to_string(c.index) +
                              "]) not updated: " + c.reason;
    // A placeholder that is no mount point means a node set-up problem: warned once per run.
    const bool warn = !(c.binds_invisible && warned_binds_invisible_);
    if (c.binds_invisible) warned_binds_invisible_ = true;
    (warn ? &logging::Warn : &logging::Debug)("FailedSubPathUpdate",
                                              {{"pod", PodName(key)},
                                               {"podUID", key.pod_uid},
                                               {"volume", key.volume_name},
                                               {"container", c.container},
                                               {"subPath", c.sub_path},
                                               {"result", SubPathResultName(c.result)},
                                               {"err", c.reason}});
    report(error);
  }
  if (auto rec = records_.find(key); rec != records_.end()) {
    rec->second.subpath_copies = std::move(copies);
  }
}

void Reconciler::LogFailure(const DesiredVolume& desired, const std::string& error) {
  const ExponentialBackoff* backoff = executor_->Backoff(desired.key);
  const auto wait = backoff != nullptr ? backoff->delay() : std::chrono::milliseconds(0);
  // The objects whose content did not reach the volume (a write error names only a file): the
  // one `object`, or a projected volume's several as `objects` ("kind/namespace/name,...").
  std::string objects;
  if (desired.objects.size() > 1) {
    for (const kube::ObjectRef& ref : desired.objects) {
      if (!objects.empty()) objects += ',';
      objects +=
          std::string(kube::ObjectKindName(ref.kind)) + '/' + ref.namespace_ + '/' + ref.name;
    }
  }
  // The kubelet's "no retries permitted until <time> (durationBeforeRetry <delay>)", as keys.
  logging::Warn("FailedMount: MountVolume.SetUp failed",
                {{"pod", logging::KObj(desired.pod->metadata)},
                 {"podUID", desired.key.pod_uid},
                 {"volume", desired.key.volume_name},
                 {"uniqueName", desired.unique_name},
                 {"object", desired.objects.size() == 1 ? logging::KRef(desired.objects.front())
                                                        : logging::Value::Absent()},
                 {"objects", logging::Value::IfSet(objects)},
                 {"err", error},
                 {"noRetriesUntil", FormatTime(std::chrono::system_clock::now() + wait)},
                 {"durationBeforeRetry", FormatDelay(wait)}});
  if (options_.on_mount_failure)
    options_.on_mount_failure(*desired.pod, desired.key.volume_name, error);
}

logging::Value Reconciler::PodName(const VolumeKey& key) const {
  if (const DesiredVolume* d = dsw_->Find(key)) return logging::KObj(d->pod->metadata);
  if (const MountedVolume* m = asw_->Find(key)) return logging::Value::IfSet(m->pod);
  return logging::Value::Absent();
}

void Reconciler::AwaitKubeletSetUp(const VolumeKey& key, bool was_mounted) {
  if (was_mounted) {
    asw_->Remove(key);
    if (options_.on_volume_released) options_.on_volume_released(key);
  }
  auto it = records_.find(key);
  if (it == records_.end()) return;
  VolumeRecord& record = it->second;
  record.verify_requested = false;  // nothing of the daemon's to verify
  record.kubelet_set_up_seen = false;
  if (dsw_->Find(key) == nullptr) {
    Enter(key, record, VolumePhase::kDue);  // released or erased by the next pass
    return;
  }
  if (!record.kubelet_wait_logged) {
    record.kubelet_wait_logged = true;
    logging::Info(
        "Waiting for the kubelet to set up the volume (--volume-ownership kubelet): its content is "
        "kept current once the kubelet has mounted it",
        {{"pod", PodName(key)}, {"podUID", key.pod_uid}, {"volume", key.volume_name}});
  }
  Enter(key, record, VolumePhase::kAwaitingKubelet, Now() + options_.kubelet_setup_recheck);
}

void Reconciler::StartSetUpCheck(const DesiredVolume& desired, VolumeRecord& record) {
  const VolumeKey key = desired.key;
  auto set_up = std::make_shared<bool>(false);
  const VolumeLocation loc{options_.root_dir, key.pod_uid, desired.plugin->EscapedName(),
                           key.volume_name};
  const bool started = executor_->Run(
      key,
      [set_up, loc, disk = options_.disk] {
        // A path that cannot be walked safely counts as set up here: the mount that follows
        // fails on it with its error, an Event and backoff, instead of waiting in silence.
        auto r = disk->KubeletHasSetUp(loc);
        *set_up = !r.ok() || *r;
        return base::Status::OK();
      },
      [this, key, set_up](const base::Status& s) {
        if (IsCancelled(s)) return AfterOperation(key, s);
        ++stats_.kubelet_setup_checks;
        if (*set_up) {
          if (auto it = records_.find(key); it != records_.end()) {
            it->second.kubelet_set_up_seen = true;  // fetch and write in the next pass
          }
          AfterOperation(key, s);
          if (on_fetched_) on_fetched_();
        } else {
          AwaitKubeletSetUp(key, /*was_mounted=*/false);
          if (on_done_) on_done_(key);
        }
      });
  if (started)
    Enter(key, record, VolumePhase::kCheckingSetUp);
  else
    Blocked(key, record, Now());
}

void Reconciler::RequestVerify(const VolumeKey& key) {
  if (asw_->Find(key) == nullptr) return;
  Record(key).verify_requested = true;
  MarkDue(key);
}

void Reconciler::StartVerify(const MountedVolume& mounted, VolumeRecord& record) {
  const VolumeKey key = mounted.key;
  auto seen = std::make_shared<std::optional<std::string>>();
  const bool started = executor_->Run(
      key,
      [seen, disk = options_.disk,
       loc = VolumeLocation{options_.root_dir, key.pod_uid, mounted.plugin_dir,
                            key.volume_name}]() -> base::Status {
        auto target = disk->DataLinkTarget(loc);
        if (!target.ok()) return target.status();
        *seen = std::move(target).value();
        return base::Status::OK();
      },
      [this, key, seen, expected = mounted.ts_dir, dir = mounted.dir](const base::Status& s) {
        if (IsCancelled(s)) return AfterOperation(key, s);  // still to verify
        if (auto it = records_.find(key); it != records_.end()) {
          it->second.verify_requested = false;
        }
        ++stats_.swaps_verified;
        if (!s.ok()) {
          logging::Warn("Checking the volume's ..data link failed", {{"pod", PodName(key)},
                                                                     {"podUID", key.pod_uid},
                                                                     {"volume", key.volume_name},
                                                                     {"err", s}});
        } else if (!seen->has_value()) {
          if (policy_.waits_for_set_up()) {
            AwaitKubeletSetUp(key, /*was_mounted=*/true);
            if (on_done_) on_done_(key);
            return;
          }
        } else if (**seen != expected) {
          ++stats_.foreign_swaps;
          logging::Info(
              "..data was swapped by another writer; reading the volume's objects fresh from the "
              "source",
              {{"pod", PodName(key)},
               {"podUID", key.pod_uid},
               {"volume", key.volume_name},
               {"expected", expected},
               {"found", **seen}});
          RequestFreshRemount(key, Now());  // before the completion: a pass is scheduled for it
          if (options_.on_content_swapped) {
            options_.on_content_swapped(key, ContentSwap{true, **seen, Now()});
          }
          AfterOperation(key, base::Status::OK());
          return;
        } else if (options_.on_volume_verified) {
          options_.on_volume_verified(key, dir);  // e.g. re-arms a watch that was lost
        }
        AfterOperation(key, s);
      });
  if (started)
    Enter(key, record, VolumePhase::kVerifying);
  else
    Blocked(key, record, Now());
}

void Reconciler::RequestFreshRemount(const VolumeKey& key, SteadyTime now) {
  if (dsw_->Find(key) == nullptr) return;
  if (const MountedVolume* m = asw_->Find(key)) {
    // The disk changed behind the daemon's back: what it last verified says nothing now.
    VolumeInputs inputs = m->inputs;
    asw_->SetVerified(key, std::move(inputs), SteadyTime{});
  }
  VolumeRecord& record = Record(key);
  ++record.fresh_requested;
  if (record.phase == VolumePhase::kFetching || record.phase == VolumePhase::kFetched) {
    // A read that started before this request cannot decide against the swap: dropped.
    Enter(key, record, VolumePhase::kDue);
  }
  asw_->MarkRemountRequired(key, now);
  MarkDue(key);
}

void Reconciler::StartFetch(const DesiredVolume& desired, VolumeRecord& record) {
  const VolumeKey key = desired.key;
  const auto mode = record.fresh_read_owed() ? cache::ObjectManager::FetchMode::kFresh
                                             : cache::ObjectManager::FetchMode::kStrategy;
  const uint64_t id = ++next_fetch_id_;
  Enter(key, record, VolumePhase::kFetching);
  record.fetch_mode = mode;
  record.fetch_id = id;
  record.fetch_covers = record.fresh_requested;
  const bool fetches_tokens = !desired.tokens.empty() && options_.tokens != nullptr;
  if (desired.objects.empty() && !fetches_tokens) {
    // Nothing to read: as current as a fresh read.
    record.fetch_mode = cache::ObjectManager::FetchMode::kFresh;
    FetchDone(key, id);
    return;
  }
  if (desired.objects.empty()) {
    record.fetch_mode = cache::ObjectManager::FetchMode::kFresh;  // no object to read fresh
  }
  // The managers may complete inside the call (a cache that is current, a token not due): then
  // the operation goes on at once instead of waiting for another pass. The objects and the tokens
  // are read at once; the fetch is done when both are.
  struct State {
    bool in_call = true;
    int pending = 0;
  };
  auto state = std::make_shared<State>();
  auto one_done = [this, key, id, state, alive = std::weak_ptr<char>(alive_)] {
    if (alive.expired()) return;
    if (--state->pending > 0 || state->in_call) return;
    FetchDone(key, id);
    if (on_fetched_) on_fetched_();
  };
  state->pending = (desired.objects.empty() ? 0 : 1) + (fetches_tokens ? 1 : 0);
  if (!desired.objects.empty()) objects_->Fetch(desired.objects, mode, one_done);
  if (fetches_tokens) options_.tokens->Fetch(desired.tokens, one_done);
  state->in_call = false;
  if (state->pending == 0) FetchDone(key, id);
}

void Reconciler::FetchDone(const VolumeKey& key, uint64_t fetch_id) {
  auto it = records_.find(key);
  if (it == records_.end()) return;
  VolumeRecord& record = it->second;
  // A fetch the record dropped (a fresh request came, or the volume moved on) leaves it alone.
  if (record.phase != VolumePhase::kFetching || record.fetch_id != fetch_id) return;
  Enter(key, record, VolumePhase::kFetched);
}

void Reconciler::StartWrite(const DesiredVolume& desired, const MountedVolume* mounted,
                            VolumeRecord& record, SteadyTime now) {
  const VolumeKey key = desired.key;
  const bool first_mount = mounted == nullptr;
  // When the change this write serves was asked for (reload actions measure from it).
  const SteadyTime changed_at =
      mounted != nullptr && mounted->remount_requested_at ? *mounted->remount_requested_at : now;
  // The read this write follows: a fresh one serves the fresh requests it covers, once written.
  const bool fresh = record.fetch_mode == cache::ObjectManager::FetchMode::kFresh;
  const uint64_t covers = record.fetch_covers;
  // The objects as they are now: shared immutable revisions, cheap to take on the loop thread.
  ObjectSnapshot objects;
  objects.reserve(desired.objects.size());
  for (const kube::ObjectRef& ref : desired.objects) {
    objects.emplace_back(ref, objects_->GetRevision(ref));
  }
  // The tokens as they are now (none without a token manager: their sources then fail).
  TokenSnapshot tokens;
  if (options_.tokens != nullptr) {
    tokens.reserve(desired.tokens.size());
    for (const kube::TokenRef& ref : desired.tokens) {
      tokens.emplace_back(ref, options_.tokens->Get(ref));
    }
  }
  const std::string objects_digest = digests_.Digest(objects);
  VolumeInputs inputs{WithTokens(objects_digest, tokens), desired.pod, objects_digest};
  // Everything but its tokens as on disk: a renewal, which is no change for reload actions (an
  // application re-reads its token file, as beside the kubelet's silent renewals).
  const bool tokens_only =
      !tokens.empty() && mounted != nullptr && !mounted->uncertain &&
      SameInputs(VolumeInputs{mounted->inputs.objects_digest_before_tokens, mounted->inputs.pod},
                 VolumeInputs{objects_digest, desired.pod}, key.volume_name,
                 desired.plugin->DependsOnPod(desired.volume()));
  if (mounted != nullptr && !mounted->uncertain &&
      SameInputs(mounted->inputs, inputs, key.volume_name,
                 desired.plugin->DependsOnPod(desired.volume())) &&
      now - mounted->verified_at < options_.disk_verify_interval) {
    // Built from the same inputs as the content on disk, checked recently: nothing to build,
    // write or read. The newer pod object is kept, so the older one can be released. (Never
    // after a fresh request: it marks the disk as not verified.)
    const MountedVolume same = *mounted;
    asw_->MarkMounted(key, same.plugin_dir, same.dir, same.ts_dir, std::chrono::system_clock::now(),
                      now);
    asw_->SetInputs(key, std::move(inputs));
    ++stats_.remounts_unchanged;
    Enter(key, record, VolumePhase::kIdle);
    return;
  }

  // The objects' versions for the log line of a refresh (metadata only).
  std::string versions;
  for (const auto& [ref, revision] : objects) {
    if (!versions.empty()) versions += ',';
    versions += ObjectVersion(ref, revision);
  }
  // Building the payload (copies of the object bytes) and writing it run on a pool thread.
  auto lookup = std::make_shared<SnapshotLookup>(std::move(objects));
  std::shared_ptr<SnapshotTokens> token_source;
  if (options_.tokens != nullptr)
    token_source = std::make_shared<SnapshotTokens>(std::move(tokens));
  auto request = std::make_shared<SetUpRequest>();
  request->location = VolumeLocation{options_.root_dir, key.pod_uid, desired.plugin->EscapedName(),
                                     key.volume_name};
  request->set_permissions = plugins::OwnershipPassFor(*desired.pod, key.volume_name);
  request->durable = options_.durable;
  request->refresh_only = policy_.refresh_only();
  request->tmpfs = policy_.mounts_tmpfs(options_.tmpfs, desired.plugin->medium());
  request->journal = options_.journal;
  if (!record.ledger) record.ledger = std::make_shared<atomicwriter::UnpublishedLedger>();
  request->ledger = record.ledger.get();
  request->unpublished_grace = options_.unpublished_grace;
  request->removals = options_.removals;
  if (options_.observe) request->pod = desired.pod->metadata.NamespacedName();
  auto result =
      std::make_shared<base::Result<atomicwriter::WriteResult>>(base::Status::Error("not run"));
  const std::string plugin_dir = request->location.plugin_dir;
  const std::string dir = request->location.dir();
  auto not_set_up = std::make_shared<bool>(false);
  // The tmpfs pages of the payload written, when the volume is on a tmpfs (WriteResult::on_tmpfs).
  auto tmpfs_bytes = std::make_shared<uint64_t>(0);
  // The pod's subPath mounts of the volume it asks to keep current (none without the
  // annotation: nothing allocated), updated by the operation right after the volume's write.
  std::shared_ptr<const SubPathPlan> subpaths;
  std::shared_ptr<std::vector<SubPathCopy>> copies;
  if (SubPathPlan plan = PlanSubPathUpdates(*desired.pod, key.volume_name); !plan.empty()) {
    subpaths = std::make_shared<const SubPathPlan>(std::move(plan));
    copies = std::make_shared<std::vector<SubPathCopy>>();
  }

  const bool started = executor_->Run(
      key,
      [request, result, ledger = record.ledger, lookup, token_source, not_set_up, tmpfs_bytes,
       subpaths, copies, disk = options_.disk, waits_for_set_up = policy_.waits_for_set_up(),
       carries_over = policy_.carries_pod_derived_over(), pod = desired.pod, spec = desired.spec,
       plugin = desired.plugin, allocatable = node_allocatable_]() -> base::Status {
        // (`ledger` is captured to outlive the write.)
        if (waits_for_set_up) {
          auto set_up = disk->KubeletHasSetUp(request->location);
          if (!set_up.ok()) return set_up.status();
          if (!*set_up) {
            *not_set_up = true;  // not a failure: looked at again later
            return base::Status::OK();
          }
          request->kubelet_set_up_checked = true;  // SetUpVolume need not look again
        }
        plugins::VolumeHost host;
        host.objects = lookup.get();
        host.tokens = token_source.get();
        host.node_allocatable = allocatable;
        std::unique_ptr<plugins::LiveContent> live;
        if (carries_over) {
          live = disk->LiveVersion(request->location);
          host.pod_derived_from = live.get();
        }
        // `spec` points into *pod, which this closure keeps alive.
        base::Result<atomicwriter::Payload> payload = plugin->BuildPayload(*pod, *spec, host);
        if (!payload.ok()) return payload.status();  // nothing written: a first mount leaves no dir
        request->payload = std::move(payload).value();
        *result = disk->SetUp(*request);
        if (result->ok() && subpaths && !subpaths->mounts.empty()) {
          // Published or not (another writer's swap may have left nothing to publish): the bound
          // files need the bytes the volume shows. The operation, and what waits for it, ends
          // only after every copy.
          SubPathUpdateRequest copy;
          copy.location = request->location;
          copy.payload = &request->payload;
          copy.version = (*result)->ts_dir;
          copy.mounts = subpaths->mounts;
          *copies = disk->UpdateSubPaths(copy);
        }
        if (result->ok() && (*result)->on_tmpfs) {
          *tmpfs_bytes = atomicwriter::TmpfsPageBytes(request->payload);
        }
        request->payload.clear();  // the bytes are on disk; do not keep them until the callback
        return result->status();
      },
      [this, key, first_mount, plugin_dir, dir, result, not_set_up, tmpfs_bytes, fresh, covers,
       changed_at, subpaths, copies, tokens_only, versions = std::move(versions),
       inputs = std::move(inputs), started_at = now](const base::Status& s) mutable {
        if (IsCancelled(s)) return AfterOperation(key, s);  // the fresh read is still owed
        const DesiredVolume* d = dsw_->Find(key);
        auto rec = records_.find(key);
        // A failed write looked at the kubelet's set-up itself (before its payload): the next
        // attempt need not look again first. (That look was an operation of its own, whose
        // success reset the failure backoff: every retry came after 500 ms.)
        if (rec != records_.end() && (s.ok() || *not_set_up)) {
          rec->second.kubelet_set_up_seen = false;
        }
        if (s.ok() && *not_set_up) {
          // The kubelet has torn the volume down (or not set it up after all): nothing to refresh.
          ++stats_.kubelet_setup_checks;
          AwaitKubeletSetUp(key, !first_mount);
          if (on_done_) on_done_(key);
          return;
        }
        if (s.ok()) {
          if (rec != records_.end() && fresh) {
            // The fresh requests this write's read covered are served.
            rec->second.fresh_served = std::max(rec->second.fresh_served, covers);
          }
          const bool published = (*result)->published;
          const MountedVolume* before = asw_->Find(key);
          const bool recovered = before != nullptr && !before->last_error.empty();
          RecordMount(key, plugin_dir, published, started_at);
          asw_->MarkMounted(key, plugin_dir, dir, (*result)->ts_dir,
                            std::chrono::system_clock::now(), started_at);
          if (d != nullptr) asw_->SetPod(key, d->pod->metadata.namespace_, d->pod->metadata.name);
          const auto done_at = Now();
          const atomicwriter::WriteResult& w = **result;
          // The tmpfs pages the daemon holds: in a volume of its own, the live version, written
          // or found current; beside the kubelet, a version it published, until another
          // writer's version is found live instead.
          if (published || !policy_.kubelet_owned) {
            asw_->SetTmpfsBytes(key, *tmpfs_bytes, w.ts_dir);
          } else if (const MountedVolume* live = asw_->Find(key);
                     live != nullptr && live->tmpfs_version != w.ts_dir) {
            asw_->SetTmpfsBytes(key, 0, "");
          }
          const bool leftovers = !w.cleanup_error.empty() || w.awaiting_grace > 0;
          // With leftovers, the disk counts as not recently verified, so that the write planned
          // below goes to the disk instead of being served from the inputs.
          asw_->SetVerified(key, std::move(inputs),
                            leftovers ? done_at - options_.disk_verify_interval : done_at);
          // Beside the kubelet the daemon sets nothing up: each write is a refresh of the
          // kubelet's volume.
          ++(policy_.kubelet_owned ? stats_.refreshes_ok : stats_.mounts_ok);
          if (published) ++stats_.versions_published;
          if (subpaths) RecordSubPathCopies(key, *subpaths, std::move(*copies));
          if (options_.on_volume_verified) options_.on_volume_verified(key, dir);
          // A first set-up of the daemon's own is no change (the application reads its files
          // when it starts); beside the kubelet, the kubelet's set-up came first.
          if (published && (!first_mount || policy_.kubelet_owned) && !tokens_only &&
              options_.on_content_swapped) {
            options_.on_content_swapped(key, ContentSwap{false, w.ts_dir, changed_at});
          }
          if (!w.cleanup_error.empty()) {
            ++stats_.cleanups_failed;
            logging::Warn("Volume shows its new content, but cleaning up after the write failed",
                          {{"pod", PodName(key)},
                           {"podUID", key.pod_uid},
                           {"volume", key.volume_name},
                           {"err", w.cleanup_error},
                           {"retryInS", std::chrono::duration_cast<std::chrono::seconds>(
                                            options_.unpublished_grace)
                                            .count()}});
          }
          if (leftovers && rec != records_.end()) {
            // Back to the disk once the leftovers may go (one timer per volume: the latest).
            VolumeRecord& r = rec->second;
            if (r.cleanup_timer) timers_.erase(*r.cleanup_timer);
            r.cleanup_timer = timers_.emplace(
                done_at + options_.unpublished_grace + std::chrono::milliseconds(100), key);
            WorkAdded();
          }
          if (options_.observe) {
            // The disk compared and reported (ObservingDisk): nothing was set up or written.
            logging::Debug("Observe: volume compared", {{"pod", PodName(key)},
                                                        {"podUID", key.pod_uid},
                                                        {"volume", key.volume_name},
                                                        {"version", (*result)->ts_dir}});
          } else if (first_mount && policy_.kubelet_owned) {
            // The kubelet set the volume up; the daemon's first write into it (published when
            // the kubelet's content was not the objects' latest) is no set-up.
            logging::Info("Volume set up by the kubelet: refreshed from now on",
                          {{"pod", PodName(key)},
                           {"podUID", key.pod_uid},
                           {"volume", key.volume_name},
                           {"objects", logging::Value::IfSet(versions)},
                           {"version", (*result)->ts_dir},
                           {"published", published},
                           {"writer", options_.writer_identity}});
          } else if (first_mount) {
            logging::Info("MountVolume.SetUp succeeded", {{"pod", PodName(key)},
                                                          {"podUID", key.pod_uid},
                                                          {"volume", key.volume_name},
                                                          {"version", (*result)->ts_dir},
                                                          {"writer", options_.writer_identity}});
          } else if (published || recovered) {
            // A refresh is said once, with what it brought and how long after the change; a
            // volume whose last attempt had failed says it recovered.
            logging::Info(
                recovered ? "Volume recovered after failures" : "Volume updated",
                {{"pod", PodName(key)},
                 {"podUID", key.pod_uid},
                 {"volume", key.volume_name},
                 {"objects", logging::Value::IfSet(versions)},
                 {"tokens", tokens_only ? logging::Value("renewed") : logging::Value::Absent()},
                 {"version", (*result)->ts_dir},
                 {"published", published},
                 {"latencyMs",
                  static_cast<long>(
                      std::chrono::duration_cast<std::chrono::milliseconds>(done_at - changed_at)
                          .count())},
                 {"writer", options_.writer_identity}});
          } else {
            // Every write is logged with its writer (one writer per node can be checked).
            logging::Debug("Volume checked, unchanged", {{"pod", PodName(key)},
                                                         {"podUID", key.pod_uid},
                                                         {"volume", key.volume_name},
                                                         {"version", (*result)->ts_dir},
                                                         {"writer", options_.writer_identity}});
          }
        } else {
          ++stats_.mounts_failed;
          RecordFailure(kOperationMount, d, plugin_dir, s, started_at);
          asw_->SetLastError(key, s.message());
          if (d != nullptr) {
            LogFailure(*d, s.message());
          } else {
            logging::Warn("FailedMount: MountVolume.SetUp failed", {{"pod", PodName(key)},
                                                                    {"podUID", key.pod_uid},
                                                                    {"volume", key.volume_name},
                                                                    {"err", s}});
          }
        }
        AfterOperation(key, s);  // a failure backs off, a success may have more to do
      });
  if (started) {
    Enter(key, record, VolumePhase::kWriting);
  } else {
    logging::Error("Could not queue the mount operation",
                   {{"pod", PodName(key)}, {"podUID", key.pod_uid}, {"volume", key.volume_name}});
    Blocked(key, record, now);
  }
}

void Reconciler::StartTearDown(const MountedVolume& mounted, VolumeRecord& record) {
  const VolumeKey key = mounted.key;
  VolumeLocation loc{options_.root_dir, key.pod_uid, mounted.plugin_dir, key.volume_name};
  auto outcome = std::make_shared<TearDownOutcome>(TearDownOutcome::kRemoved);
  const bool started = executor_->Run(
      key,
      [loc, outcome, journal = options_.journal, disk = options_.disk] {
        auto r = disk->TearDown(loc, journal);
        if (r.ok()) *outcome = *r;
        return r.status();
      },
      [this, key, outcome, dir = loc.dir(), plugin_dir = mounted.plugin_dir, pod = mounted.pod,
       started = Now()](const base::Status& s) {
        if (IsCancelled(s)) return AfterOperation(key, s);
        if (s.ok()) {
          metrics_.ObserveOperation(kOperationUnmount, PluginNameOfDir(plugin_dir), true,
                                    Now() - started);
          // A pod that came back while the teardown ran is mounted again by the next pass.
          asw_->Remove(key);
          executor_->Forget(key);
          if (auto it = records_.find(key); it != records_.end()) it->second.ledger.reset();
          if (options_.observe) {
            // The disk reported it (ObservingDisk): nothing was removed.
            logging::Debug("Observe: teardown looked at", {{"pod", logging::Value::IfSet(pod)},
                                                           {"podUID", key.pod_uid},
                                                           {"volume", key.volume_name},
                                                           {"dir", dir}});
          } else if (*outcome == TearDownOutcome::kNotOwned) {
            ++stats_.teardowns_not_owned;
            logging::Info(
                "Volume no longer refreshed; left in place: this daemon did not set it up",
                {{"pod", logging::Value::IfSet(pod)},
                 {"podUID", key.pod_uid},
                 {"volume", key.volume_name},
                 {"dir", dir}});
          } else {
            ++stats_.teardowns_ok;
            logging::Info("UnmountVolume.TearDown succeeded", {{"pod", logging::Value::IfSet(pod)},
                                                               {"podUID", key.pod_uid},
                                                               {"volume", key.volume_name},
                                                               {"dir", dir}});
          }
        } else {
          ++stats_.teardowns_failed;
          RecordFailure(kOperationUnmount, nullptr, plugin_dir, s, started);
          logging::Warn("UnmountVolume.TearDown failed", {{"pod", logging::Value::IfSet(pod)},
                                                          {"podUID", key.pod_uid},
                                                          {"volume", key.volume_name},
                                                          {"err", s}});
        }
        AfterOperation(key, s);
      });
  if (started)
    Enter(key, record, VolumePhase::kTearingDown);
  else
    Blocked(key, record, Now());
}

void Reconciler::RecordMount(const VolumeKey& key, const std::string& plugin_dir, bool published,
                             SteadyTime started) {
  const SteadyTime done = Now();
  const std::string plugin = PluginNameOfDir(plugin_dir);
  metrics_.ObserveOperation(kOperationMount, plugin, true, done - started);
  const MountedVolume* m = asw_->Find(key);
  // Served: requested before the operation read its objects.
  if (published && m != nullptr && m->remount_requested_at && *m->remount_requested_at <= started) {
    metrics_.ObservePropagation(plugin, done - *m->remount_requested_at);
  }
}

void Reconciler::RecordFailure(const char* operation, const DesiredVolume* desired,
                               const std::string& plugin_dir, const base::Status& error,
                               SteadyTime started) {
  const std::string plugin = PluginNameOfDir(plugin_dir);
  metrics_.ObserveOperation(operation, plugin, false, Now() - started);
  bool objects_unavailable = false;
  if (desired != nullptr) {
    for (const kube::ObjectRef& ref : desired->objects) {
      base::Result<cache::ObjectRevision> revision = objects_->GetRevision(ref);
      if (!revision.ok() || !revision->exists()) objects_unavailable = true;
    }
    // A token that could not be had (refused, failing, expired) is an input unavailable too.
    for (const kube::TokenRef& ref : desired->tokens) {
      if (options_.tokens != nullptr && !options_.tokens->Get(ref).ok()) objects_unavailable = true;
    }
  }
  metrics_.CountFailure(operation, plugin, FailureReason(error, objects_unavailable));
}

}  // namespace volumemanager
