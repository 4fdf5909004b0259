#include "reload/signal_action.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "base/errno_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace reload {
namespace {

// Candidates for the target kept open at once: PID 1 of the container (one), or the processes
// of the container that started in its oldest clock tick (a handful).
constexpr size_t kMaxTargets = 64;

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// `pod<uid>` (cgroupfs), or `pod<uid_>.slice` ending a systemd slice name such as
// `kubepods-burstable-pod<uid_>.slice` or kind's `kubelet-kubepods-pod<uid_>.slice`.
bool IsPodComponent(std::string_view component, std::string_view pod_uid) {
  if (StartsWith(component, "pod") && component.substr(3) == pod_uid) return true;
  std::string suffix = "pod";
  for (char c : pod_uid) suffix += c == '-' ? '_' : c;
  suffix += ".slice";
  if (!EndsWith(component, suffix)) return false;
  const std::string_view prefix = component.substr(0, component.size() - suffix.size());
  return prefix.empty() || prefix.back() == '-';
}

// The cgroup a runtime makes for container `id`: containerd (systemd driver), CRI-O (systemd and
// cgroupfs), docker (systemd), or the bare ID (containerd and docker with cgroupfs).
bool IsContainerComponent(std::string_view component, std::string_view id) {
  if (component == id) return true;
  for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-"}) {
    if (!StartsWith(component, prefix)) continue;
    std::string_view rest = component.substr(prefix.size());
    if (EndsWith(rest, ".scope"))
      rest.remove_suffix(6);
    else if (prefix != "crio-")
      continue;  // only CRI-O's cgroupfs name has no .scope
    if (rest == id) return true;
  }
  return false;
}

// `text` as a non-negative decimal int, or -1.
int ParseNonNegativeInt(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return -1;
  return value;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The whole of `name` under `dir_fd`, at most kMaxProcFileBytes; no link followed. ESRCH or
// ENOENT (sys_errno) when the process is gone.
base::Result<std::string> ReadAt(int dir_fd, const char* name, const std::string& shown_path) {
  base::UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return base::ErrnoError("open", shown_path, errno);
  std::string data;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return base::ErrnoError("read", shown_path, errno);
    }
    if (n == 0) return data;
    if (data.size() + static_cast<size_t>(n) > kMaxProcFileBytes) {
      return base::Status::Error(shown_path + ": more than " + std::to_string(kMaxProcFileBytes) +
                                 " bytes");
    }
    data.append(buffer, static_cast<size_t>(n));
  }
}

bool Gone(const base::Status& status) {
  return status.sys_errno() == ESRCH || status.sys_errno() == ENOENT;
}

struct Target {
  int pid = 0;
  ProcStatus status;
  uint64_t start_time = 0;
  std::shared_ptr<base::UniqueFd> dir;  // shared by the requests that name one container
};

int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

}  // namespace

std::string SignalName(int signal) {
  switch (signal) {
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "signal " + std::to_string(signal);
  }
}

base::Result<ContainerId> ParseContainerId(std::string_view container_id) {
  const size_t sep = container_id.find("://");
  if (sep == std::string_view::npos) {
    return base::Status::Error("container ID \"" + std::string(container_id.substr(0, 100)) +
                               "\" is not <runtime>://<id>");
  }
  ContainerId parsed{std::string(container_id.substr(0, sep)),
                     std::string(container_id.substr(sep + 3))};
  if (parsed.runtime != "containerd" && parsed.runtime != "cri-o" && parsed.runtime != "docker") {
    return base::Status::Error("container runtime \"" + parsed.runtime.substr(0, 40) +
                               "\" is not containerd, cri-o or docker");
  }
  if (parsed.id.size() != 64 || !IsLowerHex(parsed.id)) {
    return base::Status::Error("container ID of runtime " + parsed.runtime +
                               " is not 64 lowercase hex digits");
  }
  return parsed;
}

base::Status CheckPodUid(std::string_view pod_uid) {
  const bool valid_chars = std::all_of(pod_uid.begin(), pod_uid.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
  });
  if (pod_uid.empty() || pod_uid.size() > 64 || !valid_chars) {
    return base::Status::Error("pod UID \"" + base::ShowNul(pod_uid.substr(0, 80)) +
                               "\" is not 1 to 64 letters, digits and dashes");
  }
  return base::Status::OK();
}

bool CgroupPathIsContainers(std::string_view path, std::string_view pod_uid, std::string_view id) {
  if (pod_uid.empty() || id.empty()) return false;
  std::vector<std::string_view> components;
  for (std::string_view c : base::Split(path, '/')) {
    if (c.empty()) continue;
    // `..` steps lead from the reader's cgroup namespace root up to the common ancestor: only
    // at the start (no path the kernel writes has one after a name).
    if (c == ".." && !components.empty() && components.back() != "..") return false;
    components.push_back(c);
  }
  // The pod's component directly followed by the container's, whatever `..` steps lead there:
  // below the steps the names are the cgroups' own. A container seen without its pod's component
  // (`/../<id>` or `/<id>`, through the reader's private cgroup namespace) is one of the reader's
  // own pod, never matched.
  for (size_t i = 0; i + 1 < components.size(); ++i) {
    if (IsPodComponent(components[i], pod_uid) && IsContainerComponent(components[i + 1], id)) {
      return true;
    }
  }
  return false;
}

bool CgroupFileNamesContainer(std::string_view cgroup_file, std::string_view pod_uid,
                              std::string_view id) {
  for (std::string_view line : base::Split(cgroup_file, '\n')) {
    // "<hierarchy id>:<controllers>:<path>"; the path itself may hold ':'.
    const size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    if (CgroupPathIsContainers(line.substr(second + 1), pod_uid, id)) return true;
  }
  return false;
}

base::Result<ProcStatus> ParseProcStatus(std::string_view status) {
  ProcStatus parsed;
  bool have_ppid = false, have_nspid = false, have_sigcgt = false;
  for (std::string_view line : base::Split(status, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    const std::string_view value = TrimSpace(line.substr(colon + 1));
    if (key == "PPid") {
      parsed.ppid = ParseNonNegativeInt(value);
      if (parsed.ppid < 0) return base::Status::Error("status: PPid is not a number");
      have_ppid = true;
    } else if (key == "NSpid") {
      for (std::string_view field : base::Split(value, '\t')) {
        field = TrimSpace(field);
        if (field.empty()) continue;
        const int pid = ParseNonNegativeInt(field);
        if (pid <= 0) return base::Status::Error("status: NSpid holds a field that is not a PID");
        parsed.nspid.push_back(pid);
      }
      if (parsed.nspid.empty() || parsed.nspid.size() > 64) {
        return base::Status::Error("status: NSpid has no PID, or more than 64");
      }
      have_nspid = true;
    } else if (key == "SigCgt") {
      if (value.empty() || value.size() > 16 ||
          !std::all_of(value.begin(), value.end(),
                       [](char c) { return base::HexDigitValue(c) >= 0; })) {
        return base::Status::Error("status: SigCgt is not a hex mask");
      }
      parsed.sig_caught = 0;
      for (char c : value) {
        parsed.sig_caught = parsed.sig_caught << 4 | static_cast<uint64_t>(base::HexDigitValue(c));
      }
      have_sigcgt = true;
    }
  }
  if (!have_ppid) return base::Status::Error("status: no PPid line");
  if (!have_nspid) return base::Status::Error("status: no NSpid line (kernel older than 4.1?)");
  if (!have_sigcgt) return base::Status::Error("status: no SigCgt line");
  return parsed;
}

base::Result<uint64_t> ParseProcStatStartTime(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return base::Status::Error("stat: no ')' after the name");
  // Fields 3.. follow the name; the start time is field 22.
  size_t field = 3;
  for (std::string_view token : base::Split(TrimSpace(stat.substr(close + 1)), ' ')) {
    if (field == 22) {
      if (!token.empty() && token.back() == '\n') token.remove_suffix(1);
      uint64_t value = 0;
      const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
      if (ec != std::errc() || end != token.data() + token.size() || token.empty()) break;
      return value;
    }
    ++field;
  }
  return base::Status::Error("stat: no start time (field 22)");
}

namespace {

// The path of the first line of a /proc/PID/cgroup text that shows container `id` without any
// pod's component: `..` steps (or none) then the container's component, what the reader's private
// cgroup namespace shows of a container of the reader's own pod. Empty when there is none. Such a
// process is never a target (CgroupPathIsContainers); this only names why it was not.
std::string PathWithoutPod(std::string_view cgroup_file, std::string_view id) {
  for (std::string_view line : base::Split(cgroup_file, '\n')) {
    const size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view path = line.substr(second + 1);
    std::string_view rest = path;
    while (rest.substr(0, 4) == "/../") rest.remove_prefix(3);
    if (rest.empty() || rest.front() != '/') continue;
    rest.remove_prefix(1);
    if (IsContainerComponent(rest.substr(0, rest.find('/')), id)) return std::string(path);
  }
  return {};
}

// One request of a call, through the scan and after.
struct Pending {
  const ContainerSignal* request = nullptr;
  std::string what;  // "SIGHUP to container app of pod <uid>"
  std::optional<base::Status> failed;
  std::string id;
  // Every process of the container (their PIDs, to tell whose parent is inside), and those that
  // may be the target, each with its /proc/<pid> directory fd.
  std::unordered_set<int> members;
  std::vector<Target> targets;
  // A process that shows the container without the pod's component (never a member), and how.
  int hidden_pod_pid = 0;
  std::string hidden_pod_path;

  base::Status Error(const std::string& message) const {
    return base::Status::Error(what + ": " + message);
  }
  void Fail(const base::Status& status) {
    if (!failed) failed = status.WithContext(what);
  }
};

// One process seen by the scan: its texts read once, whatever number of requests it matches.
struct Seen {
  int pid = 0;
  std::string shown;  // "<proc dir>/<pid>"
  std::shared_ptr<base::UniqueFd> dir;
  std::optional<base::Result<ProcStatus>> status;
  std::optional<base::Result<uint64_t>> start_time;
  bool gone = false;
};

// The text `name` of `seen` parsed by `parse`, read and parsed once into `slot` whatever number
// of requests ask; nullptr when the process is gone, or on an error then given to `pending`.
template <typename T, typename Parse>
const T* ReadOnce(Seen& seen, std::optional<base::Result<T>>& slot, const char* name, Parse parse,
                  Pending& pending) {
  if (!slot) {
    base::Result<std::string> text = ReadAt(seen.dir->get(), name, seen.shown + "/" + name);
    if (!text.ok()) {
      seen.gone = Gone(text.status());
      slot = base::Result<T>(text.status());
    } else {
      base::Result<T> parsed = parse(*text);
      slot = parsed.ok() ? std::move(parsed)
                         : base::Result<T>(parsed.status().WithContext(seen.shown));
    }
  }
  if (seen.gone) return nullptr;
  if (!slot->ok()) {
    pending.Fail(slot->status());
    return nullptr;
  }
  return &slot->value();
}

// Adds `seen`, a process of the container of `pending`, to its members and, when it may be the
// main process, to its targets.
void AddMember(Seen& seen, Pending& pending) {
  const ProcStatus* status = ReadOnce(seen, seen.status, "status", ParseProcStatus, pending);
  if (status == nullptr) return;
  pending.members.insert(seen.pid);
  Target candidate{seen.pid, *status, 0, seen.dir};
  if (!pending.request->share_process_namespace) {
    if (status->nspid.size() < 2 || status->nspid.back() != 1) return;
  } else {
    const uint64_t* start =
        ReadOnce(seen, seen.start_time, "stat", ParseProcStatStartTime, pending);
    if (start == nullptr) return;
    candidate.start_time = *start;
    std::vector<Target>& targets = pending.targets;
    // Only the processes of the oldest clock tick seen so far.
    if (!targets.empty() && candidate.start_time > targets.front().start_time) return;
    if (!targets.empty() && candidate.start_time < targets.front().start_time) targets.clear();
  }
  if (pending.targets.size() == kMaxTargets) {
    pending.Fail(base::Status::Error("more than " + std::to_string(kMaxTargets) +
                                     " processes could be the container's main process"));
    return;
  }
  pending.targets.push_back(std::move(candidate));
}

// Reads every /proc/<pid>/cgroup once, for all requests not failed yet. A failure of the scan
// itself fails them all.
void Scan(std::vector<Pending>& pendings, const SignalEnvironment& env) {
  auto fail_all = [&pendings](const base::Status& status) {
    for (Pending& p : pendings) p.Fail(status);
  };
  base::UniqueFd proc(::open(env.proc_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc.valid()) return fail_all(base::ErrnoError("open", env.proc_dir, errno));
  const int listing_fd = ::fcntl(proc.get(), F_DUPFD_CLOEXEC, 0);
  if (listing_fd < 0) return fail_all(base::ErrnoError("dup of", env.proc_dir, errno));
  std::unique_ptr<DIR, int (*)(DIR*)> listing(::fdopendir(listing_fd), &::closedir);
  if (!listing) {
    const int err = errno;
    ::close(listing_fd);
    return fail_all(base::ErrnoError("list", env.proc_dir, err));
  }
  size_t entries = 0;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(listing.get());
    if (entry == nullptr) {
      if (errno != 0) fail_all(base::ErrnoError("list", env.proc_dir, errno));
      return;
    }
    if (++entries > kMaxProcEntries) {
      return fail_all(base::Status::Error(env.proc_dir + " has more than " +
                                          std::to_string(kMaxProcEntries) + " entries"));
    }
    const int pid = ParseNonNegativeInt(entry->d_name);
    if (pid <= 0) continue;  // ".", "self", "sys", ...
    Seen seen;
    seen.pid = pid;
    seen.shown = env.proc_dir + "/" + entry->d_name;
    const int dir =
        ::openat(proc.get(), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) {
      if (errno == ENOENT || errno == ESRCH) continue;  // exited meanwhile
      return fail_all(base::ErrnoError("open", seen.shown, errno));
    }
    seen.dir = std::make_shared<base::UniqueFd>(dir);
    base::Result<std::string> cgroup = ReadAt(dir, "cgroup", seen.shown + "/cgroup");
    if (!cgroup.ok()) {
      if (Gone(cgroup.status())) continue;
      return fail_all(cgroup.status());
    }
    for (Pending& pending : pendings) {
      if (pending.failed || seen.gone) continue;
      if (CgroupFileNamesContainer(*cgroup, pending.request->pod_uid, pending.id)) {
        AddMember(seen, pending);
      } else if (pending.hidden_pod_pid == 0 && cgroup->find(pending.id) != std::string::npos) {
        pending.hidden_pod_path = PathWithoutPod(*cgroup, pending.id);
        if (!pending.hidden_pod_path.empty()) pending.hidden_pod_pid = pid;
      }
    }
  }
}

// After the scan: the target of `pending`, checked again and signalled.
base::Result<SignalOutcome> Finish(Pending& pending, const SignalEnvironment& env) {
  const ContainerSignal& request = *pending.request;
  if (pending.failed) return *pending.failed;
  if (pending.members.empty() && pending.hidden_pod_pid != 0) {
    return pending.Error("container ID " + request.container_id + " is host PID " +
                         std::to_string(pending.hidden_pod_pid) + "'s cgroup \"" +
                         base::ShowNul(pending.hidden_pod_path.substr(0, 200)) +
                         "\", under no pod's component: through the daemon's cgroup namespace, "
                         "a container of the daemon's own pod, which no action may signal; not "
                         "sent");
  }
  if (pending.members.empty()) {
    return pending.Error("no process of container ID " + request.container_id + " in " +
                         env.proc_dir +
                         " (not on this node, not running, or the daemon does not see the "
                         "host's PIDs: hostPID)");
  }
  // The main process's parent is the runtime's shim, outside the container's cgroup; the init of a
  // PID namespace nested in the container, or a child of the same clock tick, has its parent in it.
  std::vector<Target>& targets = pending.targets;
  std::erase_if(targets,
                [&pending](const Target& t) { return pending.members.contains(t.status.ppid); });
  if (targets.empty()) {
    return pending.Error(request.share_process_namespace
                             ? "none of its " + std::to_string(pending.members.size()) +
                                   " processes is the first one (parent outside the container)"
                             : "none of its " + std::to_string(pending.members.size()) +
                                   " processes is PID 1 of the container's PID namespace (does "
                                   "the pod use hostPID, or shareProcessNamespace without saying "
                                   "so?)");
  }
  if (targets.size() > 1) {
    return pending.Error(
        std::to_string(targets.size()) + " processes could be its main process (host PIDs " +
        std::to_string(targets[0].pid) + ", " + std::to_string(targets[1].pid) + "): not sent");
  }
  Target& target = targets.front();
  SignalOutcome outcome;
  outcome.host_pid = target.pid;
  if (request.share_process_namespace) {
    outcome.target = "first process (host PID " + std::to_string(target.pid) + ", PID " +
                     std::to_string(target.status.nspid.back()) +
                     " in the pod's shared namespace) of container " + request.container_name;
  } else {
    outcome.target = "PID 1 (host PID " + std::to_string(target.pid) + ") of container " +
                     request.container_name;
  }

  // Read again through the same fd, just before sending: a handler removed since the scan (or an
  // exec) is seen, and a process gone since is ESRCH.
  const std::string shown = env.proc_dir + "/" + std::to_string(target.pid);
  base::Result<std::string> status_text = ReadAt(target.dir->get(), "status", shown + "/status");
  if (!status_text.ok()) {
    if (Gone(status_text.status())) {
      return pending.Error(outcome.target + " exited before the signal: not sent");
    }
    return status_text.status().WithContext(pending.what);
  }
  base::Result<ProcStatus> status = ParseProcStatus(*status_text);
  if (!status.ok()) return status.status().WithContext(shown).WithContext(pending.what);
  if ((status->sig_caught >> (request.signal - 1) & 1) == 0) {
    const bool ns_init = status->nspid.size() >= 2 && status->nspid.back() == 1;
    return pending.Error(outcome.target + " has no handler for " + SignalName(request.signal) +
                         " (SigCgt of " + shown + "/status): " +
                         (ns_init ? "the init of a PID namespace drops it, so nothing would reload"
                                  : "its default action would kill the process") +
                         "; not sent");
  }
  if (env.before_signal) env.before_signal(target.pid);
  if (PidfdSendSignal(target.dir->get(), request.signal) != 0) {
    if (errno == ESRCH) {
      return pending.Error(outcome.target + " exited before the signal: not sent");
    }
    return base::ErrnoError("pidfd_send_signal to", shown, errno).WithContext(pending.what);
  }
  return outcome;
}

}  // namespace

std::vector<base::Result<SignalOutcome>> SignalContainers(
    const std::vector<ContainerSignal>& requests, const SignalEnvironment& env) {
  std::vector<Pending> pendings(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const ContainerSignal& request = requests[i];
    Pending& pending = pendings[i];
    pending.request = &request;
    pending.what = SignalName(request.signal) + " to container " +
                   base::ShowNul(request.container_name) + " of pod " +
                   base::ShowNul(request.pod_uid);
    if (request.signal != SIGHUP && request.signal != SIGUSR1 && request.signal != SIGUSR2) {
      pending.failed = pending.Error("only SIGHUP, SIGUSR1 and SIGUSR2 may be sent");
      continue;
    }
    if (base::Status s = CheckPodUid(request.pod_uid); !s.ok()) {
      pending.Fail(s);
      continue;
    }
    base::Result<ContainerId> id = ParseContainerId(request.container_id);
    if (!id.ok()) {
      pending.Fail(id.status());
      continue;
    }
    pending.id = id->id;
  }
  if (std::any_of(pendings.begin(), pendings.end(), [](const Pending& p) { return !p.failed; })) {
    Scan(pendings, env);
  }
  std::vector<base::Result<SignalOutcome>> outcomes;
  outcomes.reserve(pendings.size());
  for (Pending& pending : pendings) outcomes.push_back(Finish(pending, env));
  return outcomes;
}

base::Result<SignalOutcome> SignalContainer(const ContainerSignal& request,
                                            const SignalEnvironment& env) {
  return std::move(SignalContainers({request}, env).front());
}

}  // namespace reload
