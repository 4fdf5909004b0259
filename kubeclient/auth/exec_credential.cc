#include "kubeclient/auth/exec_credential.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/catch_all.h"
#include "base/rfc3339.h"
#include "kube/base64.h"

extern char** environ;

namespace kubeclient {
namespace {

// RFC 3339 as Kubernetes writes it ("2026-11-27T21:00:00Z", fractions and offsets allowed), to
// the second (the fraction dropped).
std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& text) {
  const auto t = base::ParseRfc3339(text);
  if (!t) return std::nullopt;
  return std::chrono::floor<std::chrono::seconds>(*t);
}

}  // namespace

base::Result<ExecCredential> ParseExecCredential(const std::string& output,
                                                 const std::string& api_version) {
  nlohmann::json j = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return base::Status::Error("its output is not a JSON object");
  }
  if (j.value("kind", "") != "ExecCredential") {
    return base::Status::Error("its output is not an ExecCredential");
  }
  if (!j.contains("apiVersion") || j["apiVersion"] != api_version) {
    return base::Status::Error("its output's apiVersion is not " + api_version);
  }
  if (!j.contains("status") || !j["status"].is_object()) {
    return base::Status::Error("its output has no status");
  }
  const nlohmann::json& status = j["status"];
  auto text = [&](const char* key) -> std::optional<std::string> {
    if (!status.contains(key) || status[key].is_null()) return std::string();
    if (!status[key].is_string()) return std::nullopt;
    return status[key].get<std::string>();
  };
  ExecCredential credential;
  std::optional<std::string> token = text("token"), cert = text("clientCertificateData"),
                             key = text("clientKeyData"), expiry = text("expirationTimestamp");
  if (!token || !cert || !key || !expiry) {
    return base::Status::Error("its output's status holds a value that is not a string");
  }
  credential.token = *token;
  if (cert->empty() != key->empty()) {
    return base::Status::Error(
        "its output has clientCertificateData or clientKeyData without the other");
  }
  if (!cert->empty()) {
    auto pair = ParseClientCertPair(*cert, *key, "its client certificate");
    if (!pair.ok()) return pair.status();
    credential.cert = std::make_shared<const ClientCertPair>(std::move(*pair));
  }
  if (credential.token.empty() && credential.cert == nullptr) {
    return base::Status::Error("its output has neither a token nor a client certificate");
  }
  if (!expiry->empty()) {
    credential.expiry = ParseTime(*expiry);
    if (!credential.expiry) {
      return base::Status::Error("its output's expirationTimestamp is not an RFC 3339 time");
    }
  }
  return credential;
}

// One run of the plugin. It owns itself: it is freed once its handles are closed, which may be
// after its source is gone (a killed plugin is still waited for, so that it leaves no zombie).
struct ExecCredentialSource::Run {
  ExecCredentialSource* owner = nullptr;
  uv_process_t process{};
  uv_pipe_t out{};
  uv_timer_t timer{};
  std::string output;
  size_t max_output = 0;
  bool spawned = false;
  bool exited = false;
  bool eof = false;
  bool reported = false;
  int64_t exit_status = 0;
  int term_signal = 0;
  std::string failure;  // set: the run failed this way (spawn, timeout, size)
  int open_handles = 0;

  void Kill() {
    if (spawned && !exited) uv_process_kill(&process, SIGKILL);
  }
  void CloseAll() {
    for (uv_handle_t* h :
         {reinterpret_cast<uv_handle_t*>(&out), reinterpret_cast<uv_handle_t*>(&timer),
          reinterpret_cast<uv_handle_t*>(&process)}) {
      if (!uv_is_closing(h)) {
        uv_close(h, [](uv_handle_t* handle) {
          auto* run = static_cast<Run*>(handle->data);
          if (--run->open_handles == 0) delete run;
        });
      }
    }
  }
  // Reports once, as soon as the outcome is known; closes the handles once the child is reaped.
  void Progress() {
    if (!reported && (!failure.empty() || (exited && eof))) {
      reported = true;
      uv_timer_stop(&timer);
      if (owner != nullptr) {
        ExecCredentialSource* source = owner;
        owner = nullptr;
        source->run_ = nullptr;
        base::Status result = base::Status::OK();
        if (!failure.empty()) {
          result = base::Status::Error(failure);
        } else if (term_signal != 0) {
          result = base::Status::Error("killed by signal " + std::to_string(term_signal));
        } else if (exit_status != 0) {
          result = base::Status::Error("exited with status " + std::to_string(exit_status));
        } else {
          result = base::Status::OK();
        }
        base::Status s = base::CatchAll("exec plugin completion", [&] {
          if (!result.ok()) {
            source->Finish(base::Status::Error(source->Describe() + ": " + result.message()));
            return;
          }
          auto credential = ParseExecCredential(output, source->config_.api_version);
          std::string().swap(output);  // the credential's text goes now
          if (!credential.ok()) {
            source->Finish(
                base::Status::Error(source->Describe() + ": " + credential.status().message()));
            return;
          }
          credential->generation = ++source->generation_;
          source->cached_ = std::move(*credential);
          source->Finish(base::Status::OK());
        });
        if (!s.ok()) spdlog::error("{}", s.message());
      }
    }
    if (reported) {
      Kill();
      if (!spawned || exited) CloseAll();
    }
  }
};

ExecCredentialSource::ExecCredentialSource(uv_loop_t* loop, ExecConfig config,
                                           const Credentials& cluster, Options options)
    : loop_(loop),
      config_(std::move(config)),
      options_(std::move(options)),
      alive_(std::make_shared<bool>(true)) {
  if (!options_.wall_clock) options_.wall_clock = [] { return std::chrono::system_clock::now(); };
  nlohmann::json spec = {{"interactive", false}};
  if (config_.provide_cluster_info) {
    nlohmann::json c = {{"server", cluster.server}};
    if (!cluster.tls.server_name.empty()) c["tls-server-name"] = cluster.tls.server_name;
    if (cluster.tls.insecure_skip_tls_verify) c["insecure-skip-tls-verify"] = true;
    if (!cluster.tls.ca_pem.empty()) {
      c["certificate-authority-data"] = kube::EncodeBase64(cluster.tls.ca_pem);
    }
    spec["cluster"] = c;
  }
  exec_info_ = nlohmann::json{
      {"apiVersion", config_.api_version},
      {"kind", "ExecCredential"},
      {"spec",
       spec}}.dump();
}

ExecCredentialSource::~ExecCredentialSource() {
  *alive_ = false;
  if (run_ != nullptr) {
    run_->owner = nullptr;
    run_->reported = true;
    run_->Progress();  // kills the plugin; the run frees itself once it is reaped
  }
}

std::string ExecCredentialSource::Describe() const {
  return "kubeconfig user \"" + config_.user + "\": exec plugin " + config_.command;
}

const ExecCredential* ExecCredentialSource::Cached() {
  if (!cached_) return nullptr;
  if (cached_->expiry && options_.wall_clock() > *cached_->expiry) return nullptr;
  return &*cached_;
}

void ExecCredentialSource::Invalidate() {
  if (run_ == nullptr) cached_.reset();
}

void ExecCredentialSource::Get(std::function<void(base::Status)> done) {
  waiting_.push_back(std::move(done));
  if (run_ == nullptr) Start();
}

void ExecCredentialSource::Finish(base::Status status) {
  if (!status.ok()) spdlog::warn("{}", status.message());
  std::vector<std::function<void(base::Status)>> waiting;
  waiting.swap(waiting_);
  std::weak_ptr<bool> alive = alive_;
  for (auto& done : waiting) {
    base::Status s = base::CatchAll("exec credential callback", [&] { done(status); });
    if (!s.ok()) spdlog::error("{}", s.message());
    if (auto a = alive.lock(); !a || !*a) return;  // a callback destroyed the source
  }
}

void ExecCredentialSource::Start() {
  ++runs_;
  auto* run = new Run;
  run_ = run;
  run->owner = this;
  run->max_output = options_.max_output;
  uv_pipe_init(loop_, &run->out, 0);
  uv_timer_init(loop_, &run->timer);
  run->out.data = run->timer.data = run->process.data = run;
  run->open_handles = 3;

  std::vector<std::string> args = {config_.command};
  args.insert(args.end(), config_.args.begin(), config_.args.end());
  std::vector<std::string> env;
  auto overridden = [&](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('='));
    if (name == "KUBERNETES_EXEC_INFO") return true;
    for (const auto& [n, v] : config_.env) {
      if (n == name) return true;
    }
    return false;
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (!overridden(*e)) env.emplace_back(*e);
  }
  for (const auto& [name, value] : config_.env) env.push_back(name + "=" + value);
  env.push_back("KUBERNETES_EXEC_INFO=" + exec_info_);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;  // /dev/null: never a terminal
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(&run->out);
  stdio[2].flags = UV_IGNORE;  // may hold anything, the credential included
  uv_process_options_t options{};
  options.file = argv[0];
  options.args = argv.data();
  options.env = envp.data();
  options.stdio = stdio;
  options.stdio_count = 3;
  options.exit_cb = [](uv_process_t* process, int64_t status, int signal) {
    auto* r = static_cast<Run*>(process->data);
    r->exited = true;
    r->exit_status = status;
    r->term_signal = signal;
    r->Progress();
  };
  const int rc = uv_spawn(loop_, &run->process, &options);
  run->process.data = run;
  if (rc != 0) {
    run->failure = std::string("cannot run it: ") + uv_strerror(rc);
    if (rc == UV_ENOENT && !config_.install_hint.empty()) {
      run->failure += " (" + config_.install_hint + ")";
    }
    // Reported from the loop, never inside Get().
    uv_timer_start(
        &run->timer, [](uv_timer_t* t) { static_cast<Run*>(t->data)->Progress(); }, 0, 0);
    return;
  }
  run->spawned = true;
  uv_timer_start(
      &run->timer,
      [](uv_timer_t* t) {
        auto* r = static_cast<Run*>(t->data);
        r->failure = "killed after running longer than its time limit";
        r->Progress();
      },
      static_cast<uint64_t>(options_.timeout.count()), 0);
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&run->out),
      [](uv_handle_t*, size_t suggested, uv_buf_t* buf) {
        buf->base = new (std::nothrow) char[suggested];
        buf->len = buf->base == nullptr ? 0 : suggested;
      },
      [](uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
        auto* r = static_cast<Run*>(stream->data);
        std::unique_ptr<char[]> owned(buf->base);
        if (n == UV_EOF || n < 0) {
          uv_read_stop(stream);
          r->eof = true;
        } else if (!r->reported) {
          if (r->output.size() + static_cast<size_t>(n) > r->max_output) {
            r->failure =
                "killed after writing more than " + std::to_string(r->max_output) + " bytes";
            uv_read_stop(stream);
          } else {
            r->output.append(buf->base, static_cast<size_t>(n));
          }
        }
        r->Progress();
      });
}

}  // namespace kubeclient
