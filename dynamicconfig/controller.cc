#include "dynamicconfig/controller.h"

#include <spdlog/spdlog.h>

#include <ctime>

#include "base/catch_all.h"
#include "base/strings.h"
#include "base/uv_timer.h"
#include "config/config_file.h"

namespace dynamicconfig {
namespace {

nlohmann::json Ref(const std::optional<Checkpoint>& c) {
  return c ? c->Reference() : nlohmann::json();
}

// The config a listed ConfigMap carries (`config` empty when the key is missing or not a string).
Checkpoint FromConfigMap(const nlohmann::json& object) {
  Checkpoint c;
  const nlohmann::json& meta = object.value("metadata", nlohmann::json::object());
  c.namespace_ = meta.value("namespace", "");
  c.name = meta.value("name", "");
  c.uid = meta.value("uid", "");
  c.resource_version = meta.value("resourceVersion", "");
  const nlohmann::json data = object.value("data", nlohmann::json::object());
  if (auto it = data.find(kConfigKey); it != data.end() && it->is_string()) {
    c.config = it->get<std::string>();
  }
  return c;
}

}  // namespace

Controller::Controller(uv_loop_t* loop, kubeclient::ApiClient* api, CheckpointStore* store,
                       Startup startup, ControllerOptions options, ControllerHooks hooks)
    : loop_(loop),
      api_(api),
      store_(store),
      startup_(std::move(startup)),
      options_(std::move(options)),
      hooks_(std::move(hooks)) {
  trial_timer_ = base::NewTimer(loop_, this);
  uv_unref(reinterpret_cast<uv_handle_t*>(trial_timer_));
  if (!startup_.errors.empty()) last_error_ = startup_.errors.back();
}

Controller::~Controller() {
  Stop();
  base::CloseTimer(trial_timer_);
}

int64_t Controller::Now() const {
  return options_.now_unix ? options_.now_unix() : static_cast<int64_t>(std::time(nullptr));
}

void Controller::Start() {
  for (const std::string& e : startup_.errors) spdlog::error("dynamic config: {}", e);
  if (startup_.rolled_back_now && startup_.rolled_back) {
    const RolledBackRecord& r = *startup_.rolled_back;
    counters_.rolled_back += 1;
    const std::string to = startup_.active
                               ? "the last known good config " + startup_.active->Describe()
                               : "the file and flags alone";
    const std::string message = "rolled back to " + to + ": " + r.reason;
    spdlog::error("dynamic config {}: {}", r.checkpoint.Describe(), message);
    SetError(r.checkpoint.Describe() + ": " + message);
    if (hooks_.warn) hooks_.warn(r.checkpoint, "DynamicConfigRolledBack", message);
  }
  if (startup_.active) {
    spdlog::info("dynamic config: running on {}{}", startup_.active->Describe(),
                 on_trial() ? " (on trial)" : " (last known good)");
  }
  ArmTrialTimer();
  if (api_ == nullptr) return;
  auto make = [&](const std::string& name) {
    kubeclient::ReflectorOptions o = options_.reflector;
    o.path = "/api/v1/namespaces/" + options_.namespace_ + "/configmaps";
    o.field_selector = "metadata.name=" + name;
    o.kind = "ConfigMap";
    o.api_version = "v1";
    o.description = "dynamic config configmap " + options_.namespace_ + "/" + name;
    kubeclient::ReflectorHandlers h;
    h.on_add = [this](const nlohmann::json&) { Reevaluate(); };
    h.on_update = [this](const nlohmann::json&, const nlohmann::json&) { Reevaluate(); };
    h.on_delete = [this](const nlohmann::json&) { Reevaluate(); };
    h.on_synced = [this] { Reevaluate(); };
    return std::make_unique<kubeclient::Reflector>(api_, std::move(o), std::move(h));
  };
  shared_ = make(options_.name);
  per_node_ = make(options_.name + "-" + options_.node_name);
  shared_->Start();
  per_node_->Start();
}

void Controller::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (shared_) shared_->Stop();
  if (per_node_) per_node_->Stop();
  uv_timer_stop(trial_timer_);
}

void Controller::Reevaluate() {
  if (stopped_ || !shared_->synced() || !per_node_->synced()) return;
  for (const kubeclient::Reflector* r : {per_node_.get(), shared_.get()}) {
    if (!r->store().items().empty()) {
      OnAssigned(FromConfigMap(r->store().items().begin()->second));
      return;
    }
  }
  OnAssigned(std::nullopt);
}

void Controller::OnAssigned(const std::optional<Checkpoint>& assigned) {
  if (stopped_ || restarting_) return;
  const std::optional<Checkpoint>& active = startup_.active;
  if (!assigned && !active && !startup_.assigned) return;  // file and flags, as before
  if (assigned) {
    if (active && active->SameRevision(*assigned)) return;
    if (startup_.assigned && startup_.assigned->checkpoint.SameRevision(*assigned)) return;
    if (startup_.rolled_back && startup_.rolled_back->checkpoint.SameRevision(*assigned)) return;
    if (rejected_ && rejected_->SameRevision(*assigned)) return;
  }
  const std::string what =
      assigned ? assigned->Describe() : std::string("no ConfigMap (the file and flags alone)");
  base::Result<config::ParsedFlags> parsed =
      base::Status::Error("key \"" + std::string(kConfigKey) + "\" is missing or empty");
  if (!assigned || !assigned->config.empty()) {
    parsed = hooks_.parse(assigned ? std::optional<std::string>(assigned->config) : std::nullopt);
  }
  if (!parsed.ok()) {
    if (assigned) {
      Reject(*assigned, parsed.status().message());
    } else {
      SetError("the file and flags alone: " + parsed.status().message());
    }
    return;
  }
  // Checkpointed before it is used, so a restart finds it.
  std::optional<AssignedRecord> record;
  base::Status saved = base::Status::OK();
  if (assigned) {
    record = AssignedRecord{*assigned, 0, 0, 0};
    saved = store_->SaveAssigned(*record);
  } else {
    saved = store_->ClearAssigned();
  }
  if (!saved.ok()) {
    spdlog::error("dynamic config {}: checkpoint: {}; not applied", what, saved.message());
    SetError(what + ": checkpoint: " + saved.message());
    return;
  }
  startup_.assigned = record;
  std::vector<std::string> changed =
      config::ChangedFields(startup_.parsed.config.value(), parsed->config.value());
  std::vector<std::string> restart;
  for (const std::string& f : changed) {
    if (!config::LiveField(f)) restart.push_back(f);
  }
  if (!restart.empty()) {
    counters_.applied_by_restart += 1;
    restarting_ = true;
    const std::string why = "dynamic config " + what + " changes " + base::Join(restart, ", ") +
                            ", which need a restart";
    spdlog::info("{}: checkpointed; restarting onto it", why);
    Changed();
    if (hooks_.restart) hooks_.restart(why);
    return;
  }
  counters_.applied_live += 1;
  spdlog::info("dynamic config {}: applied live ({})", what,
               changed.empty() ? std::string("no field changes") : base::Join(changed, ", "));
  if (record) {
    record->trial_started_unix = Now();
    record->starts = 1;
    if (base::Status s = store_->SaveAssigned(*record); !s.ok()) {
      SetError(what + ": checkpoint: " + s.message());
    }
    startup_.assigned = record;
  }
  startup_.active = assigned;
  startup_.parsed = std::move(parsed).value();
  if (hooks_.apply_live) hooks_.apply_live(startup_.parsed);
  ArmTrialTimer();
  Changed();
}

void Controller::Reject(const Checkpoint& config, const std::string& why) {
  counters_.rejected += 1;
  rejected_ = config;
  spdlog::error("dynamic config {}: rejected: {}", config.Describe(), why);
  SetError(config.Describe() + ": rejected: " + why);
  if (hooks_.warn) hooks_.warn(config, "DynamicConfigRejected", "rejected: " + why);
  Changed();
}

void Controller::SetError(std::string error) {
  last_error_ = std::move(error);
  Changed();
}

void Controller::Changed() {
  if (hooks_.status_changed) hooks_.status_changed();
}

void Controller::ArmTrialTimer() {
  uv_timer_stop(trial_timer_);
  if (!on_trial()) return;
  const int64_t ends = startup_.assigned->trial_started_unix +
                       std::chrono::duration_cast<std::chrono::seconds>(options_.trial).count();
  const int64_t left_ms = std::max<int64_t>(0, (ends - Now()) * 1000);
  uv_timer_start(
      trial_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<Controller*>(t->data);
        base::Status s = base::CatchAll("dynamic config trial", [self] { self->EndTrial(); });
        if (!s.ok()) spdlog::error("{}", s.message());
      },
      static_cast<uint64_t>(left_ms), 0);
}

void Controller::EndTrial() {
  if (stopped_ || !on_trial()) return;
  const Checkpoint& active = *startup_.active;
  if (base::Status s = store_->SaveLastKnownGood(active); !s.ok()) {
    spdlog::error("dynamic config {}: trial over, but saving it as last known good: {}",
                  active.Describe(), s.message());
    SetError(active.Describe() + ": saving it as last known good: " + s.message());
    return;
  }
  startup_.last_known_good = active;
  spdlog::info("dynamic config {}: trial over; it is the last known good config now",
               active.Describe());
  Changed();
}

void Controller::RecordCleanExit() {
  if (!on_trial()) return;
  AssignedRecord record = *startup_.assigned;
  record.clean_exits += 1;
  if (base::Status s = store_->SaveAssigned(record); !s.ok()) {
    spdlog::error("dynamic config: recording a graceful stop: {}", s.message());
    return;
  }
  startup_.assigned = record;
}

nlohmann::json Controller::Status() const {
  nlohmann::json j = {
      {"configMap", options_.namespace_ + "/" + options_.name},
      {"nodeConfigMap", options_.namespace_ + "/" + options_.name + "-" + options_.node_name},
      {"assigned",
       startup_.assigned ? startup_.assigned->checkpoint.Reference() : nlohmann::json()},
      {"active", Ref(startup_.active)},
      {"lastKnownGood", Ref(startup_.last_known_good)},
      {"onTrial", on_trial()},
      {"lastError", last_error_ ? nlohmann::json(*last_error_) : nlohmann::json()},
  };
  if (on_trial()) {
    j["trialEnds"] = startup_.assigned->trial_started_unix +
                     std::chrono::duration_cast<std::chrono::seconds>(options_.trial).count();
  }
  if (startup_.rolled_back) {
    j["rolledBack"] = startup_.rolled_back->checkpoint.Reference();
    j["rolledBack"]["reason"] = startup_.rolled_back->reason;
  } else {
    j["rolledBack"] = nullptr;
  }
  return j;
}

void Controller::AddMetrics(std::vector<server::MetricFamily>* families) const {
  using server::MetricType;
  auto count = [](uint64_t n) { return static_cast<double>(n); };
  families->push_back({"volumemanager_dynamic_config_rejections_total",
                       "Dynamic configs rejected as invalid (each revision once)",
                       MetricType::kCounter,
                       {{{}, count(counters_.rejected)}},
                       {}});
  families->push_back({"volumemanager_dynamic_config_rollbacks_total",
                       "Dynamic configs rolled back to the last known good one at this start",
                       MetricType::kCounter,
                       {{{}, count(counters_.rolled_back)}},
                       {}});
  families->push_back({"volumemanager_dynamic_config_applies_total",
                       "Dynamic configs applied, by how: live, or restart (the process exits to "
                       "be restarted onto it)",
                       MetricType::kCounter,
                       {{{{"mode", "live"}}, count(counters_.applied_live)},
                        {{{"mode", "restart"}}, count(counters_.applied_by_restart)}},
                       {}});
  families->push_back({"volumemanager_dynamic_config_on_trial",
                       "1 while the running dynamic config is on trial",
                       MetricType::kGauge,
                       {{{}, on_trial() ? 1.0 : 0.0}},
                       {}});
}

}  // namespace dynamicconfig
