// SignalContainer: the `signal:SIGNAME[@CONTAINER]` reload action. Sends SIGHUP, SIGUSR1 or
// SIGUSR2 to the main process of one container of a pod on this node, found through the
// container's cgroup in /proc, never by process name.
//
// What it promises:
// * Only a process whose /proc/PID/cgroup places it in the container's own cgroup (or below it)
//   is ever signalled: a line (any cgroup v1 hierarchy, or the v2 `0::` line) whose path holds
//   the pod's component (`pod<uid>`, or `...-pod<uid with _ for ->.slice` under systemd) followed
//   directly by the container's component (`cri-containerd-<id>.scope`, `crio-<id>.scope`,
//   `crio-<id>`, `docker-<id>.scope`, or `<id>` alone). The pause (sandbox) container and conmon
//   or a shim have other components and never match; neither does the same container ID under
//   another pod's component.
// * A private cgroup namespace of the reader (the daemon, containerd's default on cgroup v2)
//   shows a cgroup outside its root as `..` steps up to the common ancestor, then the cgroups'
//   own names: another pod's container still reads `.../<pod component>/<container component>`
//   and matches. A container seen with no pod component (`/../<container component>`, or
//   `/<container component>` at the namespace root) is one of the daemon's own pod, which no
//   action may target: never matched, whatever pod's containerStatuses name its ID; the call is
//   refused naming the cgroup it read. (`..` after a name is no path the kernel writes: refused.)
// * The target: without shareProcessNamespace, PID 1 of the container's PID namespace (the last
//   NSpid field is 1, NSpid has at least two levels) whose parent is outside the container's
//   cgroup (so an init of a PID namespace nested inside the container is not it). With
//   shareProcessNamespace, PID 1 of the shared namespace is the pause process, so the target is
//   the container's first process: the oldest process of the container's cgroup (stat start
//   time) whose parent is outside that cgroup (`kubectl exec` sessions also have their parent
//   outside, but start later). SignalOutcome::target says which.
// * A signal the target does not catch (SigCgt of /proc/PID/status) is refused, not sent: a PID
//   namespace's init would drop it silently (a false "Reloaded"), any other process would die.
// * PID reuse: each /proc/<pid> is opened once as a directory fd (O_DIRECTORY | O_NOFOLLOW);
//   `cgroup`, `status` and `stat` are read through that fd, and the signal goes through the same
//   fd with pidfd_send_signal(2), which accepts a /proc/<pid> directory fd as a pidfd. Such an fd
//   stays bound to the process it was opened for: once that process is gone, reads through it
//   and the signal fail with ESRCH even when a new process holds the same number. So the process
//   checked is the process signalled, or nothing is sent. (A process that execs between the last
//   SigCgt check and the signal loses its handlers; status is read again just before sending to
//   keep that window to two system calls.)
// * Bounded: at most kMaxProcEntries entries of the proc dir and kMaxProcFileBytes of each file
//   are read; only numeric entries are opened, each with O_NOFOLLOW, relative to the proc dir fd
//   (`self` and `thread-self`, the links of /proc, are never followed).
//
// Blocking (reads every /proc/<pid>/cgroup of the node, about 50 ms with 2,000 processes on a
// loaded 2-core machine): run it on a worker thread, never on the event loop. Thread-safe: no
// shared state. Needs CAP_KILL over the target and the host's PID namespace (hostPID) to see other
// pods' processes. Errors name the pod UID and the container.
#ifndef VOLUMEMANAGER_RELOAD_SIGNAL_ACTION_H_
#define VOLUMEMANAGER_RELOAD_SIGNAL_ACTION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reload {

// What to signal: from the pod (metadata.uid, spec.shareProcessNamespace) and its container
// status (name, containerID).
struct ContainerSignal {
  std::string pod_uid;
  std::string container_name;  // for messages
  // status.containerStatuses[].containerID: "containerd://<64 hex>", "cri-o://<64 hex>" or
  // "docker://<64 hex>".
  std::string container_id;
  int signal = 0;  // SIGHUP, SIGUSR1 or SIGUSR2; any other number is refused
  bool share_process_namespace = false;
};

// Seams for tests.
struct SignalEnvironment {
  // Where procfs is mounted.
  std::string proc_dir = "/proc";
  // Called with the target's PID after its last check, just before the signal goes (tests kill
  // it there and put a new process on its number).
  std::function<void(int host_pid)> before_signal;
};

// What was signalled.
struct SignalOutcome {
  int host_pid = 0;  // in the reader's PID namespace (the host's, with hostPID)
  // e.g. "PID 1 (host PID 4242) of container app", or with shareProcessNamespace
  // "first process (host PID 4242, PID 7 in the pod's shared namespace) of container app".
  std::string target;
};

// Sends request.signal to the container's main process (see above). Errors: a signal other than
// SIGHUP, SIGUSR1, SIGUSR2; a malformed pod UID or container ID; no process of the container on
// this node; no main process, or more than one; a signal the target does not catch; the target
// gone before the signal; a failed system call. Each names the pod UID and container.
base::Result<SignalOutcome> SignalContainer(const ContainerSignal& request,
                                            const SignalEnvironment& env = {});

// SignalContainer for several containers with one scan of /proc (the scan is the cost: about 25
// microseconds a process of the node), e.g. every pod that one ConfigMap change reloads. One
// outcome per request, in order; a bad request fails alone.
std::vector<base::Result<SignalOutcome>> SignalContainers(
    const std::vector<ContainerSignal>& requests, const SignalEnvironment& env = {});

// The limits of one call.
inline constexpr size_t kMaxProcEntries = 1 << 22;  // the kernel's largest pid_max
inline constexpr size_t kMaxProcFileBytes = 64 << 10;

// The pieces, exposed for tests and the fuzzer.

// "containerd://<id>" and the like: the runtime (containerd, cri-o or docker) and the ID, which
// must be 64 lowercase hex digits.
struct ContainerId {
  std::string runtime;
  std::string id;
};
base::Result<ContainerId> ParseContainerId(std::string_view container_id);

// A pod UID as it may appear in a cgroup name: 1 to 64 of [0-9a-zA-Z-] (a UUID from the API
// server, or the hex MD5 of a static pod).
base::Status CheckPodUid(std::string_view pod_uid);

// Whether the cgroup path `path` (third field of a /proc/PID/cgroup line) is the cgroup of
// container `id` of pod `pod_uid`, or below it (see the header comment for the rules).
bool CgroupPathIsContainers(std::string_view path, std::string_view pod_uid, std::string_view id);

// Whether any line of a /proc/PID/cgroup text ("<id>:<controllers>:<path>", v1 and v2) names a
// path for which CgroupPathIsContainers holds.
bool CgroupFileNamesContainer(std::string_view cgroup_file, std::string_view pod_uid,
                              std::string_view id);

// The fields of /proc/PID/status this action uses.
struct ProcStatus {
  int ppid = -1;
  std::vector<int> nspid;   // outermost (the reader's namespace) first
  uint64_t sig_caught = 0;  // SigCgt: bit n-1 set when signal n has a handler
};
// Errors name the missing or malformed field.
base::Result<ProcStatus> ParseProcStatus(std::string_view status);

// The start time (field 22, clock ticks after boot) of a /proc/PID/stat text; the command name
// (field 2) may hold spaces and parentheses, so fields are counted after the last ')'.
base::Result<uint64_t> ParseProcStatStartTime(std::string_view stat);

// "SIGHUP", "SIGUSR1", "SIGUSR2" for those; "signal <n>" otherwise.
std::string SignalName(int signal);

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_SIGNAL_ACTION_H_
