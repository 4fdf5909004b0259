#include "cmd/volumemanager/preflight.h"

#include <map>
#include <optional>
#include <set>

#include "cmd/volumemanager/api_identity.h"
#include "cmd/volumemanager/blocking_api_client.h"
#include "cmd/volumemanager/cluster_checks.h"
#include "kube/object_ref.h"
#include "kubeclient/api_client.h"

namespace volumemanager {
namespace {

std::string MissingRule(const std::string& group, const std::string& resource,
                        const std::string& verb, const std::string& ns) {
  std::string rule = "missing RBAC rule: apiGroups [\"" + group + "\"], resources [\"" + resource +
                     "\"], verbs [\"" + verb + "\"]";
  return ns.empty() ? rule + " (cluster-wide)" : rule + " in namespace \"" + ns + "\"";
}

// The check's detail for a failed request: on 403 the missing RBAC rule, or under a node
// identity the right the Node authorizer refused (its reason is in the server's message); else
// the error.
std::string Explain(const kubeclient::ApiError& err, const std::string& group,
                    const std::string& resource, const std::string& verb, const std::string& ns,
                    bool node_mode) {
  if (err.IsForbidden()) {
    if (node_mode) {
      return "the node may not " + verb + " " + resource +
             (ns.empty() ? "" : " in namespace \"" + ns + "\"") + " (" + err.message + ")";
    }
    return MissingRule(group, resource, verb, ns) + " (" + err.message + ")";
  }
  if (err.IsUnauthorized()) return "credentials rejected: " + err.ToString();
  return err.ToString();
}

// What the daemon will read in one namespace: the names its pods' volumes reference there, by
// kind ("configmaps", "secrets"; projected sources included).
using References = std::map<std::string, std::map<std::string, std::set<std::string>>>;

void AddReferences(const nlohmann::json& pod, References* refs) {
  if (!pod.is_object()) return;
  const nlohmann::json meta = pod.value("metadata", nlohmann::json::object());
  const std::string ns = meta.is_object() ? meta.value("namespace", std::string()) : "";
  if (ns.empty()) return;
  auto& by_kind = (*refs)[ns];
  by_kind["configmaps"];  // the namespace is listed even with no reference
  by_kind["secrets"];
  const nlohmann::json spec = pod.value("spec", nlohmann::json::object());
  if (!spec.is_object() || !spec.contains("volumes") || !spec["volumes"].is_array()) return;
  auto name_at = [](const nlohmann::json& source, const char* key) -> std::string {
    if (!source.is_object() || !source.contains(key) || !source[key].is_string()) return "";
    return source[key].get<std::string>();
  };
  for (const nlohmann::json& volume : spec["volumes"]) {
    if (!volume.is_object()) continue;
    if (volume.contains("configMap")) {
      if (auto n = name_at(volume["configMap"], "name"); !n.empty())
        by_kind["configmaps"].insert(n);
    }
    if (volume.contains("secret")) {
      if (auto n = name_at(volume["secret"], "secretName"); !n.empty()) {
        by_kind["secrets"].insert(n);
      }
    }
    if (volume.contains("projected") && volume["projected"].is_object() &&
        volume["projected"].contains("sources") && volume["projected"]["sources"].is_array()) {
      for (const nlohmann::json& source : volume["projected"]["sources"]) {
        if (!source.is_object()) continue;
        if (source.contains("configMap")) {
          if (auto n = name_at(source["configMap"], "name"); !n.empty()) {
            by_kind["configmaps"].insert(n);
          }
        }
        if (source.contains("secret")) {
          if (auto n = name_at(source["secret"], "name"); !n.empty()) by_kind["secrets"].insert(n);
        }
      }
    }
  }
}

constexpr char kProbeName[] = "volumemanager-preflight-probe";

// get, list and watch of `name` pinned by metadata.name, as the daemon's strategies read it. A
// 404 on the get is an allowed read of an object that does not exist.
PreflightCheck CheckReads(BlockingApiClient& client, const std::string& resource,
                          const std::string& ns, const std::string& name, bool node_mode) {
  PreflightCheck check{resource + " readable in namespace " + ns, false, ""};
  const std::string base = "/api/v1/namespaces/" + ns + "/" + resource;
  const std::string pinned = "fieldSelector=" + kubeclient::QueryEscape("metadata.name=" + name);
  kubeclient::ApiResult got = client.Call(
      [&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) { a.Get(base + "/" + name, cb); });
  kubeclient::ApiResult list =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
        a.Get(base + "?" + pinned, cb);
      });
  kubeclient::ApiResult watch = client.Watch(base + "?watch=true&timeoutSeconds=5&" + pinned);
  std::vector<std::string> problems;
  if (!got.ok() && !got.error->IsNotFound()) {
    problems.push_back(Explain(*got.error, "", resource, "get", ns, node_mode));
  }
  if (!list.ok()) problems.push_back(Explain(*list.error, "", resource, "list", ns, node_mode));
  if (!watch.ok()) problems.push_back(Explain(*watch.error, "", resource, "watch", ns, node_mode));
  check.ok = problems.empty();
  if (check.ok) {
    check.detail = "get, list and watch of " +
                   (name == kProbeName ? std::string("any name") : "\"" + name + "\"") + " allowed";
  }
  for (const std::string& p : problems) check.detail += (check.detail.empty() ? "" : "; ") + p;
  return check;
}

// Events as the daemon posts them (create, then patch to aggregate), with dryRun=All: nothing is
// stored. A patch of a name that does not exist answers 404 when allowed.
PreflightCheck CheckEvents(BlockingApiClient& client, const std::string& ns,
                           const std::string& node, bool node_mode) {
  PreflightCheck check{"events writable in namespace " + ns, false, ""};
  const std::string base = "/api/v1/namespaces/" + ns + "/events";
  const nlohmann::json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", kProbeName}, {"namespace", ns}}},
      {"involvedObject", {{"kind", "Pod"}, {"namespace", ns}, {"name", kProbeName}}},
      {"reason", "Preflight"},
      {"message", "volumemanager preflight (dry run)"},
      {"type", "Normal"},
      {"source", {{"component", "volumemanager"}, {"host", node}}}};
  kubeclient::ApiResult created =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
        a.Create(base + "?dryRun=All", event, cb);
      });
  kubeclient::ApiResult patched =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
        a.Patch(base + "/" + kProbeName + "?dryRun=All", nlohmann::json{{"count", 2}},
                "application/strategic-merge-patch+json", cb);
      });
  std::vector<std::string> problems;
  if (!created.ok()) {
    problems.push_back(Explain(*created.error, "", "events", "create", ns, node_mode));
  }
  if (!patched.ok() && !patched.error->IsNotFound()) {
    problems.push_back(Explain(*patched.error, "", "events", "patch", ns, node_mode));
  }
  check.ok = problems.empty();
  if (check.ok) check.detail = "create and patch allowed (dry run, nothing stored)";
  for (const std::string& p : problems) check.detail += (check.detail.empty() ? "" : "; ") + p;
  return check;
}

// The Lease lock's requests (get, create, update) with dryRun=All: nothing is stored, so nothing
// is left behind and no delete right is needed. A get or update of a name that does not exist
// answers 404 when allowed (an update of a Lease may also create it: 201).
PreflightCheck CheckLeases(BlockingApiClient& client, const std::string& ns,
                           const std::string& node) {
  const std::string group = "coordination.k8s.io";
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases";
  const std::string name = "volumemanager-preflight-" + node;
  PreflightCheck check{"leases writable in namespace " + ns, false, ""};
  const nlohmann::json body = {{"apiVersion", "coordination.k8s.io/v1"},
                               {"kind", "Lease"},
                               {"metadata", {{"name", name}, {"namespace", ns}}},
                               {"spec", {{"holderIdentity", ""}, {"leaseDurationSeconds", 1}}}};
  kubeclient::ApiResult got =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
        a.Get(leases + "/" + name, cb);
      });
  kubeclient::ApiResult created =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
        a.Create(leases + "?dryRun=All", body, cb);
      });
  kubeclient::ApiResult updated =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
        a.Update(leases + "/" + name + "?dryRun=All", body, cb);
      });
  std::vector<std::string> problems;
  if (!got.ok() && !got.error->IsNotFound()) {
    problems.push_back(Explain(*got.error, group, "leases", "get", ns, false));
  }
  if (!created.ok() && !created.error->IsAlreadyExists()) {
    problems.push_back(Explain(*created.error, group, "leases", "create", ns, false));
  }
  if (!updated.ok() && !updated.error->IsNotFound() && !updated.error->IsConflict()) {
    problems.push_back(Explain(*updated.error, group, "leases", "update", ns, false));
  }
  check.ok = problems.empty();
  if (check.ok) check.detail = "get, create and update allowed (dry run, nothing stored)";
  for (const std::string& p : problems) check.detail += (check.detail.empty() ? "" : "; ") + p;
  return check;
}

}  // namespace

std::string FormatPreflightCheck(const PreflightCheck& check) {
  const char* label = check.not_checked ? "SKIP  "
                      : !check.ok       ? "FAIL  "
                      : check.warning   ? "WARN  "
                                        : "ok    ";
  return label + check.name + ": " + check.detail;
}

std::string FormatPreflightHeader(const PreflightReport& report) {
  return "credentials " + report.credentials + ", identity " + report.identity;
}

int PreflightExitCode(const std::vector<PreflightCheck>& checks) {
  bool not_checked = false;
  for (const PreflightCheck& c : checks) {
    if (!c.ok && !c.not_checked) return 1;
    not_checked = not_checked || c.not_checked;
  }
  return not_checked ? 3 : 0;
}

namespace {

// GET of the Node: under a node identity its own only (the Node authorizer), under a service
// account the chart's ClusterRole grants get on nodes.
PreflightCheck CheckNode(BlockingApiClient& client, const std::string& node, bool node_mode) {
  PreflightCheck check{"node " + node + " exists", false, ""};
  kubeclient::ApiResult got = client.Call(
      [&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) { a.Get(NodePath(node), cb); });
  switch (ClassifyNodeLookup(got)) {
    case NodeLookup::kExists:
      check.ok = true;
      check.detail = "found";
      break;
    case NodeLookup::kMissing:
      check.detail = NodeMissing(node) + ": " + NodeMissingAdvice();
      break;
    case NodeLookup::kNoRight:
      check.not_checked = true;
      check.detail = std::string("not checked: no right to get nodes (") + got.error->message +
                     "): a wrong --node-name would go unnoticed, by the daemon too; " +
                     (node_mode ? "a node may read only its own Node object"
                                : "the chart's ClusterRole grants get on nodes");
      break;
    case NodeLookup::kError:
      check.detail = got.error->ToString();
      break;
  }
  return check;
}

PreflightCheck CheckExcessRights(BlockingApiClient& client, bool node_mode, bool lists_every_secret,
                                 const std::string& identity) {
  PreflightCheck check{"rights beyond need", true, ""};
  std::vector<std::string> held;
  std::vector<std::string> not_held;
  for (const ExcessRightProbe& probe : ExcessRightProbes(node_mode, lists_every_secret)) {
    kubeclient::ApiResult answer =
        client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) {
          a.Create(kAccessReviewPath, probe.review, cb);
        });
    std::optional<bool> allowed = answer.ok() ? ReviewAllowed(answer.object) : std::nullopt;
    if (!allowed) {
      check.detail =
          "not asked: SelfSubjectAccessReview " +
          (answer.ok() ? std::string("answered without status.allowed") : answer.error->ToString());
      return check;
    }
    (*allowed ? held : not_held).push_back(probe.description);
  }
  if (!held.empty()) {
    check.warning = true;
    check.detail = ExcessRightsMessage(identity, held);
    return check;
  }
  check.detail = "none of: ";
  for (size_t i = 0; i < not_held.size(); ++i) check.detail += (i ? "; " : "") + not_held[i];
  return check;
}

}  // namespace

PreflightReport RunPreflight(const kubeclient::Credentials& credentials,
                             const PreflightOptions& options) {
  PreflightReport report;
  report.credentials = credentials.source;
  report.identity = "not checked (the server was not reached)";
  std::vector<PreflightCheck>& checks = report.checks;
  const std::string ns =
      options.namespace_name.empty() ? credentials.default_namespace : options.namespace_name;
  const std::string node = options.node_name;
  BlockingApiClient client(credentials, options.request_timeout);

  PreflightCheck reach{"server reachable, TLS verified", false, ""};
  if (!client.error().empty()) {
    reach.detail = client.error();
    checks.push_back(reach);
    return report;
  }
  kubeclient::ApiResult version = client.Call(
      [](kubeclient::ApiClient& api, kubeclient::ApiCallback cb) { api.Get("/version", cb); });
  if (version.ok() || !version.error->IsTransport()) {
    // Any HTTP answer proves the TLS handshake (and so the CA) worked.
    reach.ok = true;
    reach.detail = credentials.server;
    if (version.ok() && version.object.is_object()) {
      reach.detail += " (" + version.object.value("gitVersion", std::string("?")) + ")";
    }
    if (credentials.tls.insecure_skip_tls_verify) {
      reach.detail += "; WARNING: insecure-skip-tls-verify, the server was not verified";
    }
  } else {
    reach.detail = credentials.server + ": " + version.error->message;
  }
  checks.push_back(reach);
  if (!reach.ok) return report;

  PreflightCheck auth{"credentials accepted", false, ""};
  kubeclient::ApiResult api =
      client.Call([](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) { a.Get("/api", cb); });
  auth.ok = api.ok() || !api.error->IsUnauthorized();
  auth.detail = auth.ok ? "as configured by " + credentials.source
                        : "credentials rejected: " + api.error->ToString();
  checks.push_back(auth);
  if (!auth.ok) {
    report.identity = "not checked (the credentials were rejected)";
    return report;
  }

  // The identity and the mode it puts the daemon in (cluster_daemon.h).
  PreflightCheck who{"identity", true, ""};
  base::Result<ApiIdentity> identity = LookUpIdentity(client, credentials);
  std::optional<std::string> identity_node;
  if (!identity.ok()) {
    who.detail =
        "unknown (" + identity.status().message() + "): the daemon runs in service-account mode";
    report.identity = "unknown (" + identity.status().message() + ")";
  } else {
    report.identity = identity->Describe();
    identity_node = identity->NodeName();
    who.detail = identity->Describe() + ": " +
                 (identity_node ? "node mode for node \"" + *identity_node + "\""
                                : std::string("service-account mode"));
    if (identity_node && *identity_node != node) {
      who.ok = false;
      who.detail += "; but --node-name is \"" + node +
                    "\": the daemon refuses to start (a node's " +
                    "credentials read only that node's pods and objects)";
    }
  }
  checks.push_back(who);
  const bool node_mode = identity_node.has_value();
  checks.push_back(CheckNode(client, node, node_mode));

  const std::string pods =
      "/api/v1/pods?fieldSelector=" + kubeclient::QueryEscape("spec.nodeName=" + node);
  PreflightCheck list_pods{"pods on node " + node + " listable", false, ""};
  kubeclient::ApiResult listed =
      client.Call([&](kubeclient::ApiClient& a, kubeclient::ApiCallback cb) { a.Get(pods, cb); });
  std::string rv;
  References refs;
  if (listed.ok()) {
    list_pods.ok = true;
    size_t n = 0;
    if (listed.object.contains("items") && listed.object["items"].is_array()) {
      n = listed.object["items"].size();
      for (const nlohmann::json& pod : listed.object["items"]) AddReferences(pod, &refs);
    }
    list_pods.detail =
        std::to_string(n) + " pod(s) in " + std::to_string(refs.size()) + " namespace(s)";
    if (listed.object.contains("metadata") && listed.object["metadata"].is_object()) {
      rv = listed.object["metadata"].value("resourceVersion", std::string());
    }
  } else {
    list_pods.detail = Explain(*listed.error, "", "pods", "list", "", node_mode);
  }
  checks.push_back(list_pods);

  PreflightCheck watch_pods{"pods on node " + node + " watchable", false, ""};
  kubeclient::ApiResult watched =
      client.Watch(pods + "&watch=true&timeoutSeconds=5" +
                   (rv.empty() ? "" : "&resourceVersion=" + kubeclient::QueryEscape(rv)));
  watch_pods.ok = watched.ok();
  watch_pods.detail =
      watched.ok() ? "watch opened" : Explain(*watched.error, "", "pods", "watch", "", node_mode);
  checks.push_back(watch_pods);

  // With no pods (or none listed), the namespace given stands in, in service-account mode: the
  // rights a pod scheduled later will need. A node may read nothing until a pod references it.
  const bool probe_only = refs.empty() && !node_mode;
  const cache::ReadPolicy& policy = options.read_policy;
  if (probe_only) {
    // With --object-namespaces the namespaces listed stand in: the daemon reads no other.
    for (const std::string& probe_ns :
         policy.namespaces.empty() ? std::set<std::string>{ns} : policy.namespaces) {
      refs[probe_ns]["configmaps"];
      refs[probe_ns]["secrets"];
    }
  } else if (refs.empty()) {
    checks.push_back(CheckEvents(client, ns, node, node_mode));
  }
  for (const auto& [pod_ns, by_kind] : refs) {
    for (const auto& [resource, names] : by_kind) {
      // Only what the pods' volumes reference (a kind no volume there uses needs no right),
      // except with no pods at all (the probe below).
      if (names.empty() && !probe_only) continue;
      // What the daemon is configured not to read (--no-secrets, --object-namespaces) needs no
      // right: its volumes are the kubelet's.
      const kube::ObjectRef ref{
          resource == "secrets" ? kube::ObjectKind::kSecret : kube::ObjectKind::kConfigMap, pod_ns,
          names.empty() ? "*" : *names.begin()};
      if (std::string refusal = policy.Refusal(ref); !refusal.empty()) {
        checks.push_back(
            {resource + " readable in namespace " + pod_ns, true,
             "not needed: " + refusal + "; the kubelet keeps the volumes that read it"});
        continue;
      }
      checks.push_back(CheckReads(client, resource, pod_ns,
                                  names.empty() ? kProbeName : *names.begin(), node_mode));
    }
    checks.push_back(CheckEvents(client, pod_ns, node, node_mode));
  }

  if (options.lease_lock) {
    if (node_mode) {
      checks.push_back(
          {"leases writable in namespace " + ns, false,
           "the Lease lock is refused under a node identity: a node may write no Lease but its own "
           "heartbeat (kube-node-lease/" +
               *identity_node + "); use the file lock (the default)"});
    } else {
      checks.push_back(CheckLeases(client, ns, node));
    }
  }
  checks.push_back(CheckExcessRights(client, node_mode, policy.ReadsEverything(),
                                     identity.ok() ? identity->username : "the credentials"));
  return report;
}

}  // namespace volumemanager
