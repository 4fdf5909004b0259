#include "kubeclient/api_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/catch_all.h"
#include "base/uv_timer.h"

namespace kubeclient {

struct ApiClient::Call {
  CallId id = 0;
  std::string method;
  std::string path;
  std::string body;
  std::string content_type;
  ApiCallback done;
  int retry_after_used = 0;
  int transient_used = 0;
  // Created on the first transient retry: streams (a watch per watched object) never retry.
  std::unique_ptr<Backoff> backoff;
  HttpClient::RequestId request = 0;
  bool in_flight = false;
  RateLimiter::Ticket ticket = 0;  // waiting for a rate-limiter token
  uv_timer_t* timer = nullptr;
  ApiClient* client = nullptr;  // for the retry timer and the reconnect wait
  // Waiting for the server to answer again (a GET retry after no answer), besides the timer.
  ServerReachability::Ticket reconnect_wait = 0;
  // The reachability probe: sent once, never retried, with the probe's timeout.
  bool probe = false;
  // A stream (Stream()): sent once as given, its outcome handed over as HttpClient reports it.
  bool stream = false;
  HttpRequest stream_request;
  HttpDoneCallback stream_done;
  StreamCallbacks stream_callbacks;
  std::function<void()> on_start;

  ~Call() {
    if (timer != nullptr) {
      base::CloseTimer(timer);
    }
    if (reconnect_wait != 0) client->reachability_->CancelWait(reconnect_wait);
  }
};

ApiClient::ApiClient(HttpClient* http, RetryPolicy policy, RateLimiterOptions limits,
                     ReachabilityOptions reachability)
    : http_(http), policy_(policy), limiter_(http->loop(), std::move(limits)) {
  reachability_ = std::make_unique<ServerReachability>(
      http->loop(), std::move(reachability),
      [this](std::function<void(bool)> done) { SendProbe(std::move(done)); });
}

ApiClient::~ApiClient() {
  for (auto& [id, call] : calls_) {
    if (call->in_flight) http_->Cancel(call->request);
  }
}

ApiClient::CallId ApiClient::Get(std::string path, ApiCallback done) {
  return StartCall("GET", std::move(path), "", "", std::move(done));
}

ApiClient::CallId ApiClient::Create(std::string collection_path, const nlohmann::json& object,
                                    ApiCallback done) {
  return StartCall("POST", std::move(collection_path), object.dump(), "application/json",
                   std::move(done));
}

ApiClient::CallId ApiClient::Update(std::string object_path, const nlohmann::json& object,
                                    ApiCallback done) {
  return StartCall("PUT", std::move(object_path), object.dump(), "application/json",
                   std::move(done));
}

ApiClient::CallId ApiClient::Patch(std::string object_path, const nlohmann::json& patch,
                                   std::string content_type, ApiCallback done) {
  return StartCall("PATCH", std::move(object_path), patch.dump(), std::move(content_type),
                   std::move(done));
}

ApiClient::CallId ApiClient::Delete(std::string object_path, ApiCallback done) {
  return StartCall("DELETE", std::move(object_path), "", "", std::move(done));
}

ApiClient::CallId ApiClient::Stream(HttpRequest request, HttpDoneCallback done,
                                    StreamCallbacks stream, std::function<void()> on_start) {
  auto call = std::make_unique<Call>();
  call->id = next_id_++;
  call->client = this;
  call->method = request.method;
  call->path = request.path;
  call->stream = true;
  call->stream_request = std::move(request);
  call->stream_done = std::move(done);
  call->stream_callbacks = std::move(stream);
  call->on_start = std::move(on_start);
  Call* c = call.get();
  calls_[c->id] = std::move(call);
  Attempt(c);
  return c->id;
}

void ApiClient::Cancel(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  if (it->second->in_flight) http_->Cancel(it->second->request);
  limiter_.Cancel(it->second->ticket);
  calls_.erase(it);
}

ApiClient::CallId ApiClient::StartCall(std::string method, std::string path, std::string body,
                                       std::string content_type, ApiCallback done) {
  auto call = std::make_unique<Call>();
  call->id = next_id_++;
  call->client = this;
  call->method = std::move(method);
  call->path = std::move(path);
  call->body = std::move(body);
  call->content_type = std::move(content_type);
  call->done = std::move(done);
  Call* c = call.get();
  calls_[c->id] = std::move(call);
  Attempt(c);
  return c->id;
}

void ApiClient::Attempt(Call* call) {
  const CallId id = call->id;
  const RateLimiter::Ticket ticket = limiter_.Acquire([this, id] {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    it->second->ticket = 0;
    base::Status s = base::CatchAll("API request start", [&] { Send(it->second.get()); });
    if (!s.ok()) Fail(id, s.message());
  });
  // 0: sent already (and possibly finished); else the call waits for a token.
  if (ticket != 0) calls_.at(id)->ticket = ticket;
}

void ApiClient::Send(Call* call) {
  const CallId id = call->id;
  call->in_flight = true;
  if (call->stream) {
    std::function<void()> on_start = std::move(call->on_start);
    // The server answered once the head arrives (a watch's 200 comes long before its end).
    StreamCallbacks callbacks = std::move(call->stream_callbacks);
    callbacks.on_headers = [this, on_headers =
                                      std::move(callbacks.on_headers)](const HttpResponse& head) {
      reachability_->OnAnswer();
      if (health_ != nullptr && head.status >= 200 && head.status < 300) {
        health_->OnOutcome(std::nullopt);
      }
      if (on_headers) on_headers(head);
    };
    call->request = http_->Start(
        std::move(call->stream_request),
        [this, id](base::Status transport, HttpResponse response) {
          auto it = calls_.find(id);
          if (it == calls_.end()) return;
          CountRequest(it->second->method, transport, response.status);
          if (response.status != 0) {
            reachability_->OnAnswer();
          } else if (!transport.ok()) {
            reachability_->OnNoAnswer();
          }
          // A 2xx head was reported when it came; a stream cut after it is no failure here.
          if (response.status < 200 || response.status >= 300) {
            ReportHealth(transport, response, it->second->method);
          }
          HttpDoneCallback done = std::move(it->second->stream_done);
          calls_.erase(it);
          if (done) done(std::move(transport), std::move(response));
        },
        std::move(callbacks));
    if (on_start) on_start();
    return;
  }
  HttpRequest request;
  request.method = call->method;
  request.path = call->path;
  request.body = call->body;
  request.content_type = call->content_type;
  if (call->probe) request.timeout = reachability_->options().probe_timeout;
  call->request =
      http_->Start(std::move(request), [this, id](base::Status transport, HttpResponse response) {
        base::Status s = base::CatchAll("API response handling", [&] {
          OnDone(id, std::move(transport), std::move(response));
        });
        if (!s.ok()) Complete(id, ApiResult{TransportError(s.message()), nullptr});
      });
}

void ApiClient::Fail(CallId id, const std::string& why) {
  base::CatchAll("API completion", [&] {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    spdlog::error("{} {}: {}", it->second->method, it->second->path, why);
    if (!it->second->stream) {
      Complete(id, ApiResult{TransportError(why), nullptr});
      return;
    }
    if (it->second->in_flight) http_->Cancel(it->second->request);
    HttpDoneCallback done = std::move(it->second->stream_done);
    calls_.erase(it);
    if (done) done(base::Status::Error(why), HttpResponse{});
  }).IgnoreError();  // only an allocation failure, with nothing left to report it with
}

void ApiClient::RetryLater(Call* call, std::chrono::milliseconds delay) {
  if (call->timer == nullptr) {
    call->timer = base::NewTimer(http_->loop(), nullptr);
  }
  // The timer belongs to the call, so it cannot fire after the call (or this client) is gone;
  // it names its call directly (a search of every call per firing made 10,000 calls retrying
  // after a 502 storm cost seconds of loop time).
  call->timer->data = call;
  call->client = this;
  uv_timer_start(
      call->timer,
      [](uv_timer_t* h) {
        auto* c = static_cast<Call*>(h->data);
        ApiClient* self = c->client;
        const CallId call_id = c->id;
        if (c->reconnect_wait != 0) {
          self->reachability_->CancelWait(c->reconnect_wait);
          c->reconnect_wait = 0;
        }
        base::Status s = base::CatchAll("API retry timer", [&] { self->Attempt(c); });
        if (!s.ok()) self->Fail(call_id, s.message());
      },
      static_cast<uint64_t>(std::max<long long>(0, delay.count())), 0);
}

void ApiClient::CountRequest(const std::string& method, const base::Status& transport,
                             long status) {
  ++request_counts_[{method, transport.ok() ? std::to_string(status) : "<error>"}];
}

void ApiClient::SetHealth(ApiHealth* health) {
  health_ = health;
  reachability_->SetOutageLogLevel(health != nullptr ? spdlog::level::info : spdlog::level::warn);
}

void ApiClient::ReportHealth(const base::Status& transport, const HttpResponse& response,
                             const std::string& method) {
  if (health_ == nullptr) return;
  if (response.status == 0) {
    if (!transport.ok()) health_->OnOutcome(TransportError(transport.message(), response.fault));
  } else if (response.status >= 200 && response.status < 300) {
    health_->OnOutcome(std::nullopt);
  } else {
    // Any other answer than 401, 429 or 5xx (403, 404, ...) counts as the server reached.
    health_->OnOutcome(ParseApiError(response.status, response.headers, response.body, method));
  }
}

void ApiClient::SendProbe(std::function<void(bool answered)> done) {
  auto call = std::make_unique<Call>();
  call->id = next_id_++;
  call->client = this;
  call->method = "GET";
  call->path = reachability_->options().probe_path;
  call->probe = true;
  call->done = [done = std::move(done)](ApiResult result) {
    done(result.ok() || !result.error->IsTransport());
  };
  Call* c = call.get();
  calls_[c->id] = std::move(call);
  Attempt(c);
}

void ApiClient::OnReconnect(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call* call = it->second.get();
  call->reconnect_wait = 0;
  if (call->timer != nullptr) uv_timer_stop(call->timer);
  spdlog::info("{} {}: the server answers again; retrying now", call->method, call->path);
  base::Status s = base::CatchAll("API reconnect retry", [&] { Attempt(call); });
  if (!s.ok()) Fail(id, s.message());
}

std::chrono::milliseconds ApiClient::NextBackoff(Call* call) {
  if (call->backoff == nullptr) call->backoff = std::make_unique<Backoff>(policy_.backoff);
  return call->backoff->Next();
}

void ApiClient::OnDone(CallId id, base::Status transport, HttpResponse response) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call* call = it->second.get();
  call->in_flight = false;
  CountRequest(call->method, transport, response.status);
  if (transport.ok()) {
    reachability_->OnAnswer();
  } else {
    reachability_->OnNoAnswer();
  }
  ReportHealth(transport, response, call->method);
  const bool idempotent = call->method == "GET" && !call->probe;
  if (!transport.ok()) {
    if (idempotent && call->transient_used < policy_.max_transient_retries) {
      ++call->transient_used;
      auto delay = NextBackoff(call);
      // A permanent failure is the health tracker's to say (error level, rate-limited).
      spdlog::log(
          health_ != nullptr && health_->permanent() ? spdlog::level::debug : spdlog::level::info,
          "GET {} failed ({}); retry {} in {} ms or once the server answers again", call->path,
          transport.message(), call->transient_used, delay.count());
      RetryLater(call, delay);
      call->reconnect_wait = reachability_->WaitForAnswer([this, id] { OnReconnect(id); });
      return;
    }
    Complete(id, ApiResult{TransportError(transport.message(), response.fault), nullptr});
    return;
  }
  if (response.status >= 200 && response.status < 300) {
    nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
    if (body.is_discarded()) {
      ApiError err;
      err.code = response.status;
      err.reason = "InvalidResponse";
      err.message = "the server answered " + std::to_string(response.status) +
                    " with a body that is not JSON";
      Complete(id, ApiResult{err, nullptr});
      return;
    }
    Complete(id, ApiResult{std::nullopt, std::move(body)});
    return;
  }
  ApiError err = ParseApiError(response.status, response.headers, response.body, call->method);
  if (err.IsUnauthorized()) http_->InvalidateToken();
  const bool retryable_code = err.code == 429 || err.code >= 500;
  if (retryable_code && err.retry_after_seconds >= 0 && !call->probe &&
      call->retry_after_used < policy_.max_retry_after) {
    ++call->retry_after_used;
    auto wait = std::min<std::chrono::milliseconds>(std::chrono::seconds(err.retry_after_seconds),
                                                    policy_.max_retry_after_wait);
    spdlog::info("{} {}: {}; retrying after {} s (Retry-After, attempt {})", call->method,
                 call->path, err.ToString(), wait.count() / 1000, call->retry_after_used);
    RetryLater(call, wait);
    return;
  }
  if (idempotent && err.code >= 500 && err.retry_after_seconds < 0 &&
      call->transient_used < policy_.max_transient_retries) {
    ++call->transient_used;
    auto delay = NextBackoff(call);
    // Said as for a transport failure: an API server answering 5xx is otherwise silent until
    // every retry is spent (tens of seconds).
    spdlog::info("GET {}: {}; retry {} in {} ms", call->path, err.ToString(), call->transient_used,
                 delay.count());
    RetryLater(call, delay);
    return;
  }
  Complete(id, ApiResult{std::move(err), nullptr});
}

void ApiClient::Complete(CallId id, ApiResult result) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  ApiCallback done = std::move(it->second->done);
  calls_.erase(it);
  if (!done) return;
  base::Status s = base::CatchAll("API completion callback", [&] { done(std::move(result)); });
  if (!s.ok()) spdlog::error("{}", s.message());
}

std::string QueryEscape(const std::string& value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace kubeclient
