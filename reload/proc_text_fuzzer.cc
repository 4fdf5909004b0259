// libFuzzer target for the /proc texts and IDs the signal action parses (signal_action.h). The
// input is split at its first two NUL bytes into a text, a pod UID and a container ID. Whatever
// they hold:
//  * ParseProcStatus: an error says why; a parse has 1 to 64 NSpid fields, each a positive PID;
//  * ParseProcStatStartTime of a stat line whose command name is the text (any bytes, ")" and
//    spaces included) gives back the start time it was built with;
//  * ParseContainerId: a parse is a known runtime and 64 lowercase hex digits, and spells the
//    input back; CheckPodUid accepts only 1 to 64 of [0-9A-Za-z-];
//  * CgroupPathIsContainers never matches a path that does not hold the container ID, nor one
//    that names no pod component; any path below a matching cgroup matches;
//    CgroupFileNamesContainer is the OR of its lines.
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/strings.h"
#include "reload/signal_action.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// The third field of a cgroup line; the whole line when it has no two colons.
std::string_view PathOf(std::string_view line) {
  const size_t first = line.find(':');
  if (first == std::string_view::npos) return {};
  const size_t second = line.find(':', first + 1);
  if (second == std::string_view::npos) return {};
  return line.substr(second + 1);
}

void CheckCgroupPath(std::string_view path, const std::string& uid, const std::string& id) {
  const bool match = reload::CgroupPathIsContainers(path, uid, id);
  if (!match) return;
  Check(path.find(id) != std::string_view::npos);
  std::string underscored = uid;
  for (char& c : underscored) {
    if (c == '-') c = '_';
  }
  // Never without the pod's component: a container seen without it (through the reader's
  // private cgroup namespace) is one of the reader's own pod.
  Check(path.find("pod" + uid) != std::string_view::npos ||
        path.find("pod" + underscored + ".slice") != std::string_view::npos);
  // Anything below the container's cgroup is the container's.
  Check(reload::CgroupPathIsContainers(std::string(path) + "/sub/..x", uid, id));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul1 = input.find('\0');
  const std::string text = input.substr(0, nul1);
  std::string uid, container_id;
  if (nul1 != std::string::npos) {
    const size_t nul2 = input.find('\0', nul1 + 1);
    uid = input.substr(nul1 + 1, nul2 == std::string::npos ? std::string::npos : nul2 - nul1 - 1);
    if (nul2 != std::string::npos) container_id = input.substr(nul2 + 1);
  }

  base::Result<reload::ProcStatus> status = reload::ParseProcStatus(text);
  if (status.ok()) {
    Check(!status->nspid.empty() && status->nspid.size() <= 64);
    for (int pid : status->nspid) Check(pid > 0);
    Check(status->ppid >= 0);
  } else {
    Check(!status.status().message().empty());
  }

  const uint64_t start = size * 7919u;
  const std::string stat = "4242 (" + text +
                           ") S 1 4242 4242 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 1 0 " +
                           std::to_string(start) + " 123 45 18446744073709551615\n";
  base::Result<uint64_t> parsed_start = reload::ParseProcStatStartTime(stat);
  Check(parsed_start.ok() && *parsed_start == start);
  (void)reload::ParseProcStatStartTime(text);

  base::Result<reload::ContainerId> id = reload::ParseContainerId(container_id);
  if (id.ok()) {
    Check(id->runtime == "containerd" || id->runtime == "cri-o" || id->runtime == "docker");
    Check(id->id.size() == 64);
    for (char c : id->id) Check((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    Check(id->runtime + "://" + id->id == container_id);
  } else {
    Check(!id.status().message().empty());
  }
  if (reload::CheckPodUid(uid).ok()) {
    Check(!uid.empty() && uid.size() <= 64);
    for (char c : uid) {
      Check((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-');
    }
  }

  // The text as a /proc/PID/cgroup file, against the UID and the ID (as parsed, or a fixed one
  // the text may spell, so matches are reachable without a valid third part).
  const std::string cid = id.ok() ? id->id : std::string(64, 'a');
  const std::string puid = reload::CheckPodUid(uid).ok() ? uid : "u-1";
  bool any = false;
  for (std::string_view line : base::Split(text, '\n')) {
    const std::string_view path = PathOf(line);
    any = any || (line.find(':') != std::string_view::npos &&
                  line.find(':', line.find(':') + 1) != std::string_view::npos &&
                  reload::CgroupPathIsContainers(path, puid, cid));
    CheckCgroupPath(path, puid, cid);
  }
  Check(reload::CgroupFileNamesContainer(text, puid, cid) == any);
  CheckCgroupPath(text, puid, cid);
  return 0;
}
