#include "cmd/volumemanager/preflight.h"

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>

#include "cmd/volumemanager/blocking_api_client.h"
#include "kubeclient/api_client.h"

namespace kube {
namespace {

std::string MissingRule(const std::string& group, const std::string& resource,
                        const std::string& verb, const std::string& ns) {
  std::string rule = "missing RBAC rule: apiGroups [\"" + group + "\"], resources [\"" + resource +
                     "\"], verbs [\"" + verb + "\"]";
  return ns.empty() ? rule + " (cluster-wide)" : rule + " in namespace \"" + ns + "\"";
}

// The check's detail for a failed request: the missing rule on 403, else the error.
std::string Explain(const ApiError& err, const std::string& group, const std::string& resource,
                    const std::string& verb, const std::string& ns) {
  if (err.IsForbidden()) return MissingRule(group, resource, verb, ns) + " (" + err.message + ")";
  if (err.IsUnauthorized()) return "credentials rejected: " + err.ToString();
  return err.ToString();
}

}  // namespace

std::string FormatPreflightCheck(const PreflightCheck& check) {
  return std::string(check.ok ? "ok    " : "FAIL  ") + check.name + ": " + check.detail;
}

std::vector<PreflightCheck> RunPreflight(const Credentials& credentials,
                                         const PreflightOptions& options) {
  std::vector<PreflightCheck> checks;
  const std::string ns =
      options.namespace_name.empty() ? credentials.default_namespace : options.namespace_name;
  const std::string node = options.node_name;
  BlockingApiClient client(credentials, options.request_timeout);

  PreflightCheck reach{"server reachable, TLS verified", false, ""};
  if (!client.error().empty()) {
    reach.detail = client.error();
    checks.push_back(reach);
    return checks;
  }
  ApiResult version = client.Call([](ApiClient& api, ApiCallback cb) { api.Get("/version", cb); });
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
  if (!reach.ok) return checks;

  PreflightCheck auth{"credentials accepted", false, ""};
  ApiResult api = client.Call([](ApiClient& a, ApiCallback cb) { a.Get("/api", cb); });
  auth.ok = api.ok() || !api.error->IsUnauthorized();
  auth.detail = auth.ok ? "as configured by " + credentials.source
                        : "credentials rejected: " + api.error->ToString();
  checks.push_back(auth);
  if (!auth.ok) return checks;

  const std::string pods = "/api/v1/pods?fieldSelector=" + QueryEscape("spec.nodeName=" + node);
  PreflightCheck list_pods{"pods on node " + node + " listable", false, ""};
  ApiResult listed =
      client.Call([&](ApiClient& a, ApiCallback cb) { a.Get(pods + "&limit=1", cb); });
  std::string rv;
  if (listed.ok()) {
    list_pods.ok = true;
    size_t n = listed.object.contains("items") && listed.object["items"].is_array()
                   ? listed.object["items"].size()
                   : 0;
    list_pods.detail = "first page holds " + std::to_string(n) + " pod(s)";
    rv = listed.object["metadata"].value("resourceVersion", std::string());
  } else {
    list_pods.detail = Explain(*listed.error, "", "pods", "list", "");
  }
  checks.push_back(list_pods);

  PreflightCheck watch_pods{"pods on node " + node + " watchable", false, ""};
  ApiResult watched = client.Watch(pods + "&watch=true&timeoutSeconds=5" +
                                   (rv.empty() ? "" : "&resourceVersion=" + QueryEscape(rv)));
  watch_pods.ok = watched.ok();
  watch_pods.detail =
      watched.ok() ? "watch opened" : Explain(*watched.error, "", "pods", "watch", "");
  checks.push_back(watch_pods);

  for (const std::string resource : {"configmaps", "secrets"}) {
    const std::string base = "/api/v1/namespaces/" + ns + "/" + resource;
    PreflightCheck read{resource + " readable in namespace " + ns, true, ""};
    // A get of a name that does not exist answers 404 when allowed and 403 when not.
    ApiResult got = client.Call(
        [&](ApiClient& a, ApiCallback cb) { a.Get(base + "/volumemanager-preflight-probe", cb); });
    ApiResult list =
        client.Call([&](ApiClient& a, ApiCallback cb) { a.Get(base + "?limit=1", cb); });
    ApiResult watch = client.Watch(base + "?watch=true&timeoutSeconds=5");
    std::vector<std::string> problems;
    if (!got.ok() && !got.error->IsNotFound()) {
      problems.push_back(Explain(*got.error, "", resource, "get", ns));
    }
    if (!list.ok()) problems.push_back(Explain(*list.error, "", resource, "list", ns));
    if (!watch.ok()) problems.push_back(Explain(*watch.error, "", resource, "watch", ns));
    read.ok = problems.empty();
    read.detail = read.ok ? "get, list and watch allowed" : "";
    for (const std::string& p : problems) read.detail += (read.detail.empty() ? "" : "; ") + p;
    checks.push_back(read);
  }

  const std::string group = "coordination.k8s.io";
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases";
  const std::string name = "volumemanager-preflight-" + node;
  PreflightCheck lease{"leases writable in namespace " + ns, false, ""};
  nlohmann::json body = {{"apiVersion", "coordination.k8s.io/v1"},
                         {"kind", "Lease"},
                         {"metadata", {{"name", name}}},
                         {"spec", {{"holderIdentity", ""}, {"leaseDurationSeconds", 1}}}};
  ApiResult created =
      client.Call([&](ApiClient& a, ApiCallback cb) { a.Create(leases, body, cb); });
  nlohmann::json current;
  if (created.ok()) {
    current = created.object;
  } else if (created.error->IsAlreadyExists()) {
    ApiResult got =
        client.Call([&](ApiClient& a, ApiCallback cb) { a.Get(leases + "/" + name, cb); });
    if (got.ok()) {
      current = got.object;
    } else {
      lease.detail = Explain(*got.error, group, "leases", "get", ns);
    }
  } else {
    lease.detail = Explain(*created.error, group, "leases", "create", ns);
  }
  if (!current.is_null()) {
    current["spec"]["leaseDurationSeconds"] = 2;
    ApiResult updated = client.Call(
        [&](ApiClient& a, ApiCallback cb) { a.Update(leases + "/" + name, current, cb); });
    if (updated.ok()) {
      lease.ok = true;
      lease.detail = "created and updated lease " + name;
      ApiResult deleted =
          client.Call([&](ApiClient& a, ApiCallback cb) { a.Delete(leases + "/" + name, cb); });
      if (!deleted.ok()) {
        lease.detail +=
            "; could not delete it (" + deleted.error->ToString() + "), delete it by hand";
      }
    } else {
      lease.detail = Explain(*updated.error, group, "leases", "update", ns);
    }
  }
  checks.push_back(lease);
  return checks;
}

}  // namespace kube
