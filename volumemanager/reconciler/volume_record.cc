#include "volumemanager/reconciler/volume_record.h"

namespace volumemanager {

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

bool Rests(VolumePhase phase) {
  return phase == VolumePhase::kIdle || phase == VolumePhase::kBackingOff ||
         phase == VolumePhase::kAwaitingKubelet || phase == VolumePhase::kAwaitingSources;
}

VolumeRecord* VolumeRecords::Find(const VolumeKey& key) {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

const VolumeRecord* VolumeRecords::Find(const VolumeKey& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

VolumeRecord& VolumeRecords::Get(const VolumeKey& key, bool* made) {
  auto [it, inserted] = records_.try_emplace(key);
  if (inserted) {  // a new record is kDue
    due_now_.insert(key);
    ++phase_counts_[static_cast<size_t>(VolumePhase::kDue)];
  }
  *made = inserted;
  return it->second;
}

Transition VolumeRecords::Enter(const VolumeKey& key, VolumeRecord& record, VolumePhase phase,
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
  Transition t;
  switch (phase) {
    case VolumePhase::kDue:
    case VolumePhase::kFetched:
      due_now_.insert(key);
      t.work_added = true;
      break;
    case VolumePhase::kAwaitingSources:
      awaiting_sources_.insert(key);  // work once every pod source is seen: the caller looks
      t.work_added = true;
      break;
    case VolumePhase::kAwaitingKubelet:
    case VolumePhase::kBackingOff:
      record.timer = timers_.emplace(due, key);
      t.work_added = true;
      break;
    default:
      break;
  }
  t.came_to_rest = Rests(phase) && !was_resting;
  return t;
}

void VolumeRecords::Erase(const VolumeKey& key) {
  auto it = records_.find(key);
  if (it == records_.end()) return;
  VolumeRecord& record = it->second;
  Enter(key, record, VolumePhase::kIdle);  // leaves every index
  if (record.cleanup_timer) timers_.erase(*record.cleanup_timer);
  --phase_counts_[static_cast<size_t>(VolumePhase::kIdle)];
  records_.erase(it);
}

void VolumeRecords::SetCleanupTimer(const VolumeKey& key, VolumeRecord& record, SteadyTime at) {
  if (record.cleanup_timer) timers_.erase(*record.cleanup_timer);
  record.cleanup_timer = timers_.emplace(at, key);
}

std::optional<VolumeRecords::Expired> VolumeRecords::NextExpired(SteadyTime now) {
  if (timers_.empty() || timers_.begin()->first > now) return std::nullopt;
  const auto timer = timers_.begin();
  Expired expired{timer->second, false};
  VolumeRecord& record = records_.at(expired.key);  // a timer lives no longer than its record
  if (record.cleanup_timer == timer) {
    record.cleanup_timer.reset();
    timers_.erase(timer);
    expired.cleanup = true;
  }
  return expired;
}

std::optional<VolumeRecords::SteadyTime> VolumeRecords::NextTimer() const {
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first;
}

std::set<VolumeKey> VolumeRecords::TakeDue() {
  std::set<VolumeKey> due;
  due.swap(due_now_);
  return due;
}

size_t VolumeRecords::ledger_count() const {
  size_t n = 0;
  for (const auto& [key, record] : records_) n += record.ledger != nullptr ? 1 : 0;
  return n;
}

size_t VolumeRecords::cleanup_due_count() const {
  size_t n = 0;
  for (const auto& [key, record] : records_) n += record.cleanup_timer.has_value() ? 1 : 0;
  return n;
}

size_t VolumeRecords::fetch_state_count() const {
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

}  // namespace volumemanager
