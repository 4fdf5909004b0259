"""Versioned object storage with a bounded history, snapshots at past revisions and watchers.

One global revision counter, as in etcd: every create, update and delete takes the next value as
its resourceVersion; a no-op update keeps the old one. The history of changes is kept for a window
(count and age, both settable, plus "compact now"); a past revision inside the window can be
listed exactly (snapshots are rebuilt by undoing later changes) and watched from. Everything runs
on the server's one asyncio loop, so registering a watcher and replaying history is atomic.
"""

import asyncio
import collections
import copy
import json
import time
import uuid

from .resources import RESOURCES, default_and_validate
from .status import already_exists, conflict, invalid, not_found


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Change:
    """One committed change. `prev` is the state before (None on create), `cur` after (None on
    delete)."""

    __slots__ = ("rev", "resource", "key", "type", "prev", "cur", "time")

    def __init__(self, rev, resource, key, type_, prev, cur):
        self.rev = rev
        self.resource = resource
        self.key = key
        self.type = type_
        self.prev = prev
        self.cur = cur
        self.time = time.monotonic()

    def deleted_object(self):
        """What a DELETED event carries: the last state, with the deletion's resourceVersion."""
        obj = copy.deepcopy(self.prev)
        obj["metadata"]["resourceVersion"] = str(self.rev)
        return obj


class Watcher:
    """One watch's view of the change stream. Events are filtered by namespace and selectors,
    with the selector transitions of docs/kubernetes-api.md §4.1, and queued for the HTTP handler."""

    def __init__(self, resource, namespace, field_selector, label_selector, min_rev):
        self.resource = resource
        self.namespace = namespace
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.min_rev = min_rev
        self.queue = asyncio.Queue()
        self.seen_rev = min_rev
        # A watch pinned to one name (metadata.name=<x>, the kubelet's per-object watches) only
        # needs to see changes to that name: the store indexes it so a change costs O(matching
        # watches), not O(all watches).
        self.pinned_name = field_selector.exact_name()

    def matches(self, obj):
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.field_selector.matches(obj) and self.label_selector.matches(obj)

    def event_for(self, change):
        """The watch event this watcher sees for `change`, or None."""
        if change.resource != self.resource or change.rev <= self.min_rev:
            return None
        was, now = self.matches(change.prev), self.matches(change.cur)
        if change.type == "DELETED":
            return ("DELETED", change.deleted_object()) if was else None
        if now and not was:
            return ("ADDED", copy.deepcopy(change.cur))
        if now and was:
            return ("MODIFIED", copy.deepcopy(change.cur))
        if was and not now:
            # Stopped matching: the old state, stamped with this change's resourceVersion.
            return ("DELETED", change.deleted_object())
        return None

    def offer(self, change):
        event = self.event_for(change)
        if change.rev > self.seen_rev:
            self.seen_rev = change.rev
        if event is not None:
            self.queue.put_nowait(("event", event))

    def close(self, abort=False):
        self.queue.put_nowait(("close", abort))


class Store:
    def __init__(self, initial_revision=100):
        self.revision = initial_revision
        # Changes with rev <= compacted_rev are gone: watching or listing exactly at an older
        # revision answers 410.
        self.compacted_rev = initial_revision
        self.objects = {name: {} for name in RESOURCES}
        self.history = collections.deque()
        self.watchers = set()
        self.pinned = {}  # (resource, name) -> set of watchers pinned to that name
        self.unpinned = {}  # resource -> set of the other watchers
        self.max_history_events = 100000
        self.max_history_age = 300.0

    # ---- history window ----------------------------------------------------------------------

    def trim_history(self):
        cutoff = time.monotonic() - self.max_history_age
        while self.history and (len(self.history) > self.max_history_events
                                or self.history[0].time < cutoff):
            self.compacted_rev = self.history.popleft().rev

    def compact(self):
        """Forgets all history: any older resourceVersion now answers 410."""
        self.history.clear()
        self.compacted_rev = self.revision

    def _commit(self, resource, key, type_, prev, cur):
        change = Change(self.revision, resource, key, type_, prev, cur)
        if cur is None:
            del self.objects[resource][key]
        else:
            self.objects[resource][key] = cur
        self.history.append(change)
        self.trim_history()
        for watcher in list(self.unpinned.get(resource, ())):
            watcher.offer(change)
        for watcher in list(self.pinned.get((resource, key[1]), ())):
            watcher.offer(change)
        return change

    def _next_rev(self):
        self.revision += 1
        return self.revision

    # ---- reads -------------------------------------------------------------------------------

    def get(self, resource, namespace, name):
        obj = self.objects[resource].get((namespace, name))
        if obj is None:
            res = RESOURCES[resource]
            raise not_found(resource, res.group, name)
        return obj

    def snapshot(self, resource, rev):
        """The objects of `resource` as they were at revision `rev` (rev >= compacted_rev), as a
        dict keyed by (namespace, name)."""
        state = dict(self.objects[resource])
        for change in reversed(self.history):
            if change.rev <= rev:
                break
            if change.resource != resource:
                continue
            if change.prev is None:
                state.pop(change.key, None)
            else:
                state[change.key] = change.prev
        return state

    def changes_after(self, rev):
        return [change for change in self.history if change.rev > rev]

    # ---- writes ------------------------------------------------------------------------------

    def create(self, resource, namespace, obj):
        res = RESOURCES[resource]
        meta = obj["metadata"]
        if res.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        default_and_validate(res, obj)
        key = (namespace, meta["name"])
        if key in self.objects[resource]:
            raise already_exists(resource, res.group, meta["name"])
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["resourceVersion"] = str(self._next_rev())
        self._commit(resource, key, "ADDED", None, obj)
        return obj

    def update(self, resource, namespace, name, obj, allow_create, subresource=None,
               dry_run=False):
        """PUT (of the `status` subresource when `subresource` says so). Returns (object,
        created). A dry run returns what would be stored, with the stored resourceVersion."""
        res = RESOURCES[resource]
        meta = obj["metadata"]
        meta["namespace"] = namespace
        key = (namespace, name)
        old = self.objects[resource].get(key)
        rv = meta.get("resourceVersion")
        if old is None:
            if allow_create and not rv:
                return self.create(resource, namespace, obj), True
            raise not_found(resource, res.group, name)
        if resource == "leases" and not rv:
            raise invalid(res.kind, res.group, name, [
                ("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an "
                 "update", "FieldValueInvalid")])
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(resource, res.group, name)
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            raise conflict(resource, res.group, name)
        default_and_validate(res, obj, old, subresource)
        for field in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _canonical(obj) == _canonical(old):
            return old, False
        if dry_run:
            return obj, False
        meta["resourceVersion"] = str(self._next_rev())
        self._commit(resource, key, "MODIFIED", old, obj)
        return obj, False

    def delete(self, resource, namespace, name, grace_seconds=None, preconditions=None):
        """Returns (object_after, deleted). Pods bound to a node are deleted gracefully: first a
        MODIFIED with deletionTimestamp, then (grace 0) the DELETED, as with a real kubelet."""
        res = RESOURCES[resource]
        key = (namespace, name)
        old = self.get(resource, namespace, name)
        preconditions = preconditions or {}
        if preconditions.get("uid") and preconditions["uid"] != old["metadata"]["uid"]:
            raise conflict(resource, res.group, name)
        if (preconditions.get("resourceVersion")
                and preconditions["resourceVersion"] != old["metadata"]["resourceVersion"]):
            raise conflict(resource, res.group, name)
        if resource == "pods" and (old.get("spec") or {}).get("nodeName"):
            if grace_seconds is None:
                grace_seconds = old["spec"].get("terminationGracePeriodSeconds", 30)
            if grace_seconds > 0:
                if old["metadata"].get("deletionTimestamp"):
                    return old, False
                obj = copy.deepcopy(old)
                obj["metadata"]["deletionTimestamp"] = time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace_seconds))
                obj["metadata"]["deletionGracePeriodSeconds"] = grace_seconds
                obj["metadata"]["resourceVersion"] = str(self._next_rev())
                self._commit(resource, key, "MODIFIED", old, obj)
                return obj, False
        self._next_rev()
        change = self._commit(resource, key, "DELETED", old, None)
        return change.deleted_object(), True

    # ---- watchers ----------------------------------------------------------------------------

    def _index(self, watcher):
        if watcher.pinned_name is not None:
            return self.pinned.setdefault((watcher.resource, watcher.pinned_name), set())
        return self.unpinned.setdefault(watcher.resource, set())

    def add_watcher(self, watcher):
        self.watchers.add(watcher)
        self._index(watcher).add(watcher)

    def remove_watcher(self, watcher):
        self.watchers.discard(watcher)
        self._index(watcher).discard(watcher)

    def drop_watchers(self, abort=False):
        for watcher in list(self.watchers):
            watcher.close(abort)
            self._index(watcher).discard(watcher)
        self.watchers.clear()


def _canonical(obj):
    return json.dumps(obj, sort_keys=True)
