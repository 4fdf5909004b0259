#include "kubeclient/server_reachability.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <vector>

#include "base/catch_all.h"
#include "base/uv_timer.h"
#include "logging/structured_log.h"

namespace kubeclient {

ServerReachability::ServerReachability(uv_loop_t* loop, ReachabilityOptions options, Probe probe)
    : options_(std::move(options)), probe_(std::move(probe)), alive_(std::make_shared<bool>(true)) {
  probe_timer_ = base::NewTimer(loop, this);
  wake_timer_ = base::NewTimer(loop, this);
}

ServerReachability::~ServerReachability() {
  *alive_ = false;
  base::CloseTimer(probe_timer_);
  base::CloseTimer(wake_timer_);
}

ServerReachability::Clock::time_point ServerReachability::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

void ServerReachability::OnAnswer() {
  if (state_ == State::kAnswering) return;
  const bool was_down = state_ == State::kNotAnswering;
  state_ = State::kAnswering;
  uv_timer_stop(probe_timer_);
  probe_armed_ = false;
  if (!was_down) return;  // only the request that failed had a problem
  ++stats_.reconnects;
  const Clock::time_point now = Now();
  reconnected_at_ = now;
  logging::Info(
      "API server answers again",
      {{"silentMs",
        down_since_
            ? std::chrono::duration_cast<std::chrono::milliseconds>(now - *down_since_).count()
            : 0LL},
       {"waiting", waiters_.size()}});
  // Those waiting now are woken from the loop, outside the callback that brought the answer.
  wake_below_ = next_ticket_;
  uv_timer_start(
      wake_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<ServerReachability*>(t->data);
        base::Status s = base::CatchAll("reconnect wake", [self] { self->WakeAll(); });
        if (!s.ok()) spdlog::error("{}", s.message());
      },
      0, 0);
}

void ServerReachability::OnNoAnswer() {
  if (state_ != State::kAnswering) return;
  state_ = State::kInDoubt;
  down_since_ = Now();
  MaybeScheduleProbe();
}

ServerReachability::Ticket ServerReachability::WaitForAnswer(std::function<void()> wake) {
  const Ticket ticket = next_ticket_++;
  waiters_.emplace(ticket, std::move(wake));
  MaybeScheduleProbe();
  return ticket;
}

void ServerReachability::CancelWait(Ticket ticket) {
  waiters_.erase(ticket);
  if (waiters_.empty() && probe_armed_) {
    uv_timer_stop(probe_timer_);
    probe_armed_ = false;
  }
}

bool ServerReachability::InReconnectGrace() const {
  return reconnected_at_ && Now() - *reconnected_at_ < options_.reconnect_grace;
}

void ServerReachability::MaybeScheduleProbe() {
  if (state_ == State::kAnswering || waiters_.empty() || probe_in_flight_ || probe_armed_) return;
  // The first probe after an answered one goes at once; then about one per interval.
  long long delay_ms = 0;
  if (last_probe_) {
    double r;
    if (options_.random01) {
      r = options_.random01();
    } else {
      thread_local std::mt19937_64 engine{std::random_device{}()};
      r = std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    }
    const double factor = 1.0 + options_.probe_jitter * (r - 0.5);
    const auto gap = std::chrono::milliseconds(
        static_cast<long long>(static_cast<double>(options_.probe_interval.count()) * factor));
    delay_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(*last_probe_ + gap - Now()).count();
  }
  probe_armed_ = true;
  uv_timer_start(
      probe_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<ServerReachability*>(t->data);
        self->probe_armed_ = false;
        base::Status s = base::CatchAll("reachability probe", [self] { self->SendProbe(); });
        if (!s.ok()) {
          spdlog::error("{}", s.message());
          self->probe_in_flight_ = false;
        }
      },
      static_cast<uint64_t>(std::max<long long>(0, delay_ms)), 0);
}

void ServerReachability::SendProbe() {
  if (state_ == State::kAnswering || waiters_.empty()) return;
  probe_in_flight_ = true;
  last_probe_ = Now();
  ++stats_.probes;
  probe_([this, alive = alive_](bool answered) {
    if (!*alive) return;
    OnProbeDone(answered);
  });
}

void ServerReachability::OnProbeDone(bool answered) {
  probe_in_flight_ = false;
  if (answered) {
    ++stats_.probes_answered;
    OnAnswer();
    return;
  }
  ++stats_.probes_unanswered;
  if (state_ == State::kInDoubt) {
    state_ = State::kNotAnswering;
    logging::Log(static_cast<spdlog::level::level_enum>(outage_log_level_),
                 "API server not answering; probing it until it does",
                 {{"probe", options_.probe_path}, {"waiting", waiters_.size()}});
  }
  MaybeScheduleProbe();
}

void ServerReachability::WakeAll() {
  std::vector<std::function<void()>> wake;
  for (auto it = waiters_.begin(); it != waiters_.end() && it->first < wake_below_;) {
    wake.push_back(std::move(it->second));
    it = waiters_.erase(it);
  }
  stats_.woken += wake.size();
  const std::shared_ptr<bool> alive = alive_;
  for (std::function<void()>& w : wake) {
    if (!*alive) return;
    base::Status s = base::CatchAll("reconnect waiter", w);
    if (!s.ok()) spdlog::error("{}", s.message());
  }
}

}  // namespace kubeclient
