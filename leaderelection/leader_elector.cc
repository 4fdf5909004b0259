#include "leaderelection/leader_elector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <utility>

#include "base/catch_all.h"
#include "base/uv_timer.h"

namespace leaderelection {
namespace {

using std::chrono::milliseconds;

uint64_t TimerMillis(std::chrono::steady_clock::duration d) {
  // Rounded down: a deadline fires early rather than late.
  const auto ms = std::chrono::duration_cast<milliseconds>(d).count();
  return ms > 0 ? static_cast<uint64_t>(ms) : 0;
}

}  // namespace

base::Result<std::unique_ptr<LeaderElector>> LeaderElector::Create(
    uv_loop_t* loop, std::unique_ptr<ResourceLock> lock, LeaderElectorOptions options,
    LeaderCallbacks callbacks) {
  if (lock == nullptr) return base::Status::Error("leader election: no lock");
  if (options.identity.empty()) return base::Status::Error("leader election: empty identity");
  if (options.jitter_factor < 0) {
    return base::Status::Error("leader election: negative jitter factor");
  }
  base::Status s = ValidateTiming(options.timing, LockType::kFile);
  if (!s.ok()) return s.WithContext("leader election");
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(loop, std::move(lock), std::move(options), std::move(callbacks)));
}

LeaderElector::LeaderElector(uv_loop_t* loop, std::unique_ptr<ResourceLock> lock,
                             LeaderElectorOptions options, LeaderCallbacks callbacks)
    : lock_(std::move(lock)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      attempt_timer_(base::NewTimer(loop, this)),
      deadline_timer_(base::NewTimer(loop, this)) {
  if (!options_.random01) {
    auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
    options_.random01 = [rng] { return std::uniform_real_distribution<double>(0, 1)(*rng); };
  }
  lock_->SetLoop(loop);
  lock_->SetOnSuspect([this] { Guarded("suspect", [this] { OnSuspect(); }); });
  last_activity_ = Now();
}

LeaderElector::~LeaderElector() {
  CancelAttempt();
  base::CloseTimer(attempt_timer_);
  base::CloseTimer(deadline_timer_);
}

template <typename F>
void LeaderElector::Guarded(const char* where, F&& body) {
  base::Status s = base::CatchAll(where, std::forward<F>(body));
  if (!s.ok()) spdlog::error("leader election on {}: {}", lock_->Describe(), s.message());
}

LeaderElector::Clock::time_point LeaderElector::Now() const {
  return options_.steady_clock ? options_.steady_clock() : Clock::now();
}

std::string LeaderElector::WallNow() const {
  return FormatMicroTime(options_.wall_clock ? options_.wall_clock()
                                             : std::chrono::system_clock::now());
}

milliseconds LeaderElector::JitteredRetry() {
  const double r = std::clamp(options_.random01(), 0.0, 1.0);
  const auto retry = options_.timing.retry_period;
  return retry + milliseconds(static_cast<int64_t>(static_cast<double>(retry.count()) *
                                                   options_.jitter_factor * r));
}

milliseconds LeaderElector::quiet_limit() const {
  const auto retry = options_.timing.retry_period;
  return options_.timing.renew_deadline + retry +
         milliseconds(
             static_cast<int64_t>(static_cast<double>(retry.count()) * options_.jitter_factor));
}

bool LeaderElector::Alive(Clock::time_point now) const {
  // A term with no renewals has nothing to show until its lock speaks.
  return running() && (quiet_term_ || now - last_activity_ <= quiet_limit());
}

bool LeaderElector::IsLeader() const {
  // The loss deadline is also checked here, so a caller asking while the loop is late (the timer
  // not yet run) is told the truth.
  return state_ == State::kLeading && Now() < lost_at_;
}

void LeaderElector::Start() {
  if (state_ != State::kIdle && state_ != State::kStopped) return;
  state_ = State::kAcquiring;
  Touch();
  // At debug, as the acquisition and transitions below: the daemon says in one info line that it
  // holds the lock, or who holds it while it waits.
  spdlog::debug("leader election: {} campaigning for {}", options_.identity, lock_->Describe());
  ScheduleAttempt(milliseconds(0));
}

void LeaderElector::ScheduleAttempt(milliseconds delay) {
  uv_timer_start(
      attempt_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<LeaderElector*>(t->data);
        self->Guarded("attempt timer", [self] { self->RunAttempt(); });
      },
      static_cast<uint64_t>(delay.count()), 0);
}

void LeaderElector::ArmDeadline(milliseconds delay) {
  uv_timer_start(
      deadline_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<LeaderElector*>(t->data);
        self->Guarded("deadline timer", [self] { self->OnDeadline(); });
      },
      static_cast<uint64_t>(delay.count()), 0);
}

void LeaderElector::RunAttempt() {
  Touch();
  if (state_ == State::kStopping) {
    ReleaseAttempt(/*reread=*/true);
    return;
  }
  if (state_ != State::kAcquiring && state_ != State::kLeading) return;
  ++attempts_;
  attempt_in_flight_ = true;
  const uint64_t generation = ++generation_;
  // Acquiring: an attempt gets renewDeadline. Leading: the loss deadline is already armed.
  if (state_ == State::kAcquiring) ArmDeadline(options_.timing.renew_deadline);
  TryAcquireOrRenew([this, generation](Outcome outcome) { OnAttemptDone(generation, outcome); });
}

void LeaderElector::OnAttemptDone(uint64_t generation, Outcome outcome) {
  if (generation != generation_) return;
  attempt_in_flight_ = false;
  Touch();
  MaybeReportTransition();
  if (state_ == State::kAcquiring) {
    uv_timer_stop(deadline_timer_);
    if (outcome == Outcome::kSucceeded) {
      BecomeLeader();
    } else {
      ScheduleAttempt(JitteredRetry());
    }
    return;
  }
  if (state_ != State::kLeading) return;
  if (outcome == Outcome::kSucceeded) {
    last_renew_sent_ = attempt_sent_;
    ContinueTerm();
  } else if (outcome == Outcome::kHeldByOther) {
    Lose(lock_->Describe() + " is held by " + observed_record_.holder_identity);
  } else {
    ScheduleAttempt(options_.timing.retry_period);  // the loss deadline keeps running
  }
}

void LeaderElector::OnDeadline() {
  Touch();
  switch (state_) {
    case State::kAcquiring:
      spdlog::warn("leader election: attempt on {} not answered within {} ms; trying again",
                   lock_->Describe(), options_.timing.renew_deadline.count());
      CancelAttempt();
      ScheduleAttempt(JitteredRetry());
      break;
    case State::kLeading:
      Lose("no renewal of " + lock_->Describe() + " succeeded within the renew deadline");
      break;
    case State::kStopping:
      spdlog::warn("leader election: release of {} not done within {} ms; giving up",
                   lock_->Describe(), options_.timing.renew_deadline.count());
      CancelAttempt();
      FinishStop();
      break;
    default:
      break;
  }
}

void LeaderElector::BecomeLeader() {
  state_ = State::kLeading;
  last_renew_sent_ = attempt_sent_;
  ContinueTerm();
  spdlog::debug("leader election: {} acquired {}", options_.identity, lock_->Describe());
  if (callbacks_.on_started_leading) {
    Guarded("OnStartedLeading", [this] { callbacks_.on_started_leading(); });
  }
}

void LeaderElector::ContinueTerm() {
  if (!lock_->HeldUntilSuspect()) {
    quiet_term_ = false;
    ArmLossDeadline();
    ScheduleAttempt(options_.timing.retry_period);
    return;
  }
  // The kernel holds it for us: no end to the term, no renewal, until the lock has a doubt.
  quiet_term_ = true;
  uv_timer_stop(attempt_timer_);
  uv_timer_stop(deadline_timer_);
  lost_at_ = Clock::time_point::max();
  if (callbacks_.on_term_extended) {
    Guarded("OnTermExtended", [this] { callbacks_.on_term_extended(lost_at_); });
  }
}

void LeaderElector::OnSuspect() {
  if (state_ != State::kLeading || !quiet_term_) return;  // attempts run on their schedule
  Touch();
  // The hold is in doubt from now: the term ends as if this were the last renewal, unless one
  // succeeds before then.
  quiet_term_ = false;
  last_renew_sent_ = Now();
  ArmLossDeadline();
  ScheduleAttempt(milliseconds(0));
}

void LeaderElector::ArmLossDeadline() {
  lost_at_ = last_renew_sent_ + options_.timing.retry_period + options_.timing.renew_deadline;
  if (callbacks_.on_term_extended) {
    Guarded("OnTermExtended", [this] { callbacks_.on_term_extended(lost_at_); });
  }
  const auto now = Now();
  ArmDeadline(milliseconds(TimerMillis(lost_at_ > now ? lost_at_ - now : Clock::duration{})));
}

void LeaderElector::Lose(const std::string& why) {
  quiet_term_ = false;
  CancelAttempt();
  uv_timer_stop(attempt_timer_);
  uv_timer_stop(deadline_timer_);
  state_ = State::kStopped;
  spdlog::error("leader election: {} lost leadership: {}", options_.identity, why);
  if (callbacks_.on_stopped_leading) {
    Guarded("OnStoppedLeading", [this] { callbacks_.on_stopped_leading(); });
  }
}

void LeaderElector::CancelAttempt() {
  if (attempt_in_flight_) lock_->CancelPending();
  attempt_in_flight_ = false;
  ++generation_;
}

void LeaderElector::Stop(std::function<void()> done) {
  if (state_ == State::kIdle || state_ == State::kStopped) {
    if (done) Guarded("stop callback", done);
    return;
  }
  if (state_ == State::kStopping) {  // a second Stop waits for the first
    if (done) {
      stop_done_ = [first = std::move(stop_done_), second = std::move(done)] {
        if (first) first();
        second();
      };
    }
    return;
  }
  const bool was_leading = state_ == State::kLeading;
  quiet_term_ = false;
  CancelAttempt();
  uv_timer_stop(attempt_timer_);
  uv_timer_stop(deadline_timer_);
  stop_done_ = std::move(done);
  if (!was_leading) {
    spdlog::info("leader election: {} stopped campaigning for {}", options_.identity,
                 lock_->Describe());
    FinishStop();
    return;
  }
  state_ = State::kStopping;
  spdlog::debug("leader election: {} stops leading {}", options_.identity, lock_->Describe());
  if (callbacks_.on_stopped_leading) {
    Guarded("OnStoppedLeading", [this] { callbacks_.on_stopped_leading(); });
  }
  if (!options_.release_on_cancel) {
    FinishStop();
    return;
  }
  ArmDeadline(options_.timing.renew_deadline);
  ReleaseAttempt(/*reread=*/false);
}

void LeaderElector::ReleaseAttempt(bool reread) {
  if (state_ != State::kStopping) return;
  attempt_in_flight_ = true;
  const uint64_t generation = ++generation_;
  if (reread) {
    lock_->Get([this, generation](GetResult result) {
      if (generation != generation_) return;
      attempt_in_flight_ = false;
      Touch();
      if (!result.status.ok()) {
        spdlog::warn("leader election: release: {}", result.status.message());
        ScheduleAttempt(options_.timing.retry_period);
        return;
      }
      if (result.not_found || result.record.holder_identity != options_.identity) {
        FinishStop();  // no longer ours: nothing to release
        return;
      }
      Observe(result.record, /*force=*/false);
      ReleaseAttempt(/*reread=*/false);
    });
    return;
  }
  if (!ObservedIsUs()) {
    attempt_in_flight_ = false;
    FinishStop();
    return;
  }
  LeaderElectionRecord released = observed_record_;
  released.holder_identity.clear();
  released.lease_duration_seconds = 1;
  released.acquire_time = released.renew_time = WallNow();
  lock_->Update(released, [this, generation, released](base::Status s) {
    if (generation != generation_) return;
    attempt_in_flight_ = false;
    Touch();
    if (!s.ok()) {
      spdlog::warn("leader election: release: {}; reading it again", s.message());
      ScheduleAttempt(options_.timing.retry_period);
      return;
    }
    Observe(released, /*force=*/true);
    MaybeReportTransition();
    spdlog::info("leader election: {} released {}", options_.identity, lock_->Describe());
    FinishStop();
  });
}

void LeaderElector::FinishStop() {
  state_ = State::kStopped;
  uv_timer_stop(attempt_timer_);
  uv_timer_stop(deadline_timer_);
  auto done = std::move(stop_done_);
  stop_done_ = nullptr;
  if (done) Guarded("stop callback", done);
}

void LeaderElector::Observe(const LeaderElectionRecord& record, bool force) {
  if (force || !observed_ || record != observed_record_) {
    observed_record_ = record;
    observed_time_ = Now();
    observed_ = true;
  }
}

bool LeaderElector::ObservedLeaseValid(Clock::time_point now) const {
  return observed_ &&
         observed_time_ + std::chrono::seconds(observed_record_.lease_duration_seconds) > now;
}

void LeaderElector::MaybeReportTransition() {
  if (!observed_) return;
  if (reported_ && observed_record_.holder_identity == reported_leader_) return;
  reported_ = true;
  reported_leader_ = observed_record_.holder_identity;
  spdlog::debug("leader election: {} is now held by {}", lock_->Describe(),
                reported_leader_.empty() ? "nobody" : reported_leader_);
  if (callbacks_.on_new_leader) {
    Guarded("OnNewLeader", [this] { callbacks_.on_new_leader(reported_leader_); });
  }
}

void LeaderElector::TryAcquireOrRenew(std::function<void(Outcome)> done) {
  attempt_sent_ = Now();
  const uint64_t generation = generation_;
  LeaderElectionRecord desired;
  desired.holder_identity = options_.identity;
  desired.lease_duration_seconds = static_cast<int>(
      std::chrono::ceil<std::chrono::seconds>(options_.timing.lease_duration).count());
  desired.acquire_time = desired.renew_time = WallNow();
  if (ObservedIsUs() && ObservedLeaseValid(attempt_sent_)) {
    // Fast path: renew the cached record.
    desired.acquire_time = observed_record_.acquire_time;
    desired.lease_transitions = observed_record_.lease_transitions;
    lock_->Update(desired, [this, generation, desired, done](base::Status s) {
      if (generation != generation_) return;
      if (s.ok()) {
        Observe(desired, /*force=*/true);
        done(Outcome::kSucceeded);
        return;
      }
      spdlog::debug("leader election: renewal of {} failed ({}); reading it again",
                    lock_->Describe(), s.message());
      SlowPath(desired, generation, done);
    });
    return;
  }
  SlowPath(std::move(desired), generation, std::move(done));
}

void LeaderElector::SlowPath(LeaderElectionRecord desired, uint64_t generation,
                             std::function<void(Outcome)> done) {
  lock_->Get([this, generation, desired, done](GetResult result) mutable {
    if (generation != generation_) return;
    if (!result.status.ok()) {
      NoteError(result.status);
      done(Outcome::kFailed);
      return;
    }
    if (result.not_found) {
      desired.lease_transitions = 0;
      lock_->Create(desired, [this, generation, desired, done](base::Status s) {
        if (generation != generation_) return;
        if (!s.ok()) {
          NoteError(s);
          done(Outcome::kFailed);
          return;
        }
        NoteError(base::Status::OK());
        Observe(desired, /*force=*/true);
        done(Outcome::kSucceeded);
      });
      return;
    }
    NoteError(base::Status::OK());  // the lock could be read: whatever follows, it is usable
    Observe(result.record, /*force=*/false);
    if (!result.record.holder_identity.empty() && !ObservedIsUs() && ObservedLeaseValid(Now())) {
      done(Outcome::kHeldByOther);
      return;
    }
    if (ObservedIsUs()) {
      desired.acquire_time = result.record.acquire_time;
      desired.lease_transitions = result.record.lease_transitions;
    } else {
      desired.lease_transitions = result.record.lease_transitions + 1;
    }
    lock_->Update(desired, [this, generation, desired, done](base::Status s) {
      if (generation != generation_) return;
      if (!s.ok()) {
        NoteError(s);
        done(Outcome::kFailed);
        return;
      }
      Observe(desired, /*force=*/true);
      done(Outcome::kSucceeded);
    });
  });
}

void LeaderElector::NoteError(const base::Status& s) {
  if (s.ok()) {
    if (!last_error_.empty()) {
      spdlog::info("leader election: {} usable again", lock_->Describe());
      last_error_.clear();
    }
    return;
  }
  // Once per distinct error, not once per retry (every retry period, for as long as it lasts).
  if (s.message() == last_error_) return;
  last_error_ = s.message();
  spdlog::error(
      "leader election: cannot use {}: {}; no writes until it can be used (retrying "
      "every {} ms)",
      lock_->Describe(), last_error_, options_.timing.retry_period.count());
}

}  // namespace leaderelection
