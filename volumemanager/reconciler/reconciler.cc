#include "volumemanager/reconciler/reconciler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>
#include <set>
#include <utility>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/path_validation.h"
#include "base/errno_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"
#include "logging/structured_log.h"
#include "plugins/ownership_pass.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/reconciler/write_operation.h"

namespace volumemanager {
Reconciler::Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
                       OperationRunner* runner, cache::ObjectManager* objects)
    : options_(std::move(options)),
      policy_(options_.kubelet_owns_volumes ? OwnershipPolicy::KubeletOwned()
                                            : OwnershipPolicy::SelfOwned()),
      node_allocatable_(std::make_shared<const kube::ResourceList>(options_.node_allocatable)),
      dsw_(dsw),
      asw_(asw),
      executor_(runner),
      objects_(objects) {
  if (options_.env == nullptr) options_.env = atomicwriter::PosixEnv();
  if (!options_.disk) options_.disk = RealVolumeDisk(options_.env);
  if (!options_.clock) options_.clock = [env = options_.env] { return env->SteadyNow(); };
}

Reconciler::~Reconciler() = default;

VolumeRecord& Reconciler::Record(const VolumeKey& key) {
  bool made = false;
  VolumeRecord& record = records_.Get(key, &made);
  if (made) WorkAdded();  // a new record is due
  return record;
}

void Reconciler::Enter(const VolumeKey& key, VolumeRecord& record, VolumePhase phase,
                       SteadyTime due) {
  const Transition t = records_.Enter(key, record, phase, due);
  if (t.work_added) WorkAdded();
  // Whoever waits for the volume's new content must hear that its way to disk ended, and not
  // every end is an operation's completion: a remount that finds the inputs it last wrote, or a
  // pass that finds nothing to do, comes to rest here, on the loop.
  if (t.came_to_rest && on_settled_) on_settled_(key);
}

VolumeProgress Reconciler::Progress(const VolumeKey& key) const {
  const VolumeRecord* record = records_.Find(key);
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
  VolumeRecord* found = records_.Find(key);
  if (found == nullptr) {
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
  VolumeRecord& record = *found;
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
  VolumeRecord* record = records_.Find(key);
  if (record == nullptr) return;
  Enter(key, *record, VolumePhase::kIdle);  // leaves every index (and says it came to rest)
  records_.Erase(key);
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
  while (const std::optional<VolumeRecords::Expired> expired = records_.NextExpired(now)) {
    const VolumeKey& key = expired->key;
    if (expired->cleanup) {
      // Back to the disk once the leftovers may go: a remount, whatever the record's phase.
      if (dsw_->Find(key) != nullptr) asw_->MarkRemountRequired(key, now);
      MarkDue(key);
    } else {
      Enter(key, *records_.Find(key), VolumePhase::kDue);  // a kubelet recheck or a backoff ended
    }
  }
  if (ready_to_unmount && !was_ready_to_unmount_) {
    while (!records_.awaiting_sources().empty()) {
      const VolumeKey key = *records_.awaiting_sources().begin();
      Enter(key, *records_.Find(key), VolumePhase::kDue);
    }
  }
  was_ready_to_unmount_ = ready_to_unmount;
  if (records_.due_count() == 0) {
    ++pass_stats_.idle_passes;
    return;
  }
  // Records made due while this pass runs (a fetch that completes at once goes on in the same
  // call) are looked at by the next pass.
  std::set<VolumeKey> due = records_.TakeDue();
  std::set<VolumeKey> held;  // first mounts beyond the window, due again at a later pass
  while (!due.empty()) {
    auto node = due.extract(due.begin());
    const VolumeKey& key = node.value();
    VolumeRecord* found = records_.Find(key);
    if (found == nullptr) continue;
    VolumeRecord& record = *found;
    if (record.phase != VolumePhase::kDue && record.phase != VolumePhase::kFetched) continue;
    if (FirstMountWindowFull() && asw_->Find(key) == nullptr) {
      held.insert(held.end(), std::move(node));  // ascending: no allocation, no search
      continue;
    }
    records_.KeepDue(key);  // the index holds it until Evaluate moves it on
    Evaluate(key, record, now, ready_to_unmount, is_terminating);
  }
  if (!held.empty()) {
    // The pass a first mount's completion asks for looks at them again.
    ++pass_stats_.first_mount_window_full;
    first_mount_place_wanted_ = true;
    records_.ReturnDue(std::move(held));
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
      logging::Debug(
          "Volume no longer refreshed; the kubelet tears it down",
          {{"pod", PodName(key)}, {"podUID", key.pod_uid.str()}, {"volume", key.volume_name}});
      return;
    }
    if (!ready_to_unmount) {
      Enter(key, record, VolumePhase::kAwaitingSources);
      return;
    }
    if (!executor_->CanStart(key, now)) return Blocked(key, record, now);
    return StartTearDown(key, *mounted, record);
  }
  if (mounted != nullptr && !mounted->uncertain && record.verify_requested) {
    if (!executor_->CanStart(key, now)) return Blocked(key, record, now);
    return StartVerify(key, *mounted, record);
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
    return StartSetUpCheck(key, *desired, record);
  }
  // The write follows a read that covers every fresh read requested before it: a fresh request
  // drops a fetch in flight or done (RequestFreshRemount), and this is the one place a write
  // starts, so a cached read never stands in for a fresh one.
  const bool read_covers =
      record.phase == VolumePhase::kFetched &&
      (!record.fresh_read_owed() || (record.fetch_mode == cache::ObjectManager::FetchMode::kFresh &&
                                     record.fetch_covers == record.fresh_requested));
  if (!read_covers) {
    StartFetch(key, *desired, record);
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
                    key.volume_name, key.pod_uid.str(), ref.ToString());
      Enter(key, record, VolumePhase::kIdle);
      return;
    }
  }
  StartWrite(key, *desired, mounted, record, now);
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

bool Reconciler::RunOperation(const VolumeKey& key, std::function<base::Status()> work,
                              std::function<void(const base::Status&)> done) {
  return executor_->Run(key, std::move(work),
                        [this, key, done = std::move(done)](const base::Status& s) {
                          if (VolumeRecord* record = records_.Find(key); record != nullptr) {
                            record->operation_ended = true;
                          }
                          done(s);
                        });
}

void Reconciler::AfterOperation(const VolumeKey& key, const base::Status& s) {
  if (VolumeRecord* found = records_.Find(key); found != nullptr) {
    VolumeRecord& record = *found;
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
  subpaths_.Report(PodName(key), key, plan, copies, [&](const std::string& error) {
    if (desired != nullptr && options_.on_subpath_failure) {
      options_.on_subpath_failure(*desired->pod, key.volume_name, error);
    }
  });
  if (VolumeRecord* current = records_.Find(key); current != nullptr) {
    current->subpath_copies = std::move(copies);
  }
}

logging::Value Reconciler::PodName(const VolumeKey& key) const {
  if (const DesiredVolume* d = dsw_->Find(key)) return logging::KObj(d->pod->metadata);
  if (const MountedVolume* m = asw_->Find(key)) return logging::KObjOf(m->pod());
  return logging::Value::Absent();
}

void Reconciler::AwaitKubeletSetUp(const VolumeKey& key, bool was_mounted) {
  if (was_mounted) {
    asw_->Remove(key);
    if (options_.on_volume_released) options_.on_volume_released(key);
  }
  VolumeRecord* found = records_.Find(key);
  if (found == nullptr) return;
  VolumeRecord& record = *found;
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
        {{"pod", PodName(key)}, {"podUID", key.pod_uid.str()}, {"volume", key.volume_name}});
  }
  Enter(key, record, VolumePhase::kAwaitingKubelet, Now() + options_.kubelet_setup_recheck);
}

void Reconciler::StartSetUpCheck(VolumeKey key, const DesiredVolume& desired,
                                 VolumeRecord& record) {
  auto set_up = std::make_shared<bool>(false);
  const VolumeLocation loc{options_.root_dir, key.pod_uid, desired.plugin->EscapedName(),
                           key.volume_name};
  const bool started = RunOperation(
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
          if (VolumeRecord* current = records_.Find(key); current != nullptr) {
            current->kubelet_set_up_seen = true;  // fetch and write in the next pass
          }
          AfterOperation(key, s);
          if (on_ready_to_start_) on_ready_to_start_();
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

void Reconciler::StartVerify(VolumeKey key, const MountedVolume& mounted, VolumeRecord& record) {
  auto seen = std::make_shared<std::optional<std::string>>();
  VolumeLocation loc{options_.root_dir, key.pod_uid, mounted.plugin_dir(), key.volume_name};
  std::string dir = loc.dir();
  const bool started = RunOperation(
      key,
      [seen, disk = options_.disk, loc = std::move(loc)]() -> base::Status {
        auto target = disk->DataLinkTarget(loc);
        if (!target.ok()) return target.status();
        *seen = std::move(target).value();
        return base::Status::OK();
      },
      [this, key, seen, expected = mounted.ts_dir, dir = std::move(dir)](const base::Status& s) {
        if (IsCancelled(s)) return AfterOperation(key, s);  // still to verify
        if (VolumeRecord* current = records_.Find(key); current != nullptr) {
          current->verify_requested = false;
        }
        ++stats_.swaps_verified;
        if (!s.ok()) {
          logging::Warn("Checking the volume's ..data link failed", {{"pod", PodName(key)},
                                                                     {"podUID", key.pod_uid.str()},
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
               {"podUID", key.pod_uid.str()},
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

void Reconciler::StartFetch(VolumeKey key, const DesiredVolume& desired, VolumeRecord& record) {
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
    if (on_ready_to_start_) on_ready_to_start_();
  };
  state->pending = (desired.objects.empty() ? 0 : 1) + (fetches_tokens ? 1 : 0);
  if (!desired.objects.empty()) objects_->Fetch(desired.objects, mode, one_done);
  if (fetches_tokens) options_.tokens->Fetch(desired.tokens, one_done);
  state->in_call = false;
  if (state->pending == 0) FetchDone(key, id);
}

void Reconciler::FetchDone(const VolumeKey& key, uint64_t fetch_id) {
  VolumeRecord* found = records_.Find(key);
  if (found == nullptr) return;
  VolumeRecord& record = *found;
  // A fetch the record dropped (a fresh request came, or the volume moved on) leaves it alone.
  if (record.phase != VolumePhase::kFetching || record.fetch_id != fetch_id) return;
  Enter(key, record, VolumePhase::kFetched);
}

void Reconciler::StartWrite(VolumeKey key, const DesiredVolume& desired,
                            const MountedVolume* mounted, VolumeRecord& record, SteadyTime now) {
  const bool first_mount = mounted == nullptr;
  // When the change this write serves was asked for (reload actions measure from it).
  const SteadyTime changed_at = mounted != nullptr && mounted->remount_requested_at()
                                    ? *mounted->remount_requested_at()
                                    : now;
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
  const InputsDigest objects_digest = digests_.Digest(objects);
  // Without tokens the digest before them is the digest itself: not kept twice.
  VolumeInputs inputs{WithTokens(objects_digest, tokens), desired.pod,
                      tokens.empty() ? InputsDigest() : objects_digest};
  // Everything but its tokens as on disk: a renewal, which is no change for reload actions (an
  // application re-reads its token file, as beside the kubelet's silent renewals).
  const bool tokens_only =
      !tokens.empty() && mounted != nullptr && !mounted->uncertain &&
      SameInputs(VolumeInputs{mounted->inputs.digest_before_tokens(), mounted->inputs.pod},
                 VolumeInputs{objects_digest, desired.pod}, key.volume_name,
                 desired.plugin->DependsOnPod(desired.volume()));
  if (mounted != nullptr && !mounted->uncertain &&
      SameInputs(mounted->inputs, inputs, key.volume_name,
                 desired.plugin->DependsOnPod(desired.volume())) &&
      now - mounted->verified_at < options_.disk_verify_interval) {
    // Built from the same inputs as the content on disk, checked recently: nothing to build,
    // write or read. The newer pod object is kept, so the older one can be released. (Never
    // after a fresh request: it marks the disk as not verified.)
    // (The arguments are the volume's own fields: MarkMounted is safe with that.)
    asw_->MarkMounted(key, mounted->plugin_dir(), mounted->ts_dir, options_.env->WallNow(), now);
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
  auto op = std::make_shared<WriteOperation>();
  op->objects = std::move(objects);
  op->with_tokens = options_.tokens != nullptr;
  if (op->with_tokens) op->tokens = std::move(tokens);
  SetUpRequest& request = op->request;
  request.location = VolumeLocation{options_.root_dir, key.pod_uid, desired.plugin->EscapedName(),
                                    key.volume_name};
  request.set_permissions = plugins::OwnershipPassFor(*desired.pod, key.volume_name);
  request.durable = options_.durable;
  request.refresh_only = policy_.refresh_only();
  request.tmpfs = policy_.mounts_tmpfs(options_.tmpfs, desired.plugin->medium());
  request.journal = options_.journal;
  if (!record.ledger) record.ledger = std::make_shared<atomicwriter::UnpublishedLedger>();
  op->ledger = record.ledger;
  request.ledger = record.ledger.get();
  request.unpublished_grace = options_.unpublished_grace;
  request.removals = options_.removals;
  if (options_.observe) request.pod = desired.pod->metadata.NamespacedName();
  op->pod = desired.pod;
  op->spec = desired.spec;
  op->plugin = desired.plugin;
  op->node_allocatable = node_allocatable_;
  op->waits_for_set_up = policy_.waits_for_set_up();
  op->carries_pod_derived_over = policy_.carries_pod_derived_over();
  // Without the annotation nothing is allocated for subPath mounts.
  if (SubPathPlan plan = PlanSubPathUpdates(*desired.pod, key.volume_name); !plan.empty()) {
    op->subpaths = std::make_shared<const SubPathPlan>(std::move(plan));
  }
  WriteStart start{.first_mount = first_mount,
                   .fresh = fresh,
                   .covers = covers,
                   .tokens_only = tokens_only,
                   .changed_at = changed_at,
                   .started_at = now,
                   .versions = std::move(versions),
                   .inputs = std::move(inputs)};
  if (first_mount) ++first_mounts_in_flight_;  // before the executor may call the completion
  const bool started = RunOperation(
      key, [op, disk = options_.disk] { return RunWrite(*op, *disk); },
      [this, key, op, first_mount, start = std::move(start)](const base::Status& s) mutable {
        if (first_mount) --first_mounts_in_flight_;
        WriteDone(key, *op, std::move(start), s);
        if (first_mount_place_wanted_ && !FirstMountWindowFull()) {
          first_mount_place_wanted_ = false;
          if (on_ready_to_start_) on_ready_to_start_();
        }
      });
  if (started) {
    Enter(key, record, VolumePhase::kWriting);
  } else {
    if (first_mount) --first_mounts_in_flight_;
    logging::Error(
        "Could not queue the mount operation",
        {{"pod", PodName(key)}, {"podUID", key.pod_uid.str()}, {"volume", key.volume_name}});
    Blocked(key, record, now);
  }
}

void Reconciler::WriteDone(const VolumeKey& key, WriteOperation& op, WriteStart start,
                           const base::Status& s) {
  const std::string& plugin_dir = op.request.location.plugin_dir;
  const std::string dir = op.request.location.dir();
  if (IsCancelled(s)) return AfterOperation(key, s);  // the fresh read is still owed
  const DesiredVolume* d = dsw_->Find(key);
  VolumeRecord* rec = records_.Find(key);
  // A failed write looked at the kubelet's set-up itself (before its payload): the next
  // attempt need not look again first. (That look was an operation of its own, whose
  // success reset the failure backoff: every retry came after 500 ms.)
  if (rec != nullptr && (s.ok() || op.not_set_up)) {
    rec->kubelet_set_up_seen = false;
  }
  if (s.ok() && op.not_set_up) {
    // The kubelet has torn the volume down (or not set it up after all): nothing to refresh.
    ++stats_.kubelet_setup_checks;
    AwaitKubeletSetUp(key, !start.first_mount);
    if (on_done_) on_done_(key);
    return;
  }
  if (s.ok()) {
    if (rec != nullptr && start.fresh) {
      // The fresh requests this write's read covered are served.
      rec->fresh_served = std::max(rec->fresh_served, start.covers);
    }
    const atomicwriter::WriteResult& w = *op.result;
    const bool published = w.published;
    const MountedVolume* before = asw_->Find(key);
    const bool recovered = before != nullptr && !before->last_error().empty();
    RecordMount(key, plugin_dir, published, start.started_at);
    asw_->MarkMounted(key, plugin_dir, w.ts_dir, options_.env->WallNow(), start.started_at);
    const auto done_at = Now();
    // The tmpfs pages the daemon holds: in a volume of its own, the live version, written
    // or found current; beside the kubelet, a version it published, until another
    // writer's version is found live instead.
    if (published || !policy_.kubelet_owned) {
      asw_->SetTmpfsBytes(key, op.tmpfs_bytes, w.ts_dir);
    } else if (const MountedVolume* live = asw_->Find(key);
               live != nullptr && live->tmpfs_version() != w.ts_dir) {
      asw_->SetTmpfsBytes(key, 0, "");
    }
    const bool leftovers = !w.cleanup_error.empty() || w.awaiting_grace > 0;
    // With leftovers, the disk counts as not recently verified, so that the write planned
    // below goes to the disk instead of being served from the inputs.
    asw_->SetVerified(key, std::move(start.inputs),
                      leftovers ? done_at - options_.disk_verify_interval : done_at);
    // Beside the kubelet the daemon sets nothing up: each write is a refresh of the
    // kubelet's volume.
    ++(policy_.kubelet_owned ? stats_.refreshes_ok : stats_.mounts_ok);
    if (published) ++stats_.versions_published;
    if (op.subpaths) RecordSubPathCopies(key, *op.subpaths, std::move(op.copies));
    if (options_.on_volume_verified) options_.on_volume_verified(key, dir);
    // A first set-up of the daemon's own is no change (the application reads its files
    // when it starts); beside the kubelet, the kubelet's set-up came first.
    if (published && (!start.first_mount || policy_.kubelet_owned) && !start.tokens_only &&
        options_.on_content_swapped) {
      options_.on_content_swapped(key, ContentSwap{false, w.ts_dir, start.changed_at});
    }
    if (!w.cleanup_error.empty()) {
      ++stats_.cleanups_failed;
      logging::Warn(
          "Volume shows its new content, but cleaning up after the write failed",
          {{"pod", PodName(key)},
           {"podUID", key.pod_uid.str()},
           {"volume", key.volume_name},
           {"err", w.cleanup_error},
           {"retryInS",
            std::chrono::duration_cast<std::chrono::seconds>(options_.unpublished_grace).count()}});
    }
    if (leftovers && rec != nullptr) {
      // Back to the disk once the leftovers may go (one timer per volume: the latest).
      records_.SetCleanupTimer(
          key, *rec, done_at + options_.unpublished_grace + std::chrono::milliseconds(100));
      WorkAdded();
    }
    WriteReport report;
    report.pod = PodName(key);
    report.pod_uid = key.pod_uid;
    report.volume = key.volume_name;
    report.objects = std::move(start.versions);
    report.version = w.ts_dir;
    report.published = published;
    report.first_mount = start.first_mount;
    report.kubelet_owned = policy_.kubelet_owned;
    report.observe = options_.observe;
    report.recovered = recovered;
    report.tokens_only = start.tokens_only;
    report.latency =
        std::chrono::duration_cast<std::chrono::milliseconds>(done_at - start.changed_at);
    report.writer = options_.writer_identity;
    LogWriteDone(report);
  } else {
    ++stats_.mounts_failed;
    RecordFailure(kOperationMount, d, plugin_dir, s, start.started_at);
    asw_->SetLastError(key, s.message());
    if (d != nullptr) {
      const ExponentialBackoff* backoff = executor_->Backoff(key);
      LogWriteFailed(key, *d, s.message(),
                     backoff != nullptr ? backoff->delay() : std::chrono::milliseconds(0),
                     options_.env->WallNow());
      if (options_.on_mount_failure)
        options_.on_mount_failure(*d->pod, key.volume_name, s.message());
    } else {
      logging::Warn("FailedMount: MountVolume.SetUp failed", {{"pod", PodName(key)},
                                                              {"podUID", key.pod_uid.str()},
                                                              {"volume", key.volume_name},
                                                              {"err", s}});
    }
  }
  AfterOperation(key, s);  // a failure backs off, a success may have more to do
}

void Reconciler::StartTearDown(VolumeKey key, const MountedVolume& mounted, VolumeRecord& record) {
  VolumeLocation loc{options_.root_dir, key.pod_uid, mounted.plugin_dir(), key.volume_name};
  auto outcome = std::make_shared<TearDownOutcome>(TearDownOutcome::kRemoved);
  const bool started = RunOperation(
      key,
      [loc, outcome, journal = options_.journal, disk = options_.disk] {
        auto r = disk->TearDown(loc, journal);
        if (r.ok()) *outcome = *r;
        return r.status();
      },
      [this, key, outcome, dir = loc.dir(), plugin_dir = mounted.plugin_dir(), pod = mounted.pod(),
       started = Now()](const base::Status& s) {
        if (IsCancelled(s)) return AfterOperation(key, s);
        if (s.ok()) {
          metrics_.ObserveOperation(kOperationUnmount, PluginNameOfDir(plugin_dir), true,
                                    Now() - started);
          // A pod that came back while the teardown ran is mounted again by the next pass.
          asw_->Remove(key);
          executor_->Forget(key);
          if (VolumeRecord* current = records_.Find(key); current != nullptr) {
            current->ledger.reset();
          }
          if (options_.observe) {
            // The disk reported it (ObservingDisk): nothing was removed.
            logging::Debug("Observe: teardown looked at", {{"pod", logging::KObjOf(pod)},
                                                           {"podUID", key.pod_uid.str()},
                                                           {"volume", key.volume_name},
                                                           {"dir", dir}});
          } else if (*outcome == TearDownOutcome::kNotOwned) {
            ++stats_.teardowns_not_owned;
            logging::Info(
                "Volume no longer refreshed; left in place: this daemon did not set it up",
                {{"pod", logging::KObjOf(pod)},
                 {"podUID", key.pod_uid.str()},
                 {"volume", key.volume_name},
                 {"dir", dir}});
          } else {
            ++stats_.teardowns_ok;
            logging::Info("UnmountVolume.TearDown succeeded", {{"pod", logging::KObjOf(pod)},
                                                               {"podUID", key.pod_uid.str()},
                                                               {"volume", key.volume_name},
                                                               {"dir", dir}});
          }
        } else {
          ++stats_.teardowns_failed;
          RecordFailure(kOperationUnmount, nullptr, plugin_dir, s, started);
          logging::Warn("UnmountVolume.TearDown failed", {{"pod", logging::KObjOf(pod)},
                                                          {"podUID", key.pod_uid.str()},
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
  const std::optional<SteadyTime> requested =
      m != nullptr ? m->remount_requested_at() : std::nullopt;
  if (published && requested && *requested <= started) {
    metrics_.ObservePropagation(plugin, done - *requested);
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
