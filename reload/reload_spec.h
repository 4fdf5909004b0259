// ReloadSpec: what a pod asks the daemon to do once new content of its volumes is in place, read
// from its annotations (no CRD; the same in standalone and cluster mode):
//
//   volumemanager.io/reload          one or more actions, comma-separated:
//                                      [METHOD ]http://:PORT/PATH  (METHOD: POST (default), PUT,
//                                      GET) signal:SIGNAME[@CONTAINER]   (SIGHUP, SIGUSR1, SIGUSR2)
//   volumemanager.io/reload-volumes  the volumes that trigger it (default: every volume of the pod
//                                    the daemon refreshes)
//   volumemanager.io/reload-delay    the quiet window that batches changes (Go duration,
//                                    0 to 10m; default 500ms)
//
// The host of an HTTP action is always empty: the request goes to the pod's own IP, which the
// caller decides; a host, user info, a fragment, `https`, or anything in the path that is not a
// path or query character (CR, LF, spaces, non-ASCII, `#`, `\`) is refused here. The parser knows
// nothing of the pod beyond its annotations: which volumes exist, the pod's IP and the mode
// (signals need cluster mode) are checked by the caller.
//
// Plain values and a pure function: safe on any thread.
#ifndef VOLUMEMANAGER_RELOAD_RELOAD_SPEC_H_
#define VOLUMEMANAGER_RELOAD_RELOAD_SPEC_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace reload {

inline constexpr char kReloadAnnotation[] = "volumemanager.io/reload";
inline constexpr char kReloadVolumesAnnotation[] = "volumemanager.io/reload-volumes";
inline constexpr char kReloadDelayAnnotation[] = "volumemanager.io/reload-delay";

inline constexpr std::chrono::milliseconds kDefaultReloadDelay{500};
inline constexpr std::chrono::milliseconds kMaxReloadDelay{10 * 60 * 1000};
// Bounds on what one pod may ask for.
inline constexpr size_t kMaxActions = 8;
inline constexpr size_t kMaxAnnotationBytes = 4096;
inline constexpr size_t kMaxPathBytes = 2048;

struct HttpAction {
  std::string method = "POST";  // POST, PUT or GET
  uint16_t port = 0;            // 1-65535
  std::string path = "/";       // starts with '/', may carry a query

  bool operator==(const HttpAction&) const = default;
};

struct SignalAction {
  int signal = 0;           // SIGHUP, SIGUSR1 or SIGUSR2
  std::string signal_name;  // "SIGHUP"
  // The container to signal; empty: the containers that mount a changed volume.
  std::string container;

  bool operator==(const SignalAction&) const = default;
};

struct Action {
  enum class Kind { kHttp, kSignal };
  Kind kind = Kind::kHttp;
  HttpAction http;
  SignalAction signal;

  // The action as logs, Events and metrics name it: "POST http://:9090/-/reload",
  // "signal:SIGHUP@nginx". Never carries anything but what the annotation said.
  std::string Text() const;
  // The metric label: "http" or "signal".
  const char* KindName() const { return kind == Kind::kHttp ? "http" : "signal"; }

  bool operator==(const Action&) const = default;
};

struct ReloadSpec {
  std::vector<Action> actions;
  // Volume names that trigger the actions; nullopt: the default (every refreshed volume).
  std::optional<std::vector<std::string>> volumes;
  std::chrono::milliseconds delay = kDefaultReloadDelay;

  bool operator==(const ReloadSpec&) const = default;
};

// The pod's reload spec: nullopt when it has no `volumemanager.io/reload` annotation (the other
// two alone are then an error: they would silently do nothing). An error names the annotation,
// the item and the reason.
base::Result<std::optional<ReloadSpec>> ParseReloadAnnotations(
    const std::map<std::string, std::string>& annotations);

// One action item, trimmed ("POST http://:8080/-/reload", "signal:SIGHUP@web").
base::Result<Action> ParseAction(std::string_view item);

}  // namespace reload

#endif  // VOLUMEMANAGER_RELOAD_RELOAD_SPEC_H_
