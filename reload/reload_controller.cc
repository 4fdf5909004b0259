#include "reload/reload_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/catch_all.h"
#include "base/rfc3339.h"
#include "base/strings.h"
#include "base/uv_timer.h"
#include "logging/structured_log.h"
#include "reload/pod_address.h"

namespace reload {
namespace {

template <typename F>
void Guard(const char* what, F&& body) {
  if (base::Status s = base::CatchAll(what, std::forward<F>(body)); !s.ok()) {
    spdlog::error("{}", s.message());
  }
}

// RFC 3339 as the API server writes times, its zone offset applied, to the second (the fraction
// dropped); nullopt otherwise.
std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& text) {
  const auto t = base::ParseRfc3339(text);
  if (!t) return std::nullopt;
  return std::chrono::floor<std::chrono::seconds>(*t);
}

// What the checks of a pod's reload annotations read: the three annotations, and whether the pod
// uses the node's network. The annotations are checked again only when this changes.
std::string ReloadInputsOf(const kube::Pod& pod) {
  std::string out;
  for (const char* name : {kReloadAnnotation, kReloadVolumesAnnotation, kReloadDelayAnnotation}) {
    auto it = pod.metadata.annotations.find(name);
    out += it == pod.metadata.annotations.end() ? std::string("\x01") : it->second;
    out += '\0';
  }
  out += pod.spec.host_network ? "hostNetwork" : "";
  return out;
}

bool Retryable(const HttpCallResult& r) {
  if (!r.transport.ok()) return true;
  return r.status >= 500 || r.status == 408 || r.status == 429;
}

}  // namespace

struct ReloadController::Run {
  uint64_t id = 0;
  std::vector<Action> actions;
  size_t index = 0;
  int attempt = 0;
  std::string ip;  // the HTTP target, fixed by the run's first attempt
  std::vector<std::string> volumes;
  SteadyTime first_change{};
  WallTime swap_wall{};
  RunReport report;
  bool any_ok = false;
  HttpCaller::Id http_id = 0;
  bool http_active = false;
  bool signal_active = false;
  std::optional<SteadyTime> retry_at;
};

struct ReloadController::PodState {
  std::string uid;
  std::shared_ptr<const kube::Pod> pod;
  std::string annotations;  // ReloadInputsOf the pod as last checked
  std::optional<ReloadSpec> spec;
  std::string error;
  std::string policy_refusal;     // why the actions are never run, by policy
  std::set<std::string> pending;  // changed triggering volumes not reloaded yet
  SteadyTime first_change{};
  WallTime last_swap_wall{};
  SteadyTime quiet_until{};
  std::optional<SteadyTime> last_started;
  std::unique_ptr<Run> run;
  std::optional<RunReport> last;
};

const std::vector<double>& ReloadController::LatencyBuckets() {
  static const std::vector<double> buckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                              2.5,  5,     10,   30,  60,   300};
  return buckets;
}

ReloadController::ReloadController(uv_loop_t* loop, ReloadControllerOptions options,
                                   const ReloadHost* host)
    : loop_(loop), options_(std::move(options)), host_(host), http_(loop, options_.http) {
  if (options_.max_attempts < 1) options_.max_attempts = 1;
  if (!options_.node_addresses) options_.node_addresses = &NodeAddresses;
  timer_ = base::NewTimer(loop_, this);
  if (options_.send_signals) {
    signals_ = std::make_unique<SignalBatcher>(loop_, options_.send_signals);
  }
}

ReloadController::~ReloadController() = default;

size_t ReloadController::annotation_errors() const {
  size_t n = 0;
  for (const auto& [uid, p] : pods_) n += p->error.empty() ? 0 : 1;
  return n;
}

size_t ReloadController::policy_refusals() const {
  size_t n = 0;
  for (const auto& [uid, p] : pods_) n += p->policy_refusal.empty() ? 0 : 1;
  return n;
}

void ReloadController::OnPod(std::shared_ptr<const kube::Pod> pod) {
  if (closing_ || pod == nullptr) return;
  const std::string& uid = pod->metadata.uid;
  const std::string annotations = ReloadInputsOf(*pod);
  auto it = pods_.find(uid);
  const bool any = pod->metadata.annotations.count(kReloadAnnotation) != 0 ||
                   pod->metadata.annotations.count(kReloadVolumesAnnotation) != 0 ||
                   pod->metadata.annotations.count(kReloadDelayAnnotation) != 0;
  if (!any) {
    if (it != pods_.end()) OnPodRemoved(uid);  // the annotation was taken off: nothing to do
    return;
  }
  if (it == pods_.end()) {
    auto state = std::make_unique<PodState>();
    state->uid = uid;
    it = pods_.emplace(uid, std::move(state)).first;
  }
  PodState& p = *it->second;
  p.pod = std::move(pod);
  if (p.annotations == annotations && !p.annotations.empty()) return;
  p.annotations = annotations;
  p.spec.reset();
  p.error.clear();
  p.policy_refusal.clear();
  std::string refusal;
  auto parsed = ParseReloadAnnotations(p.pod->metadata.annotations);
  std::string error;
  if (!parsed.ok()) {
    error = parsed.status().message();
  } else if (parsed->has_value()) {
    const ReloadSpec& spec = **parsed;
    const std::vector<std::string> refreshed = host_->RefreshedVolumes(uid);
    if (spec.volumes) {
      for (const std::string& name : *spec.volumes) {
        if (std::find(refreshed.begin(), refreshed.end(), name) != refreshed.end()) continue;
        error = std::string("annotation ") + kReloadVolumesAnnotation + ": volume \"" + name +
                "\" is not a configMap, secret, projected or downwardAPI volume that this daemon "
                "refreshes";
        break;
      }
    }
    for (const Action& a : spec.actions) {
      if (!error.empty() || a.kind != Action::Kind::kSignal) continue;
      if (!options_.cluster_mode) {
        error = std::string("annotation ") + kReloadAnnotation + ": \"" + a.Text() +
                "\": signal actions need cluster mode (a standalone pod's containers cannot be "
                "found)";
      } else if (!a.signal.container.empty()) {
        const auto& cs = p.pod->spec.containers;
        if (std::none_of(cs.begin(), cs.end(),
                         [&](const kube::Container& c) { return c.name == a.signal.container; })) {
          error = std::string("annotation ") + kReloadAnnotation + ": \"" + a.Text() +
                  "\": the pod has no container \"" + a.signal.container + "\"";
        }
      }
    }
    // A hostNetwork pod's own IP is the node's (cluster mode): its HTTP actions can never be
    // made, whatever its status says. The daemon's rule (it never calls the node's own
    // addresses), so policy, not the pod's mistake: said once, when the pod appears, as such;
    // Attempt checks the address again.
    for (const Action& a : spec.actions) {
      if (!error.empty() || !refusal.empty() || a.kind != Action::Kind::kHttp) continue;
      if (options_.cluster_mode && p.pod->spec.host_network) {
        refusal = std::string("annotation ") + kReloadAnnotation + ": \"" + a.Text() +
                  "\": " + kHostNetworkRefusal;
      }
    }
    if (error.empty() && refusal.empty()) p.spec = spec;
  }
  if (!error.empty()) {
    p.error = error;
    p.pending.clear();
    logging::Warn("Reload annotation refused; the pod's volumes are still kept current",
                  {{"pod", logging::KObj(p.pod->metadata)}, {"podUID", uid}, {"err", error}});
    if (options_.on_annotation_error) options_.on_annotation_error(*p.pod, error);
  } else if (!refusal.empty()) {
    p.policy_refusal = refusal;
    p.pending.clear();
    logging::Info(
        "Reload actions not run: the daemon never calls the node's own addresses; the "
        "pod's volumes are still kept current",
        {{"pod", logging::KObj(p.pod->metadata)}, {"podUID", uid}, {"reason", refusal}});
    if (options_.on_policy_refusal) options_.on_policy_refusal(*p.pod, refusal);
  } else if (p.spec) {
    std::vector<std::string> texts;
    for (const Action& a : p.spec->actions) texts.push_back(a.Text());
    logging::Info("Reload actions set", {{"pod", logging::KObj(p.pod->metadata)},
                                         {"podUID", uid},
                                         {"actions", base::Join(texts, ", ")}});
  }
}

void ReloadController::OnPodRemoved(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  PodState& p = *it->second;
  if (p.run && p.run->http_active) http_.Cancel(p.run->http_id);
  // A signal in flight finishes on the pool; its completion finds no run and drops its result.
  wake_.erase(uid);
  pods_.erase(it);
}

std::vector<std::string> ReloadController::TriggeringVolumes(const PodState& p) const {
  if (p.spec && p.spec->volumes) return *p.spec->volumes;
  return host_->RefreshedVolumes(p.uid);
}

void ReloadController::OnContentSwapped(const VolumeSwap& swap) {
  if (closing_) return;
  auto it = pods_.find(swap.pod_uid);
  if (it == pods_.end() || !it->second->spec) return;
  PodState& p = *it->second;
  const std::vector<std::string> triggering = TriggeringVolumes(p);
  if (std::find(triggering.begin(), triggering.end(), swap.volume) == triggering.end()) return;
  const SteadyTime now = Now();
  if (p.pending.empty() || swap.changed_at < p.first_change) p.first_change = swap.changed_at;
  p.pending.insert(swap.volume);
  p.last_swap_wall = std::chrono::system_clock::now();
  p.quiet_until = now + p.spec->delay;
  spdlog::debug("reload of pod UID \"{}\" due after the {} swap of volume \"{}\" (version {})",
                swap.pod_uid, swap.foreign ? "observed" : "daemon's", swap.volume, swap.version);
  Wake(swap.pod_uid, p.quiet_until);
}

void ReloadController::OnVolumeActivity(const std::string& pod_uid) {
  auto it = pods_.find(pod_uid);
  if (it == pods_.end() || it->second->pending.empty()) return;
  Evaluate(pod_uid);
}

std::string ReloadController::PodUnreachable(const PodState& p) const {
  const kube::Pod& pod = *p.pod;
  if (pod.metadata.deletion_timestamp) return "the pod is terminating";
  if (options_.cluster_mode && pod.status.phase != "Running") {
    return "the pod is not running (phase \"" + pod.status.phase +
           "\"): its application reads its files when it starts";
  }
  // Standalone: a static pod's phase is the daemon's own default (Pending); a pod in the
  // manifest dir runs as far as the daemon can know.
  return "";
}

void ReloadController::Evaluate(const std::string& uid) {
  if (closing_) return;
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  PodState& p = *it->second;
  if (!p.spec || p.pending.empty() || p.run) return;
  const SteadyTime now = Now();
  if (now < p.quiet_until) return Wake(uid, p.quiet_until);
  if (p.last_started && now < *p.last_started + options_.min_interval) {
    return Wake(uid, *p.last_started + options_.min_interval);
  }
  std::vector<std::string> failing;
  for (const std::string& volume : TriggeringVolumes(p)) {
    switch (host_->Progress(uid, volume)) {
      case VolumeProgress::kWriting:
        // Its newer content is on its way: whatever ends that brings the pod back
        // (OnVolumeActivity), whether an operation ends or not.
        return;
      case VolumeProgress::kFailing:
        // Not waited for: it may fail for as long as its object is refused or missing, and the
        // other volumes' news would wait with it. Its last good content stays; the run names it.
        failing.push_back(volume);
        break;
      case VolumeProgress::kSettled:
        break;
    }
  }
  std::string skip = PodUnreachable(p);
  if (skip.empty() && !p.pod->status.container_statuses.empty()) {
    bool all_after = true;
    for (const kube::ContainerStatus& c : p.pod->status.container_statuses) {
      const auto started = ParseTime(c.running_started_at);
      // Second precision, truncated: a start strictly after the swap's second is after it.
      if (!started || *started <= std::chrono::floor<std::chrono::seconds>(p.last_swap_wall)) {
        all_after = false;
      }
    }
    if (all_after) skip = "every container started after the change: it read the new content";
  }
  if (!skip.empty()) {
    for (const Action& a : p.spec->actions) Count(a.KindName(), "skipped");
    logging::Info("Reload not needed",
                  {{"pod", logging::KObj(p.pod->metadata)}, {"podUID", uid}, {"reason", skip}});
    p.pending.clear();
    return;
  }
  StartRun(p, std::move(failing));
}

void ReloadController::StartRun(PodState& p, std::vector<std::string> failing) {
  if (options_.observe) {
    // Said, counted, never done: the pending volumes are served by this report.
    std::string actions, volumes;
    for (const Action& a : p.spec->actions) {
      Count(a.KindName(), "observed");
      actions += (actions.empty() ? "" : ", ") + std::string(a.KindName());
    }
    for (const std::string& v : p.pending) volumes += (volumes.empty() ? "" : ",") + v;
    logging::Info("Observe: would run the reload actions",
                  {{"pod", logging::KObj(p.pod->metadata)},
                   {"podUID", p.uid},
                   {"actions", actions},
                   {"volumes", volumes},
                   {"failingVolumes", logging::Value::IfSet(base::Join(failing, ","))}});
    p.pending.clear();
    p.last_started = Now();
    return;
  }
  auto run = std::make_unique<Run>();
  run->id = ++next_run_id_;
  run->actions = p.spec->actions;
  run->volumes.assign(p.pending.begin(), p.pending.end());
  run->first_change = p.first_change;
  run->swap_wall = p.last_swap_wall;
  run->report.volumes = run->volumes;
  run->report.objects = host_->ObjectVersions(p.uid, run->volumes);
  run->report.failing_volumes = std::move(failing);
  run->report.ok = true;
  p.pending.clear();
  p.last_started = Now();
  p.run = std::move(run);
  NextAction(p.uid);
}

void ReloadController::NextAction(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second->run) return;
  PodState& p = *it->second;
  if (p.run->index >= p.run->actions.size()) return FinishRun(p);
  p.run->attempt = 0;
  Attempt(uid);
}

void ReloadController::Attempt(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second->run || closing_) return;
  PodState& p = *it->second;
  Run& run = *p.run;
  run.retry_at.reset();
  ++run.attempt;
  const Action action = run.actions[run.index];
  const uint64_t run_id = run.id;
  if (std::string why = PodUnreachable(p); !why.empty()) {
    return AttemptDone(uid, run_id, base::StatusCode::kNotSent, false, "not sent: " + why);
  }
  if (action.kind == Action::Kind::kHttp) {
    if (options_.cluster_mode && Now() - node_addresses_at_ > std::chrono::seconds(10)) {
      node_addresses_ = options_.node_addresses();
      node_addresses_at_ = Now();
    }
    auto ip = PodActionAddress(*p.pod, options_.cluster_mode, node_addresses_);
    if (!ip.ok())
      return AttemptDone(uid, run_id, base::StatusCode::kRefused, false,
                         "refused: " + ip.status().message());
    if (run.ip.empty()) {
      run.ip = *ip;
    } else if (run.ip != *ip) {
      return AttemptDone(uid, run_id, base::StatusCode::kNotSent, false,
                         "not sent: the pod's IP changed from " + run.ip + " to " + *ip);
    }
    HttpCallRequest request;
    request.ip = run.ip;
    request.port = action.http.port;
    request.method = action.http.method;
    request.path = action.http.path;
    request.pod = uid;  // the caller shares its slots fairly by pod
    run.http_active = true;
    run.http_id = http_.Call(std::move(request), [this, uid, run_id](const HttpCallResult& r) {
      auto pit = pods_.find(uid);
      if (pit != pods_.end() && pit->second->run && pit->second->run->id == run_id) {
        pit->second->run->http_active = false;
      }
      AttemptDone(uid, run_id, r.ok() ? base::StatusCode::kOk : base::StatusCode::kUnknown,
                  !r.ok() && Retryable(r), r.Describe());
    });
    return;
  }
  // A signal.
  if (signals_ == nullptr) {
    return AttemptDone(uid, run_id, base::StatusCode::kRefused, false,
                       "refused: signal actions are not enabled on this node");
  }
  std::vector<ContainerSignal> requests;
  std::vector<std::string> notes;
  for (const kube::Container& c : p.pod->spec.containers) {
    bool wanted = false;
    if (!action.signal.container.empty()) {
      wanted = c.name == action.signal.container;
    } else {
      for (const kube::VolumeMount& m : c.volume_mounts) {
        if (std::find(run.volumes.begin(), run.volumes.end(), m.name) != run.volumes.end()) {
          wanted = true;
        }
      }
    }
    if (!wanted) continue;
    const kube::ContainerStatus* status = nullptr;
    for (const kube::ContainerStatus& s : p.pod->status.container_statuses) {
      if (s.name == c.name) status = &s;
    }
    if (status == nullptr || status->container_id.empty() || status->running_started_at.empty()) {
      notes.push_back("container " + c.name + " is not running");
      continue;
    }
    const auto started = ParseTime(status->running_started_at);
    if (started && *started > std::chrono::floor<std::chrono::seconds>(run.swap_wall)) {
      notes.push_back("container " + c.name + " started after the change");
      continue;
    }
    ContainerSignal r;
    r.pod_uid = uid;
    r.container_name = c.name;
    r.container_id = status->container_id;
    r.signal = action.signal.signal;
    r.share_process_namespace = p.pod->spec.share_process_namespace;
    requests.push_back(std::move(r));
  }
  if (requests.empty()) {
    return AttemptDone(uid, run_id, base::StatusCode::kNotSent, false,
                       "not sent: no running container to signal" +
                           (notes.empty() ? std::string() : " (" + base::Join(notes, "; ") + ")"));
  }
  run.signal_active = true;
  std::vector<std::string> containers;
  for (const ContainerSignal& r : requests) containers.push_back(r.container_name);
  signals_->Submit(
      std::move(requests),
      [this, uid, run_id, containers = std::move(containers), notes = std::move(notes),
       signal_name = action.signal.signal_name](SignalBatcher::Results sent) mutable {
        Guard("a reload signal's completion", [&] {
          auto pit = pods_.find(uid);
          if (pit == pods_.end() || !pit->second->run || pit->second->run->id != run_id) return;
          Run& r = *pit->second->run;
          r.signal_active = false;
          bool ok = true;
          std::vector<std::string> results = std::move(notes);
          for (size_t i = 0; i < containers.size() && i < sent.size(); ++i) {
            if (sent[i].ok()) {
              results.push_back(signal_name + " to " + *sent[i]);
            } else {
              ok = false;
              results.push_back("container " + containers[i] + ": " + sent[i].status().message());
            }
          }
          AttemptDone(uid, run_id, ok ? base::StatusCode::kOk : base::StatusCode::kUnknown, false,
                      base::Join(results, "; "));
        });
      });
}

void ReloadController::AttemptDone(const std::string& uid, uint64_t run_id,
                                   base::StatusCode outcome, bool retryable,
                                   const std::string& result) {
  const bool ok = outcome == base::StatusCode::kOk;
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second->run || it->second->run->id != run_id) return;
  PodState& p = *it->second;
  Run& run = *p.run;
  const Action& action = run.actions[run.index];
  if (!ok && retryable && run.attempt < options_.max_attempts && !closing_) {
    const auto delay = options_.retry_initial * (1 << std::min(run.attempt - 1, 16));
    logging::Info("Reload action failed; retrying",
                  {{"pod", logging::KObj(p.pod->metadata)},
                   {"podUID", uid},
                   {"action", action.Text()},
                   {"result", result},
                   {"attempt", run.attempt},
                   {"retryInMs", static_cast<long>(delay.count())}});
    run.retry_at = Now() + delay;
    return Wake(uid, *run.retry_at);
  }
  const bool refused =
      outcome == base::StatusCode::kRefused || outcome == base::StatusCode::kNotSent;
  Count(action.KindName(), ok ? "success" : refused ? "refused" : "failure");
  std::string line = action.Text() + ": " + result;
  if (run.attempt > 1) line += " (attempt " + std::to_string(run.attempt) + ")";
  run.report.results.push_back(line);
  if (ok) {
    run.any_ok = true;
  } else {
    run.report.ok = false;
  }
  const std::string volumes = base::Join(run.volumes, ",");
  const std::string objects = base::Join(run.report.objects, ",");
  const std::string failing = base::Join(run.report.failing_volumes, ",");
  const std::string text = action.Text();
  logging::Log(ok ? spdlog::level::info : spdlog::level::warn, ok ? "Reloaded" : "ReloadFailed",
               {{"pod", logging::KObj(p.pod->metadata)},
                {"podUID", uid},
                {"action", text},
                {"result", result},
                {"attempts", run.attempt},
                {"volumes", volumes},
                {"objects", objects},
                {"failingVolumes", logging::Value::IfSet(failing)}});
  ++run.index;
  NextAction(uid);
}

void ReloadController::FinishRun(PodState& p) {
  std::unique_ptr<Run> run = std::move(p.run);
  run->report.at = std::chrono::system_clock::now();
  if (run->any_ok && run->first_change != SteadyTime{}) {
    latency_.Observe(std::chrono::duration<double>(Now() - run->first_change).count());
  }
  p.last = run->report;
  if (options_.on_result) {
    std::string message = base::Join(run->report.results, "; ");
    if (!run->report.objects.empty()) message += " (" + base::Join(run->report.objects, ", ") + ")";
    if (!run->report.failing_volumes.empty()) {
      // Said, so that an application told of one volume's change knows another's did not come.
      message +=
          "; failing volumes not waited for: " + base::Join(run->report.failing_volumes, ", ");
    }
    options_.on_result(*p.pod, run->report.ok, message);
  }
  if (!p.pending.empty()) Wake(p.uid, Now());  // changes that came during the run
}

void ReloadController::Wake(const std::string& uid, SteadyTime at) {
  if (closing_) return;
  auto [it, inserted] = wake_.emplace(uid, at);
  if (!inserted) {
    // The earliest of a retry and a window end is looked at first; the later one is found then.
    it->second = std::min(it->second, at);
  }
  ArmTimer();
}

void ReloadController::ArmTimer() {
  if (timer_ == nullptr || closing_) return;
  if (wake_.empty()) {
    uv_timer_stop(timer_);
    return;
  }
  SteadyTime next = SteadyTime::max();
  for (const auto& [uid, at] : wake_) next = std::min(next, at);
  const auto delay = std::max<std::chrono::milliseconds::rep>(
      0, std::chrono::ceil<std::chrono::milliseconds>(next - Now()).count());
  uv_timer_start(
      timer_, [](uv_timer_t* t) { static_cast<ReloadController*>(t->data)->OnTimer(); },
      static_cast<uint64_t>(delay), 0);
}

void ReloadController::OnTimer() {
  Guard("reload timer", [this] {
    const SteadyTime now = Now();
    std::vector<std::string> due;
    for (auto it = wake_.begin(); it != wake_.end();) {
      if (it->second <= now) {
        due.push_back(it->first);
        it = wake_.erase(it);
      } else {
        ++it;
      }
    }
    for (const std::string& uid : due) {
      auto it = pods_.find(uid);
      if (it == pods_.end()) continue;
      PodState& p = *it->second;
      if (p.run) {
        if (p.run->retry_at) {
          if (*p.run->retry_at <= now) {
            Attempt(uid);
          } else {
            Wake(uid, *p.run->retry_at);
          }
        }
        continue;  // a window that ended during a run is looked at when the run ends
      }
      Evaluate(uid);
    }
    ArmTimer();
  });
}

std::map<std::string, ReloadController::PodView> ReloadController::View() const {
  std::map<std::string, PodView> out;
  for (const auto& [uid, p] : pods_) {
    PodView v;
    v.pod = p->pod->metadata.NamespacedName();
    if (p->spec) {
      for (const Action& a : p->spec->actions) v.actions.push_back(a.Text());
    }
    v.annotation_error = p->error;
    v.policy_refusal = p->policy_refusal;
    v.pending_volumes.assign(p->pending.begin(), p->pending.end());
    if (p->spec && !p->pending.empty()) {
      for (const std::string& volume : TriggeringVolumes(*p)) {
        if (host_->Progress(uid, volume) == VolumeProgress::kWriting) {
          v.waiting_for.push_back(volume);
        }
      }
    }
    v.running = p->run != nullptr;
    v.last = p->last;
    out.emplace(uid, std::move(v));
  }
  return out;
}

void ReloadController::Close(std::function<void()> done) {
  closing_ = true;
  close_done_ = std::move(done);
  wake_.clear();
  if (timer_ != nullptr) {
    base::CloseTimer(timer_);
    timer_ = nullptr;
  }
  if (signals_ != nullptr) {
    signals_->Close([this] {
      signals_closed_ = true;
      MaybeClosed();
    });
  } else {
    signals_closed_ = true;
  }
  http_.Close([this] {
    http_closed_ = true;
    MaybeClosed();
  });
}

void ReloadController::MaybeClosed() {
  if (!closing_ || !http_closed_ || !signals_closed_ || !close_done_) return;
  auto done = std::move(close_done_);
  close_done_ = nullptr;
  done();
}

}  // namespace reload
