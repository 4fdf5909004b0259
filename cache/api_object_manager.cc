#include "cache/api_object_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <list>
#include <utility>

#include "base/catch_all.h"
#include "base/uv_timer.h"
#include "kube/object_decoder.h"
#include "kube/validation.h"
#include "kubeclient/watch/object_store.h"
#include "logging/structured_log.h"

namespace cache {
namespace {

bool IsDecimal(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "/api/v1/namespaces/<ns>/configmaps" (or secrets).
std::string CollectionPath(const kube::ObjectRef& ref) {
  return "/api/v1/namespaces/" + kubeclient::QueryEscape(ref.namespace_) +
         (ref.kind == kube::ObjectKind::kConfigMap ? "/configmaps" : "/secrets");
}

}  // namespace

kubeclient::ReflectorOptions PerObjectReflectorOptions() {
  kubeclient::ReflectorOptions options;
  options.min_watch_timeout = std::chrono::minutes(30);
  options.max_watch_timeout = std::chrono::minutes(60);
  options.resync_period = std::chrono::milliseconds(0);
  return options;
}

// What the pool makes of one object revision.
struct ApiObjectManager::Decoded {
  ObjectRevision revision;
  std::string rv;
  std::string uid;
  bool immutable = false;
  std::string error;  // empty when decoded
};

struct ApiObjectManager::Input {
  enum class Kind {
    kObject,  // an object from a read or the reflector (decoded before it is applied)
    kGone,    // a 404, or the reflector's deletion
    kError,   // a read that failed
    kSynced,  // the reflector completed a list
  };
  Kind kind = Kind::kObject;
  Source source = Source::kRead;
  nlohmann::json object;
  std::optional<Decoded> decoded;
  std::string rv;     // kGone: the deletion's resourceVersion ("" for a 404)
  std::string error;  // kError
  int code = 0;       // kError: the API's HTTP code and Status reason (0 and "": transport)
  std::string reason;
  // Runs once the input is applied (reads: their waiters).
  std::function<void(Entry&, Deferred&)> after;
};

struct ApiObjectManager::Read {
  kubeclient::ApiClient::CallId call = 0;
  // Refused in the refusal grace window: sent again when the entry's retry timer fires.
  bool retry_pending = false;
  std::vector<std::function<void()>> waiters;
};

struct ApiObjectManager::Entry {
  ApiObjectManager* owner = nullptr;
  kube::ObjectRef ref;
  uint64_t id = 0;
  int pods = 0;
  // What gets serve: nullopt until something was read; a revision without an object when the
  // object does not exist.
  std::optional<ObjectRevision> served;
  std::string served_rv;
  std::string served_uid;
  bool immutable = false;
  std::optional<base::Status> error;  // the last failure, while nothing is served
  // The last read failure logged as a warning (`kError` inputs repeat it at debug level until
  // the failure changes or a read succeeds).
  std::unique_ptr<std::string> warned;
  // When a pod last newly referenced the object, and the 403s ignored since (the refusal grace).
  Clock::time_point referenced_at{};
  int refusals_retried = 0;
  uv_timer_t* retry_timer = nullptr;  // the refusal grace's quick re-read (Get, Cache)
  // Cache.
  bool invalidated = false;
  std::optional<Clock::time_point> fetched_at;
  // GETs in flight: for kStrategy (Get, Cache) and quorum reads (kFresh, immutable re-checks).
  std::unique_ptr<Read> read;
  std::unique_ptr<Read> fresh_read;
  // Lists, not deques: an empty std::deque already holds about 600 bytes of heap, and nearly
  // every entry's queues are empty nearly all the time.
  std::list<Input> inbox;
  bool decoding = false;
  // Watch.
  std::unique_ptr<kubeclient::Reflector> reflector;
  bool synced = false;
  std::list<std::pair<Clock::time_point, std::function<void()>>> sync_waiters;
  uv_timer_t* sync_timer = nullptr;

  ~Entry() {
    if (sync_timer != nullptr) {
      base::CloseTimer(sync_timer);
    }
    if (retry_timer != nullptr) base::CloseTimer(retry_timer);
  }
};

struct ApiObjectManager::DecodeWork {
  uv_work_t req;
  ApiObjectManager* self = nullptr;
  std::shared_ptr<bool> alive;
  kube::ObjectRef ref;
  uint64_t entry_id = 0;
  nlohmann::json object;
  Decoded decoded;
};

namespace {

// Whether the strings an object's decode copies, checks and digests (data, binaryData, the
// annotations) add up to at most `limit` bytes. Stops counting past the limit: one look at each
// key, never more than the object holds.
bool DecodeBytesAtMost(const nlohmann::json& object, size_t limit) {
  if (limit == 0 || !object.is_object()) return false;
  size_t bytes = 0;
  auto add = [&](const nlohmann::json& map) {
    if (!map.is_object()) return true;
    for (const auto& [key, value] : map.items()) {
      bytes += key.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0);
      if (bytes > limit) return false;
    }
    return true;
  };
  auto member = [&](const nlohmann::json& j, const char* name) -> const nlohmann::json* {
    auto it = j.find(name);
    return it == j.end() ? nullptr : &*it;
  };
  for (const char* field : {"data", "binaryData"}) {
    if (const nlohmann::json* map = member(object, field); map != nullptr && !add(*map)) {
      return false;
    }
  }
  if (const nlohmann::json* meta = member(object, "metadata");
      meta != nullptr && meta->is_object()) {
    if (const nlohmann::json* notes = member(*meta, "annotations");
        notes != nullptr && !add(*notes)) {
      return false;
    }
  }
  return true;
}

}  // namespace

ApiObjectManager::Decoded ApiObjectManager::DecodeObject(const kube::ObjectRef& ref,
                                                         const nlohmann::json& object) {
  Decoded d;
  base::Status s = base::CatchAll("decoding", [&] {
    d.rv = kubeclient::ObjectStore::ResourceVersionOf(object);
    if (ref.kind == kube::ObjectKind::kConfigMap) {
      base::Result<kube::ConfigMap> cm = kube::DecodeConfigMap(object);
      // What the API server would have refused (a key that is a path, a value that is not
      // UTF-8) is refused as in a manifest: it must not reach a volume.
      if (base::Status valid = cm.ok() ? kube::Validate(*cm) : cm.status(); !valid.ok()) {
        d.error = valid.message();
        return;
      }
      d.uid = cm->metadata.uid;
      d.immutable = cm->immutable.value_or(false);
      d.revision.digest = ContentDigest(*cm);
      d.revision.config_map = std::make_shared<const kube::ConfigMap>(std::move(*cm));
    } else {
      base::Result<kube::Secret> secret = kube::DecodeSecret(object);
      if (base::Status valid = secret.ok() ? kube::Validate(*secret) : secret.status();
          !valid.ok()) {
        d.error = valid.message();
        return;
      }
      d.uid = secret->metadata.uid;
      d.immutable = secret->immutable.value_or(false);
      d.revision.digest = ContentDigest(*secret);
      d.revision.secret = std::make_shared<const kube::Secret>(std::move(*secret));
    }
  });
  if (!s.ok()) {
    d.revision = ObjectRevision{};
    d.error = s.message();
  }
  return d;
}

ApiObjectManager::ApiObjectManager(kubeclient::ApiClient* api, ApiObjectManagerOptions options)
    : api_(api),
      loop_(api->http()->loop()),
      options_(std::move(options)),
      alive_(std::make_shared<bool>(true)) {
  reap_timer_ = base::NewTimer(loop_, this);
}

ApiObjectManager::~ApiObjectManager() {
  Stop();
  *alive_ = false;
  retired_.clear();
  entries_.clear();
  base::CloseTimer(reap_timer_);
}

ApiObjectManager::Clock::time_point ApiObjectManager::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

ApiObjectManager::Entry* ApiObjectManager::Find(const kube::ObjectRef& ref) const {
  auto it = entries_.find(ref);
  return it == entries_.end() ? nullptr : it->second.get();
}

ApiObjectManager::Entry* ApiObjectManager::Find(const kube::ObjectRef& ref, uint64_t id) const {
  Entry* e = Find(ref);
  return e != nullptr && e->id == id ? e : nullptr;
}

size_t ApiObjectManager::RunningReflectors() const {
  size_t n = 0;
  for (const auto& [ref, e] : entries_) n += e->reflector != nullptr;
  return n;
}

uint64_t ApiObjectManager::ReflectorsExpired() const {
  uint64_t n = stats_.expired_of_stopped_reflectors;
  for (const auto& [ref, e] : entries_) {
    if (e->reflector != nullptr) n += static_cast<uint64_t>(e->reflector->stats().expired);
  }
  return n;
}

void ApiObjectManager::RunDeferred(Deferred deferred) {
  std::shared_ptr<bool> alive = alive_;
  for (std::function<void()>& f : deferred) {
    if (!*alive) return;
    base::Status s = base::CatchAll("object manager callback", f);
    if (!s.ok()) spdlog::error("{}", s.message());
  }
}

// ---- registration ----------------------------------------------------------------------------

void ApiObjectManager::RegisterPod(const std::string& pod_uid,
                                   const std::vector<kube::ObjectRef>& refs) {
  Deferred out;
  const std::set<kube::ObjectRef> next(refs.begin(), refs.end());
  const std::set<kube::ObjectRef> old = pods_[pod_uid];
  for (const kube::ObjectRef& ref : next) {
    if (old.count(ref) == 0) AddReference(ref);
  }
  for (const kube::ObjectRef& ref : old) {
    if (next.count(ref) == 0) Release(ref, out);
  }
  if (next.empty()) {
    pods_.erase(pod_uid);
  } else {
    pods_[pod_uid] = next;
  }
  RunDeferred(std::move(out));
}

void ApiObjectManager::UnregisterPod(const std::string& pod_uid) { RegisterPod(pod_uid, {}); }

void ApiObjectManager::AddReference(const kube::ObjectRef& ref) {
  std::unique_ptr<Entry>& slot = entries_[ref];
  const bool created = slot == nullptr;
  if (created) {
    slot = std::make_unique<Entry>();
    slot->owner = this;
    slot->ref = ref;
    slot->id = next_entry_id_++;
  }
  Entry& e = *slot;
  ++e.pods;
  // A pod newly bound: a 403 now may be the Node authorizer not having seen the binding yet.
  e.referenced_at = Now();
  e.refusals_retried = 0;
  // The kubelet (>= 1.29) invalidates only what a pod newly references.
  if (options_.strategy == ChangeDetectionStrategy::kCache) e.invalidated = true;
  if (options_.strategy != ChangeDetectionStrategy::kWatch || stopped_) return;
  if (created) {
    StartReflector(e);
  } else if (e.reflector == nullptr && e.immutable) {
    // An immutable object is no longer watched; a new reference reads it again, so that one
    // deleted and recreated under the same name is not served stale (upstream 131589).
    JoinRead(e, /*fresh=*/true, [] {});
  }
}

void ApiObjectManager::Release(const kube::ObjectRef& ref, Deferred& out) {
  Entry* e = Find(ref);
  if (e == nullptr) return;
  if (--e->pods > 0) return;
  Quiesce(*e, out);
  entries_.erase(ref);
}

void ApiObjectManager::Quiesce(Entry& e, Deferred& out) {
  for (std::unique_ptr<Read>* slot : {&e.read, &e.fresh_read}) {
    if (*slot == nullptr) continue;
    if ((*slot)->call != 0) api_->Cancel((*slot)->call);
    for (auto& w : (*slot)->waiters) out.push_back(std::move(w));
    slot->reset();
  }
  e.inbox.clear();  // a decode in flight finds the entry stopped or gone
  e.decoding = false;
  RetireReflector(e);
  if (e.sync_timer != nullptr) uv_timer_stop(e.sync_timer);
  if (e.retry_timer != nullptr) uv_timer_stop(e.retry_timer);
  for (auto& [deadline, w] : e.sync_waiters) out.push_back(std::move(w));
  e.sync_waiters.clear();
}

void ApiObjectManager::Stop() {
  if (stopped_) return;
  stopped_ = true;
  Deferred out;
  for (auto& [ref, e] : entries_) Quiesce(*e, out);
  RunDeferred(std::move(out));
}

// ---- gets --------------------------------------------------------------------------------------

base::Result<ObjectRevision> ApiObjectManager::Lookup(const kube::ObjectRef& ref) const {
  const Entry* e = Find(ref);
  if (e == nullptr) return NotRegisteredError(ref.namespace_, ref.name);
  if (e->served) return *e->served;
  if (e->error) return *e->error;
  if (options_.strategy == ChangeDetectionStrategy::kWatch) {
    return base::Status::Error(std::string("failed to sync ") + kube::ObjectKindName(ref.kind) +
                               " cache: timed out waiting for the condition");
  }
  return base::Status::Error(std::string(kube::ObjectKindName(ref.kind)) + " \"" + ref.namespace_ +
                             "\"/\"" + ref.name + "\" has not been read from the API server yet");
}

bool ApiObjectManager::Unread(const kube::ObjectRef& ref) const {
  const Entry* e = Find(ref);
  return e != nullptr && !e->served && !e->error;
}

base::Result<ObjectRevision> ApiObjectManager::GetRevision(const kube::ObjectRef& ref) {
  return Lookup(ref);
}

base::Result<std::shared_ptr<const kube::ConfigMap>> ApiObjectManager::GetConfigMap(
    const std::string& ns, const std::string& name) {
  base::Result<ObjectRevision> r = Lookup({kube::ObjectKind::kConfigMap, ns, name});
  if (!r.ok()) return r.status();
  return r->config_map;
}

base::Result<std::shared_ptr<const kube::Secret>> ApiObjectManager::GetSecret(
    const std::string& ns, const std::string& name) {
  base::Result<ObjectRevision> r = Lookup({kube::ObjectKind::kSecret, ns, name});
  if (!r.ok()) return r.status();
  return r->secret;
}

void ApiObjectManager::SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) {
  on_change_ = std::move(handler);
}

void ApiObjectManager::Notify(const kube::ObjectRef& ref) {
  const Entry* e = Find(ref);
  if (on_change_ && e != nullptr && e->pods > 0) on_change_(ref);
}

// ---- fetches -----------------------------------------------------------------------------------

void ApiObjectManager::Fetch(const std::vector<kube::ObjectRef>& refs, FetchMode mode,
                             std::function<void()> done) {
  if (stopped_) {
    done();
    return;
  }
  struct Group {
    int pending = 1;
    std::function<void()> done;
  };
  auto group = std::make_shared<Group>();
  group->done = std::move(done);
  auto arrive = [group] {
    if (--group->pending > 0 || !group->done) return;
    std::function<void()> d = std::move(group->done);
    group->done = nullptr;
    d();
  };
  const std::set<kube::ObjectRef> unique(refs.begin(), refs.end());
  for (const kube::ObjectRef& ref : unique) {
    Entry* e = Find(ref);
    if (e == nullptr) continue;  // not registered: the get says so
    if (mode == FetchMode::kFresh) {
      ++group->pending;
      JoinRead(*e, /*fresh=*/true, arrive);
      continue;
    }
    switch (options_.strategy) {
      case ChangeDetectionStrategy::kGet:
        ++group->pending;
        JoinRead(*e, /*fresh=*/false, arrive);
        break;
      case ChangeDetectionStrategy::kCache:
        if (e->read != nullptr || NeedsCacheRefresh(*e)) {
          ++group->pending;
          JoinRead(*e, /*fresh=*/false, arrive);
        }
        break;
      case ChangeDetectionStrategy::kWatch:
        if (e->fresh_read != nullptr) {  // an immutable object's re-check (or a fresh read)
          ++group->pending;
          JoinRead(*e, /*fresh=*/true, arrive);
        } else if (!e->synced && e->reflector != nullptr && !e->error) {
          ++group->pending;
          AddSyncWaiter(*e, arrive);
        }
        break;
    }
  }
  arrive();
}

bool ApiObjectManager::NeedsCacheRefresh(const Entry& e) const {
  // No good object (never read, an error, or a cached NotFound, which the kubelet keeps as an
  // error and so reads again), a new reference, or older than the TTL.
  if (!e.served || !e.served->exists() || e.invalidated || !e.fetched_at) return true;
  return Now() >= *e.fetched_at + options_.cache_ttl;
}

void ApiObjectManager::JoinRead(Entry& e, bool fresh, std::function<void()> waiter) {
  std::unique_ptr<Read>& slot = fresh ? e.fresh_read : e.read;
  if (slot != nullptr) {
    slot->waiters.push_back(std::move(waiter));
    return;
  }
  slot = std::make_unique<Read>();
  slot->waiters.push_back(std::move(waiter));
  SendRead(e, fresh);
}

void ApiObjectManager::SendRead(Entry& e, bool fresh) {
  std::string path = CollectionPath(e.ref) + "/" + kubeclient::QueryEscape(e.ref.name);
  if (fresh) {
    ++stats_.fresh_gets;
  } else {
    ++stats_.gets;
    // The kubelet refreshes an object it already holds from the API server's cache.
    if (options_.strategy == ChangeDetectionStrategy::kCache && e.served && e.served->exists()) {
      path += "?resourceVersion=0";
    }
  }
  const kube::ObjectRef ref = e.ref;
  const uint64_t id = e.id;
  const kubeclient::ApiClient::CallId call =
      api_->Get(path, [this, ref, id, fresh](kubeclient::ApiResult result) {
        OnRead(ref, id, fresh, std::move(result));
      });
  // The call may have failed (and finished) already inside Get.
  if (Entry* again = Find(ref, id); again != nullptr) {
    std::unique_ptr<Read>& s = fresh ? again->fresh_read : again->read;
    if (s != nullptr && s->call == 0) s->call = call;
  }
}

void ApiObjectManager::OnRead(const kube::ObjectRef& ref, uint64_t id, bool fresh,
                              kubeclient::ApiResult result) {
  Entry* e = Find(ref, id);
  if (e == nullptr || stopped_) return;  // dropped or stopped: its waiters ran then
  std::unique_ptr<Read>& slot = fresh ? e->fresh_read : e->read;
  if (slot != nullptr) slot->call = 0;
  const bool forbidden = slot != nullptr && result.error && result.error->IsForbidden();
  const bool referenced_grace = forbidden && InRefusalGrace(*e);
  if (forbidden && (referenced_grace || InReconnectGrace())) {
    // The pod may be newer than the authorizer's view of it, or the API server just came back
    // and its authorizer's graph is still filling: read again shortly, the waiters still
    // waiting, before the refusal counts.
    std::chrono::milliseconds delay = kRefusalRetryDelay;
    if (referenced_grace) {
      ++e->refusals_retried;
      ++stats_.refusals_retried;
      logging::Debug("Object read refused right after a pod referenced it; reading it again",
                     {{"object", logging::KRef(e->ref)},
                      {"retry", e->refusals_retried},
                      {"err", result.error->ToString()}});
    } else {
      ++stats_.refusals_retried_after_reconnect;
      delay = api_->reachability().options().grace_retry_delay;
      logging::Debug(
          "Object read refused right after the API server answered again; reading it again",
          {{"object", logging::KRef(e->ref)},
           {"delayMs", delay.count()},
           {"err", result.error->ToString()}});
    }
    slot->retry_pending = true;
    if (e->retry_timer == nullptr) e->retry_timer = base::NewTimer(loop_, e);
    uv_timer_start(
        e->retry_timer,
        [](uv_timer_t* t) {
          auto* entry = static_cast<Entry*>(t->data);
          ApiObjectManager* self = entry->owner;
          base::Status s =
              base::CatchAll("refused read retry", [&] { self->RetryRefused(*entry); });
          if (!s.ok()) spdlog::error("{}", s.message());
        },
        static_cast<uint64_t>(delay.count()), 0);
    return;
  }
  Input in;
  in.source = fresh                                                  ? Source::kFresh
              : options_.strategy == ChangeDetectionStrategy::kCache ? Source::kCacheRead
                                                                     : Source::kRead;
  in.after = [this, fresh](Entry& entry, Deferred& out) { FinishRead(entry, fresh, out); };
  if (result.ok()) {
    in.kind = Input::Kind::kObject;
    in.object = std::move(result.object);
  } else if (result.error->IsNotFound()) {
    in.kind = Input::Kind::kGone;
  } else {
    in.kind = Input::Kind::kError;
    in.error = result.error->IsTransport() || result.error->message.empty()
                   ? result.error->ToString()
                   : result.error->message;
    in.code = static_cast<int>(result.error->code);
    in.reason = result.error->reason;
  }
  Deferred out;
  Enqueue(*e, std::move(in), out);
  RunDeferred(std::move(out));
}

void ApiObjectManager::FinishRead(Entry& e, bool fresh, Deferred& out) {
  std::unique_ptr<Read>& slot = fresh ? e.fresh_read : e.read;
  if (slot == nullptr) return;
  for (auto& w : slot->waiters) out.push_back(std::move(w));
  slot.reset();
  // Watch: an object read again while not watched (immutable) is watched again unless it still
  // is an existing immutable object.
  if (fresh && options_.strategy == ChangeDetectionStrategy::kWatch && !stopped_ &&
      e.reflector == nullptr && !(e.immutable && e.served && e.served->exists())) {
    logging::Info("No longer an existing immutable object; watching it again",
                  {{"object", logging::KRef(e.ref)}});
    StartReflector(e);
  }
}

// ---- inputs ------------------------------------------------------------------------------------

void ApiObjectManager::Enqueue(Entry& e, Input input, Deferred& out) {
  e.inbox.push_back(std::move(input));
  ProcessInbox(e, out);
}

void ApiObjectManager::ProcessInbox(Entry& e, Deferred& out) {
  while (!e.decoding && !e.inbox.empty()) {
    Input& front = e.inbox.front();
    if (front.kind == Input::Kind::kObject && !front.decoded &&
        DecodeBytesAtMost(front.object, options_.inline_decode_bytes)) {
      ++stats_.inline_decodes;
      front.decoded = DecodeObject(e.ref, front.object);
      front.object = nullptr;
    }
    if (front.kind == Input::Kind::kObject && !front.decoded) {
      auto work = std::make_unique<DecodeWork>();
      work->req.data = work.get();
      work->self = this;
      work->alive = alive_;
      work->ref = e.ref;
      work->entry_id = e.id;
      work->object = std::move(front.object);
      ++stats_.decodes;
      const int rc = uv_queue_work(
          loop_, &work->req,
          [](uv_work_t* req) {
            auto* w = static_cast<DecodeWork*>(req->data);
            w->decoded = DecodeObject(w->ref, w->object);
            w->object = nullptr;  // the JSON goes here, off the loop
          },
          [](uv_work_t* req, int) {
            std::unique_ptr<DecodeWork> w(static_cast<DecodeWork*>(req->data));
            if (!*w->alive) return;
            ApiObjectManager* self = w->self;
            base::Status s =
                base::CatchAll("object decoded", [&] { self->OnDecoded(std::move(w)); });
            if (!s.ok()) spdlog::error("{}", s.message());
          });
      if (rc == 0) {
        work.release();
        e.decoding = true;
        return;
      }
      front.decoded = DecodeObject(work->ref, work->object);
      continue;
    }
    Input input = std::move(front);
    e.inbox.pop_front();
    Apply(e, input, out);
  }
}

void ApiObjectManager::OnDecoded(std::unique_ptr<DecodeWork> work) {
  Entry* e = Find(work->ref, work->entry_id);
  if (e == nullptr || stopped_ || !e->decoding || e->inbox.empty()) return;
  e->decoding = false;
  e->inbox.front().decoded = std::move(work->decoded);
  Deferred out;
  ProcessInbox(*e, out);
  RunDeferred(std::move(out));
}

void ApiObjectManager::Apply(Entry& e, Input& in, Deferred& out) {
  switch (in.kind) {
    case Input::Kind::kSynced:
      OnSynced(e, out);
      break;
    case Input::Kind::kError:
      ApplyError(e, in, out);
      break;
    case Input::Kind::kGone:
      ApplyRevision(e, in.source, Decoded{ObjectRevision{}, in.rv, "", false, ""}, out);
      break;
    case Input::Kind::kObject:
      if (!in.decoded->error.empty()) {
        logging::Error(e.served ? "Object revision cannot be used; serving the last good revision"
                                : "Object revision cannot be used; nothing to serve yet",
                       {{"object", logging::KRef(e.ref)},
                        {"resourceVersion", in.decoded->rv},
                        {"err", in.decoded->error}});
        if (!e.served) {
          e.error = base::Status::Error(e.ref.ToString() + ": " + in.decoded->error);
        }
      } else {
        ApplyRevision(e, in.source, std::move(*in.decoded), out);
      }
      break;
  }
  if (in.after) in.after(e, out);
}

bool ApiObjectManager::ShouldApply(const Entry& e, Source source, bool exists,
                                   const std::string& rv, const std::string& uid) const {
  if (!e.served) return true;
  if (source == Source::kFresh) {
    // A quorum read replaces only what it proves older.
    if (!exists) return e.served->exists();  // deleted since
    if (!e.served->exists() && e.served_rv.empty()) return true;
    if (IsDecimal(rv) && IsDecimal(e.served_rv))
      return kubeclient::ResourceVersionOlder(e.served_rv, rv);
    return rv != e.served_rv || uid != e.served_uid;
  }
  if (!exists && rv.empty()) return true;  // a 404: the object is gone
  // Anything not older than what is served (the kubelet's cache keeps a newer revision than a
  // stale resourceVersion=0 read).
  return !kubeclient::ResourceVersionOlder(rv, e.served_rv);
}

void ApiObjectManager::ApplyRevision(Entry& e, Source source, Decoded d, Deferred& out) {
  const bool exists = d.revision.exists();
  if (!ShouldApply(e, source, exists, d.rv, d.uid)) {
    logging::Debug("Object revision is not newer than the served one; kept",
                   {{"object", logging::KRef(e.ref)},
                    {"resourceVersion", d.rv},
                    {"servedResourceVersion", e.served_rv}});
    return;
  }
  const bool changed = !e.served || e.served->digest != d.revision.digest;
  const bool first = !e.served;
  const bool existed = e.served && e.served->exists();
  e.served = std::move(d.revision);
  e.served_rv = std::move(d.rv);
  e.served_uid = std::move(d.uid);
  e.immutable = exists && d.immutable;
  e.error.reset();
  e.warned.reset();
  if (source != Source::kWatch) {
    e.fetched_at = Now();
    e.invalidated = false;
  }
  if (changed && first) {
    logging::Debug(exists ? "Object now served" : "Object now absent",
                   {{"object", logging::KRef(e.ref)}, {"resourceVersion", e.served_rv}});
  } else if (changed) {
    // What a pod's volumes read changed: as standalone mode's object store says it.
    logging::Info("Object changed", {{"object", logging::KRef(e.ref)},
                                     {"change", !exists   ? "deleted"
                                                : existed ? "updated"
                                                          : "created"},
                                     {"resourceVersion", e.served_rv}});
  }
  // Get and Cache tell nobody (the kubelet's behaviour); a watch event or a fresh read does.
  if (changed && (source == Source::kWatch || source == Source::kFresh)) {
    out.push_back([this, ref = e.ref] { Notify(ref); });
  }
  if (options_.strategy == ChangeDetectionStrategy::kWatch && e.immutable && e.reflector) {
    logging::Info("Object is immutable: no longer watched, its cached copy is served",
                  {{"object", logging::KRef(e.ref)}});
    ++stats_.immutable_stops;
    RetireReflector(e);
    // Its data can no longer change, so what is served is as good as a completed list.
    if (!e.synced) OnSynced(e, out);
  }
}

// ---- watch -------------------------------------------------------------------------------------

void ApiObjectManager::StartReflector(Entry& e) {
  kubeclient::ReflectorOptions options = options_.reflector;
  options.path = CollectionPath(e.ref);
  options.field_selector = "metadata.name=" + e.ref.name;
  options.kind = e.ref.kind == kube::ObjectKind::kConfigMap ? "ConfigMap" : "Secret";
  options.api_version = "v1";
  // The handlers below hand the new object on and read only the resourceVersion of a deletion:
  // the reflector's store need not hold a second copy of every watched object.
  options.keep_objects = false;
  options.description = e.ref.ToString();
  options.object =
      std::string(kube::ObjectKindName(e.ref.kind)) + "/" + e.ref.namespace_ + "/" + e.ref.name;
  const kube::ObjectRef ref = e.ref;
  const uint64_t id = e.id;
  // Each handler finds its entry again: a stopped reflector's last handler may run after the
  // entry went.
  auto feed = [this, ref, id](Input in) {
    Entry* entry = Find(ref, id);
    if (entry == nullptr || stopped_) return;
    Deferred out;
    Enqueue(*entry, std::move(in), out);
    RunDeferred(std::move(out));
  };
  kubeclient::ReflectorHandlers handlers;
  handlers.on_add = [feed](const nlohmann::json& object) {
    Input in;
    in.source = Source::kWatch;
    in.object = object;
    feed(std::move(in));
  };
  handlers.on_update = [feed](const nlohmann::json&, const nlohmann::json& object) {
    Input in;
    in.source = Source::kWatch;
    in.object = object;
    feed(std::move(in));
  };
  handlers.on_delete = [feed](const nlohmann::json& last) {
    Input in;
    in.kind = Input::Kind::kGone;
    in.source = Source::kWatch;
    in.rv = kubeclient::ObjectStore::ResourceVersionOf(last);
    feed(std::move(in));
  };
  handlers.on_error = [this, feed, ref, id](const kubeclient::ApiError& err) {
    Entry* entry = Find(ref, id);
    if (entry == nullptr || stopped_) return;
    if (err.IsForbidden() && InRefusalGrace(*entry)) {
      // The reflector lists again after its backoff: the refusal counts if that fails too.
      ++entry->refusals_retried;
      ++stats_.refusals_retried;
      logging::Debug("Object list refused right after a pod referenced it; the reflector retries",
                     {{"object", logging::KRef(ref)},
                      {"retry", entry->refusals_retried},
                      {"err", err.ToString()}});
      return;
    }
    if (err.IsForbidden() && InReconnectGrace()) {
      // The reflector relists within the grace's retry delay (reflector.h).
      ++stats_.refusals_retried_after_reconnect;
      logging::Debug(
          "Object list refused right after the API server answered again; the reflector retries",
          {{"object", logging::KRef(ref)}, {"err", err.ToString()}});
      return;
    }
    Input in;
    in.kind = Input::Kind::kError;
    in.source = Source::kWatch;
    in.error = err.message.empty() ? err.ToString() : err.message;
    in.code = static_cast<int>(err.code);
    in.reason = err.reason;
    feed(std::move(in));
  };
  handlers.on_synced = [feed] {
    Input in;
    in.kind = Input::Kind::kSynced;
    in.source = Source::kWatch;
    feed(std::move(in));
  };
  e.reflector =
      std::make_unique<kubeclient::Reflector>(api_, std::move(options), std::move(handlers));
  ++stats_.reflectors_started;
  e.reflector->Start();
}

void ApiObjectManager::RetireReflector(Entry& e) {
  if (e.reflector == nullptr) return;
  e.reflector->Stop();
  stats_.expired_of_stopped_reflectors += static_cast<uint64_t>(e.reflector->stats().expired);
  retired_.push_back(std::move(e.reflector));
  uv_timer_start(
      reap_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<ApiObjectManager*>(t->data);
        base::Status s = base::CatchAll("reflector reaping", [self] { self->retired_.clear(); });
        if (!s.ok()) spdlog::error("{}", s.message());
      },
      0, 0);
}

void ApiObjectManager::OnSynced(Entry& e, Deferred& out) {
  if (e.synced) return;
  e.synced = true;
  if (!e.served) {  // listed, not there
    e.served = ObjectRevision{};
    e.error.reset();
    out.push_back([this, ref = e.ref] { Notify(ref); });
  }
  if (e.sync_timer != nullptr) uv_timer_stop(e.sync_timer);
  for (auto& [deadline, w] : e.sync_waiters) out.push_back(std::move(w));
  e.sync_waiters.clear();
}

void ApiObjectManager::AddSyncWaiter(Entry& e, std::function<void()> waiter) {
  e.sync_waiters.emplace_back(Clock::now() + options_.sync_timeout, std::move(waiter));
  if (e.sync_waiters.size() > 1) return;  // the timer is armed for an earlier deadline
  if (e.sync_timer == nullptr) {
    e.sync_timer = base::NewTimer(loop_, &e);
  }
  ArmSyncTimer(e);
}

void ApiObjectManager::ArmSyncTimer(Entry& e) {
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      e.sync_waiters.front().first - Clock::now());
  uv_timer_start(
      e.sync_timer,
      [](uv_timer_t* t) {
        auto* entry = static_cast<Entry*>(t->data);
        ApiObjectManager* self = entry->owner;
        base::Status s = base::CatchAll("sync wait", [&] { self->OnSyncTimer(*entry); });
        if (!s.ok()) spdlog::error("{}", s.message());
      },
      static_cast<uint64_t>(std::max<long long>(0, wait.count())), 0);
}

void ApiObjectManager::OnSyncTimer(Entry& e) {
  Deferred out;
  const Clock::time_point now = Clock::now();
  while (!e.sync_waiters.empty() && e.sync_waiters.front().first <= now) {
    out.push_back(std::move(e.sync_waiters.front().second));
    e.sync_waiters.pop_front();
  }
  if (!out.empty()) {
    logging::Info("Object not listed in time; its gets fail until it is",
                  {{"object", logging::KRef(e.ref)}, {"timeoutMs", options_.sync_timeout.count()}});
  }
  if (!e.sync_waiters.empty()) ArmSyncTimer(e);
  RunDeferred(std::move(out));
}

bool ApiObjectManager::InRefusalGrace(const Entry& e) const {
  return !e.served && e.refusals_retried < kRefusalRetries &&
         Now() - e.referenced_at < kRefusalGraceWindow;
}

bool ApiObjectManager::InReconnectGrace() const { return api_->reachability().InReconnectGrace(); }

void ApiObjectManager::RetryRefused(Entry& e) {
  if (stopped_) return;
  for (bool fresh : {false, true}) {
    std::unique_ptr<Read>& slot = fresh ? e.fresh_read : e.read;
    if (slot == nullptr || !slot->retry_pending) continue;
    slot->retry_pending = false;
    SendRead(e, fresh);
  }
}

void ApiObjectManager::ApplyError(Entry& e, const Input& in, Deferred& out) {
  base::Status error = base::Status::Error(in.error);
  if (in.code != 0) {
    error = error.WithApiStatus(in.code, in.reason);
    ++stats_.read_errors[{in.code, in.reason}];
  }
  // One warning per object and failure: a refusal retried under backoff for an hour is one
  // line (and one more when the failure changes, or after a success).
  const bool repeated = e.warned != nullptr && *e.warned == in.error;
  logging::Log(repeated ? spdlog::level::debug : spdlog::level::warn,
               e.served ? "Object read failed; serving the last good revision"
                        : "Object read failed; nothing to serve yet",
               {{"object", logging::KRef(e.ref)},
                {"code", in.code != 0 ? logging::Value(in.code) : logging::Value::Absent()},
                {"reason", logging::Value::IfSet(in.reason)},
                {"err", in.error}});
  if (!repeated) e.warned = std::make_unique<std::string>(in.error);
  if (e.served) return;
  const bool was_unread = !e.error;
  e.error = std::move(error);
  if (in.source != Source::kWatch) return;
  // Watch: the list was refused. Nobody need wait for it any longer (a Fetch waiting for the
  // first list completes now, with the error), and a volume that waited for the first read
  // (beside the kubelet) is told, so that its mount fails visibly.
  if (e.sync_timer != nullptr) uv_timer_stop(e.sync_timer);
  for (auto& [deadline, w] : e.sync_waiters) out.push_back(std::move(w));
  e.sync_waiters.clear();
  if (was_unread) out.push_back([this, ref = e.ref] { Notify(ref); });
}

}  // namespace cache
