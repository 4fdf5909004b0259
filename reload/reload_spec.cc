#include "reload/reload_spec.h"

#include <csignal>
#include <string_view>

#include "base/strings.h"
#include "config/go_duration.h"
#include "logging/go_quote.h"

namespace reload {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// RFC 3986 pchar plus '/' and '?' (path and query), with %HH escapes; no fragment.
base::Status CheckPath(std::string_view path) {
  if (path.size() > kMaxPathBytes) {
    return base::Status::Error("path longer than " + std::to_string(kMaxPathBytes) + " bytes");
  }
  for (size_t i = 0; i < path.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(path[i]);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    const bool sub_delim = c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' ||
                           c == '*' || c == '+' || c == ';' || c == '=';
    if (unreserved || sub_delim || c == ':' || c == '@' || c == '/' || c == '?') continue;
    if (c == '%') {
      if (i + 2 < path.size() && IsHex(path[i + 1]) && IsHex(path[i + 2])) {
        i += 2;
        continue;
      }
      return base::Status::Error("'%' in the path must start a %HH escape");
    }
    if (c == '#') return base::Status::Error("a fragment ('#') is not part of a request");
    if (c < 0x20 || c == 0x7f) {
      return base::Status::Error("control character (such as CR or LF) in the path");
    }
    if (c >= 0x80) return base::Status::Error("non-ASCII byte in the path (escape it as %HH)");
    return base::Status::Error(std::string("character '") + static_cast<char>(c) +
                               "' is not allowed in a path (escape it as %HH)");
  }
  return base::Status::OK();
}

base::Result<Action> ParseHttp(std::string_view method, std::string_view url) {
  Action a;
  a.kind = Action::Kind::kHttp;
  if (!method.empty()) {
    if (method != "POST" && method != "PUT" && method != "GET") {
      return base::Status::Error("method " + logging::GoQuote(method) +
                                 " is not one of POST, PUT, GET");
    }
    a.http.method = std::string(method);
  }
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, 8) == "https://") {
    return base::Status::Error("only http:// is supported (no TLS to pods)");
  }
  if (url.substr(0, kScheme.size()) != kScheme) {
    return base::Status::Error("expected http://:PORT/PATH or signal:SIGNAME[@CONTAINER]");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return base::Status::Error("user info is not allowed: the request goes to the pod's own IP");
  }
  if (authority.empty() || authority.front() != ':') {
    return base::Status::Error(
        "the host must be empty (\"http://:PORT/...\"): the request goes "
        "to the pod's own IP, never to a host the annotation names");
  }
  std::string_view port = authority.substr(1);
  if (port.empty() || port.size() > 5) return base::Status::Error("port must be 1-65535");
  unsigned long value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return base::Status::Error("port must be 1-65535");
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value == 0 || value > 65535) return base::Status::Error("port must be 1-65535");
  a.http.port = static_cast<uint16_t>(value);
  std::string full(path);
  if (full.empty() || full.front() != '/') full.insert(0, "/");  // "http://:80?x" is "/?x"
  if (base::Status s = CheckPath(full); !s.ok()) return s;
  a.http.path = std::move(full);
  return a;
}

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

base::Result<Action> ParseSignal(std::string_view spec) {
  Action a;
  a.kind = Action::Kind::kSignal;
  std::string_view name = spec;
  if (const size_t at = spec.find('@'); at != std::string_view::npos) {
    name = spec.substr(0, at);
    const std::string_view container = spec.substr(at + 1);
    if (!IsDnsLabel(container)) {
      return base::Status::Error("container " + logging::GoQuote(container) +
                                 " is not a valid container name");
    }
    a.signal.container = std::string(container);
  }
  if (name == "SIGHUP") {
    a.signal.signal = SIGHUP;
  } else if (name == "SIGUSR1") {
    a.signal.signal = SIGUSR1;
  } else if (name == "SIGUSR2") {
    a.signal.signal = SIGUSR2;
  } else {
    return base::Status::Error("signal " + logging::GoQuote(name) +
                               " is not one of SIGHUP, SIGUSR1, SIGUSR2");
  }
  a.signal.signal_name = std::string(name);
  return a;
}

}  // namespace

std::string Action::Text() const {
  if (kind == Kind::kSignal) {
    return "signal:" + signal.signal_name +
           (signal.container.empty() ? "" : "@" + signal.container);
  }
  return http.method + " http://:" + std::to_string(http.port) + http.path;
}

base::Result<Action> ParseAction(std::string_view item) {
  item = Trim(item);
  if (item.empty()) return base::Status::Error("empty action");
  constexpr std::string_view kSignal = "signal:";
  if (item.substr(0, kSignal.size()) == kSignal) return ParseSignal(item.substr(kSignal.size()));
  std::string_view method;
  const bool bare_url = item.substr(0, 7) == "http://" || item.substr(0, 8) == "https://";
  if (const size_t space = item.find_first_of(" \t");
      !bare_url && space != std::string_view::npos) {
    method = item.substr(0, space);
    item = Trim(item.substr(space));
  }
  return ParseHttp(method, item);
}

base::Result<std::optional<ReloadSpec>> ParseReloadAnnotations(
    const std::map<std::string, std::string>& annotations) {
  const auto reload = annotations.find(kReloadAnnotation);
  const auto volumes = annotations.find(kReloadVolumesAnnotation);
  const auto delay = annotations.find(kReloadDelayAnnotation);
  if (reload == annotations.end()) {
    for (const auto& it : {volumes, delay}) {
      if (it != annotations.end()) {
        return base::Status::Error("annotation " + it->first + " without " + kReloadAnnotation +
                                   ": no action would run");
      }
    }
    return std::optional<ReloadSpec>();
  }
  for (const auto& it : {reload, volumes, delay}) {
    if (it != annotations.end() && it->second.size() > kMaxAnnotationBytes) {
      return base::Status::Error("annotation " + it->first + ": longer than " +
                                 std::to_string(kMaxAnnotationBytes) + " bytes");
    }
  }
  ReloadSpec spec;
  const std::vector<std::string_view> items = base::Split(reload->second, ',');
  if (items.size() > kMaxActions) {
    return base::Status::Error("annotation " + std::string(kReloadAnnotation) + ": more than " +
                               std::to_string(kMaxActions) + " actions");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    base::Result<Action> action = ParseAction(items[i]);
    if (!action.ok()) {
      return base::Status::Error("annotation " + std::string(kReloadAnnotation) + ": action " +
                                 std::to_string(i + 1) + " " + logging::GoQuote(Trim(items[i])) +
                                 ": " + action.status().message());
    }
    for (const Action& seen : spec.actions) {
      if (seen == *action) {
        return base::Status::Error("annotation " + std::string(kReloadAnnotation) + ": action \"" +
                                   seen.Text() + "\" is listed twice");
      }
    }
    spec.actions.push_back(std::move(action).value());
  }
  if (volumes != annotations.end()) {
    std::vector<std::string> names;
    for (std::string_view name : base::Split(volumes->second, ',')) {
      name = Trim(name);
      if (name.empty()) {
        return base::Status::Error("annotation " + std::string(kReloadVolumesAnnotation) +
                                   ": empty volume name");
      }
      names.emplace_back(name);
    }
    spec.volumes = std::move(names);
  }
  if (delay != annotations.end()) {
    auto d = config::ParseGoDuration(std::string(Trim(delay->second)));
    if (!d.ok()) {
      return base::Status::Error("annotation " + std::string(kReloadDelayAnnotation) + ": " +
                                 d.status().message());
    }
    if (*d > kMaxReloadDelay) {
      return base::Status::Error("annotation " + std::string(kReloadDelayAnnotation) +
                                 ": longer than 10m");
    }
    spec.delay = std::chrono::ceil<std::chrono::milliseconds>(*d);
  }
  return std::optional<ReloadSpec>(std::move(spec));
}

}  // namespace reload
