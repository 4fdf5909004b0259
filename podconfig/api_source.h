// ApiSource: the pod source over the API server, as the kubelet's apiserver source: the pods
// bound to this node (`fieldSelector=spec.nodeName=<node>`), listed and then watched through
// kubeclient::Reflector (kubeclient/watch/reflector.h), delivered to the sink as the source's
// complete state.
//
// Promises:
//   * The first sink call comes only after the first complete list (so PodConfig counts the
//     source as seen only then), and carries that list's pods, possibly none.
//   * After that, every change the reflector applies (watch event, relist) leads to one sink call
//     on the next loop turn: a burst (a list of 1,000 pods, a chunk of many watch events) costs
//     one delivery, not one per pod. A relist that changed nothing delivers nothing.
//   * Losing the API server delivers nothing: the reflector keeps its store, so the last state
//     stays until the server answers again (no delivery ever empties the source because of an
//     outage).
//   * Mirror pods (annotation kubernetes.io/config.mirror: the API's copy of a static pod, whose
//     volumes live under the static pod's UID) and pods bound to another node are left out.
//   * Each pod is decoded with kube::DecodePod and given kube::ApplyDefaults (a no-op on what a
//     real server sends; it covers a server that left a defaulted field out). A pod that cannot
//     be decoded is logged once per resourceVersion with its namespace/name and the field (never
//     a value); its last decoded version stays when it had one, otherwise it is left out. The
//     other pods are unaffected.
//   * A pod being deleted (metadata.deletionTimestamp set) is delivered with that field; it leaves
//     the source when the server reports it DELETED.
//
// Thread model: a loop-thread object. Start, Stop and the destructor run on the loop thread of
// the ApiClient's HttpClient, and so does the sink. The ApiClient must outlive Stop (or the
// destructor); after Stop no sink call happens, and the loop must run on for the source's timer
// to close and its memory to be released.
#ifndef VOLUMEMANAGER_PODCONFIG_API_SOURCE_H_
#define VOLUMEMANAGER_PODCONFIG_API_SOURCE_H_

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/pod.h"
#include "kubeclient/api_client.h"
#include "kubeclient/watch/reflector.h"
#include "podconfig/pod_update.h"

namespace podconfig {

struct ApiSourceOptions {
  std::string node_name;  // --node-name
  // Reflector tuning (timeouts, backoff, resync). `path`, `field_selector`, `kind`,
  // `api_version` and `description` are set by the source.
  kubeclient::ReflectorOptions reflector;
};

class ApiSource {
 public:
  using Sink = std::function<void(std::vector<PodPtr>)>;

  struct Stats {
    int deliveries = 0;       // sink calls
    int mirror_skipped = 0;   // mirror pods seen (add or update) and left out
    int other_node = 0;       // pods of another node seen and left out
    int decode_failures = 0;  // pod versions that could not be decoded
  };

  ApiSource() = default;
  ~ApiSource();
  ApiSource(const ApiSource&) = delete;
  ApiSource& operator=(const ApiSource&) = delete;

  // Starts listing; the first sink call comes from the loop once the list completed. Fails on an
  // empty node name or when already started.
  base::Status Start(kubeclient::ApiClient* api, ApiSourceOptions options, Sink sink);
  // Stops listing and watching; no sink call happens after it returns. Idempotent; may be called
  // from the sink.
  void Stop();

  // Zero before Start. For tests and the daemon's state output.
  Stats stats() const;
  // True once the first list completed.
  bool synced() const;
  // The reflector (its store and stats), or nullptr before Start and after Stop.
  const kubeclient::Reflector* reflector() const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;  // freed once its timer closed
};

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_API_SOURCE_H_
