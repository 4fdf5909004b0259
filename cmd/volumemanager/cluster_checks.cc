#include "cmd/volumemanager/cluster_checks.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/catch_all.h"

namespace volumemanager {

NodeLookup ClassifyNodeLookup(const kubeclient::ApiResult& result) {
  if (result.ok()) return NodeLookup::kExists;
  if (result.error->IsNotFound()) return NodeLookup::kMissing;
  if (result.error->IsForbidden()) return NodeLookup::kNoRight;
  return NodeLookup::kError;
}

std::string NodePath(const std::string& node) {
  return "/api/v1/nodes/" + kubeclient::QueryEscape(node);
}

std::string NodeMissing(const std::string& node) { return "node \"" + node + "\" does not exist"; }

std::string NodeMissingAdvice() {
  return "no pod is ever bound to it, so the daemon serves nothing; --node-name (else "
         "$NODE_NAME, else the host name) must be the name the kubelet registered "
         "(kubectl get nodes)";
}

namespace {

nlohmann::json AccessReview(const std::string& verb, const std::string& group,
                            const std::string& resource) {
  return {{"apiVersion", "authorization.k8s.io/v1"},
          {"kind", "SelfSubjectAccessReview"},
          {"spec",
           {{"resourceAttributes", {{"verb", verb}, {"group", group}, {"resource", resource}}}}}};
}

}  // namespace

std::vector<ExcessRightProbe> ExcessRightProbes(bool node_mode, bool lists_every_secret) {
  std::vector<ExcessRightProbe> probes;
  probes.push_back({"do anything to any resource (* on *)", AccessReview("*", "*", "*")});
  // A service account needs it with the chart's rbac.secrets and no rbac.namespaces; with
  // --no-secrets or --object-namespaces (what the chart passes otherwise) it does not.
  if (node_mode || !lists_every_secret) {
    probes.push_back({"list secrets in all namespaces", AccessReview("list", "", "secrets")});
  }
  // A node creates its mirror pods (the Node authorizer allows it, NodeRestriction narrows it).
  if (!node_mode) probes.push_back({"create pods", AccessReview("create", "", "pods")});
  return probes;
}

std::optional<bool> ReviewAllowed(const nlohmann::json& answer) {
  if (!answer.is_object() || !answer.contains("status") || !answer["status"].is_object()) {
    return std::nullopt;
  }
  const nlohmann::json& status = answer["status"];
  if (!status.contains("allowed") || !status["allowed"].is_boolean()) return std::nullopt;
  return status["allowed"].get<bool>();
}

std::string ExcessRightsMessage(const std::string& identity,
                                const std::vector<std::string>& allowed) {
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i) list += (i ? "; " : "") + allowed[i];
  return identity + " may " + list +
         ": rights no mode of the daemon needs, on every node it runs on; give it the node's "
         "credentials (chart: credentials: node) or the chart's ClusterRole instead";
}

NodePresence::NodePresence(uv_loop_t* loop, kubeclient::ApiClient* api, std::string node)
    : loop_(loop), api_(api), node_(std::move(node)) {}

NodePresence::~NodePresence() { Stop(); }

void NodePresence::Start() {
  timer_ = new uv_timer_t{};
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  Check();
}

void NodePresence::Stop() {
  if (call_) api_->Cancel(*call_);
  call_.reset();
  if (timer_ != nullptr) {
    uv_close(reinterpret_cast<uv_handle_t*>(timer_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    timer_ = nullptr;
  }
}

void NodePresence::Check() {
  call_ = api_->Get(NodePath(node_), [this](kubeclient::ApiResult result) {
    call_.reset();
    base::CatchAll("node check", [&] { OnAnswer(result); }).IgnoreError();
  });
}

void NodePresence::OnAnswer(const kubeclient::ApiResult& result) {
  switch (ClassifyNodeLookup(result)) {
    case NodeLookup::kExists:
      if (missing_) spdlog::info("node \"{}\" exists now: serving its pods", node_);
      missing_ = false;
      return;  // nothing more to ask
    case NodeLookup::kNoRight:
      spdlog::info(
          "node \"{}\": whether it exists is not checked: no right to get nodes ({}); the "
          "chart's ClusterRole grants it",
          node_, result.error->message);
      return;
    case NodeLookup::kMissing: {
      const auto now = std::chrono::steady_clock::now();
      if (!missing_ || now - last_warning_ >= kNodeWarnEvery) {
        spdlog::warn("{}: {}; asking again every {}s", NodeMissing(node_), NodeMissingAdvice(),
                     kNodeRecheck.count());
        last_warning_ = now;
      }
      missing_ = true;
      break;
    }
    case NodeLookup::kError:
      // Transient (the API client retried already): asked again later, the state kept.
      break;
  }
  if (timer_ != nullptr) {
    uv_timer_start(
        timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<NodePresence*>(t->data);
          base::CatchAll("node check", [&] { self->Check(); }).IgnoreError();
        },
        std::chrono::milliseconds(kNodeRecheck).count(), 0);
  }
}

ExcessRightsWarning::~ExcessRightsWarning() {
  if (waiting_ == 0) return;
  for (kubeclient::ApiClient::CallId id : calls_) api_->Cancel(id);
}

void ExcessRightsWarning::Start(bool node_mode, bool lists_every_secret,
                                const std::string& identity) {
  identity_ = identity;
  probes_ = ExcessRightProbes(node_mode, lists_every_secret);
  allowed_.assign(probes_.size(), false);
  waiting_ = probes_.size();
  for (size_t i = 0; i < probes_.size(); ++i) {
    calls_.push_back(
        api_->Create(kAccessReviewPath, probes_[i].review, [this, i](kubeclient::ApiResult r) {
          base::CatchAll("rights review", [&] { OnAnswer(i, r); }).IgnoreError();
        }));
  }
}

void ExcessRightsWarning::OnAnswer(size_t index, const kubeclient::ApiResult& result) {
  allowed_[index] = result.ok() && ReviewAllowed(result.object).value_or(false);
  if (--waiting_ != 0) return;
  std::vector<std::string> held;
  for (size_t i = 0; i < probes_.size(); ++i) {
    if (allowed_[i]) held.push_back(probes_[i].description);
  }
  if (!held.empty()) spdlog::warn("{}", ExcessRightsMessage(identity_, held));
}

}  // namespace volumemanager
