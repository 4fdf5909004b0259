"""Fault injection rules, set by tests through the admin endpoint (`POST /_admin/faults`).

A rule matches requests by verb (get, list, watch, create, update, patch, delete), resource
(`pods/status` for the status subresource), namespace, path prefix and authenticated user (each
optional) and applies `times` times (-1: until cleared); the first matching rule with uses left
wins. What it does, any combination:

  has_param      only requests carrying this query parameter (e.g. "continue")
  compact        compact the history first (forces 410 for older RVs and continue tokens)
  delay          seconds to wait before answering
  reset          reset the connection instead of answering (any verb; as a proxy or a crashed
                 server would), after `delay`
  status         answer this HTTP code instead; `body` is "status" (a Status, default), "text"
                 (text/plain, as the inflight limiter), "html" (as a proxy) or "empty";
                 `retry_after` adds Retry-After (and details.retryAfterSeconds); `cause`
                 adds details.causes[0].reason (e.g. ResourceVersionTooLarge)
  watch          for watches only, a dict:
                   close_after_events N  end the stream after N events
                   close_after_bytes N   cut the stream after N bytes of events (mid-event)
                   abort                 end by resetting the connection, not by the last chunk
                   stall                 send headers, then nothing until dropped
                   end_immediately       send headers, then end with no events
                   inject                [{"after": N, "kind": K, ...}] with K one of
                                         invalid_json, unknown_type, wrong_kind, non_object,
                                         oversized (with "size"), error (with "code", "reason"),
                                         raw (with "line": any text, sent as one line)
"""


class FaultRule:
    def __init__(self, spec):
        self.verb = spec.get("verb")
        self.resource = spec.get("resource")
        self.namespace = spec.get("namespace")
        self.path = spec.get("path")
        self.user = spec.get("user")
        self.has_param = spec.get("has_param")
        self.compact = bool(spec.get("compact"))
        self.times = int(spec.get("times", 1))
        self.delay = float(spec.get("delay", 0))
        self.reset = bool(spec.get("reset"))
        self.status = spec.get("status")
        self.body = spec.get("body", "status")
        self.reason = spec.get("reason")
        self.message = spec.get("message")
        self.retry_after = spec.get("retry_after")
        self.watch = spec.get("watch") or {}
        self.spec = spec

    def matches(self, verb, resource, namespace, path, query, user=None):
        if self.times == 0:
            return False
        if self.user and self.user != user:
            return False
        if self.has_param and self.has_param not in query:
            return False
        if self.verb and self.verb != verb:
            return False
        if self.resource and self.resource != resource:
            return False
        if self.namespace and self.namespace != namespace:
            return False
        if self.path and not path.startswith(self.path):
            return False
        return True


class FaultTable:
    def __init__(self):
        self.rules = []

    def add(self, spec):
        self.rules.append(FaultRule(spec))

    def clear(self):
        self.rules.clear()

    def take(self, verb, resource, namespace, path, query, user=None):
        """The rule to apply to this request (its use counted), or None."""
        for rule in self.rules:
            if rule.matches(verb, resource, namespace, path, query, user):
                if rule.times > 0:
                    rule.times -= 1
                return rule
        return None
