// Pod and PodList (core/v1): the metadata, the volumes, the containers' mounts and resources and
// the security context fields that decide file ownership. Plain values.
#ifndef VOLUMEMANAGER_KUBE_POD_H_
#define VOLUMEMANAGER_KUBE_POD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube/object_meta.h"
#include "kube/quantity.h"
#include "kube/volume.h"

namespace kube {

struct VolumeMount {
  std::string name;
  std::string mount_path;
  std::string sub_path;
  bool read_only = false;
  // A subPath with $(VAR) references to the container's environment, expanded by the kubelet
  // (the daemon does not know the environment: it refuses to update such a mount).
  std::string sub_path_expr;

  bool operator==(const VolumeMount&) const = default;
};

// Resource name ("cpu", "memory", "ephemeral-storage", "hugepages-2Mi", ...) -> quantity.
using ResourceList = std::map<std::string, Quantity>;

struct ResourceRequirements {
  ResourceList limits;
  ResourceList requests;

  bool operator==(const ResourceRequirements&) const = default;
};

struct ContainerSecurityContext {
  std::optional<int64_t> run_as_user;

  bool operator==(const ContainerSecurityContext&) const = default;
};

struct Container {
  std::string name;
  std::vector<VolumeMount> volume_mounts;
  ResourceRequirements resources;
  std::optional<ContainerSecurityContext> security_context;

  bool operator==(const Container&) const = default;
};

struct PodSecurityContext {
  std::optional<int64_t> fs_group;
  std::optional<int64_t> run_as_user;
  std::string fs_group_change_policy;  // "OnRootMismatch", "Always" or empty

  bool operator==(const PodSecurityContext&) const = default;
};

struct PodSpec {
  std::string node_name;
  std::string service_account_name;
  std::vector<Volume> volumes;
  std::vector<Container> init_containers;
  std::vector<Container> containers;
  std::optional<PodSecurityContext> security_context;
  bool host_network = false;
  bool share_process_namespace = false;

  bool operator==(const PodSpec&) const = default;
};

// One entry of status.containerStatuses (or initContainerStatuses): which container runs as
// which runtime container, and since when.
struct ContainerStatus {
  std::string name;
  std::string container_id;  // "<runtime>://<id>", e.g. "containerd://4f3c..."; empty before start
  std::string running_started_at;  // state.running.startedAt (RFC 3339); empty unless running

  bool operator==(const ContainerStatus&) const = default;
};

struct PodStatus {
  std::string phase;    // Pending, Running, Succeeded, Failed, Unknown; unknown values kept raw
  std::string pod_ip;   // status.podIP
  std::string host_ip;  // status.hostIP
  std::vector<ContainerStatus> container_statuses;

  bool operator==(const PodStatus&) const = default;
};

struct Pod {
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;

  // The volume named `name`, or nullptr.
  const Volume* FindVolume(const std::string& name) const {
    for (const Volume& v : spec.volumes) {
      if (v.name == name) return &v;
    }
    return nullptr;
  }

  bool operator==(const Pod&) const = default;
};

struct PodList {
  ListMeta metadata;
  std::vector<Pod> items;

  bool operator==(const PodList&) const = default;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_POD_H_
