#!/usr/bin/python3
"""API-server cost model: what one node's daemon costs the API server under the Get, Cache and
Watch change-detection strategies, measured against tests/apiserver/kube-test-apiserver's
per-client counters (GET /_admin/clients), then extrapolated to a fleet.

The daemon runs in cluster mode as its own user (a token of its own, `system:node:<node>`), so
the counters hold only its traffic; the benchmark plays the kubelet (tests/e2e/kubelet_writer.py
sets every volume up first) and the object owners (as another user). Per run: N pods with one
configMap volume each, one ConfigMap per pod (N referenced objects).

Phases of each run:
  start   daemon start until it has read every object (Watch: every object watch open; Get and
          Cache: one GET per object): what a node costs when it (re)starts.
  idle    a window of --windows sync periods with nothing changed: the steady cost per sync period
          (Get: a GET per volume per pod sync; Cache: a GET per object per TTL; Watch: bookmarks).
  change  every object replaced once (one PUT each), until every volume shows its new value;
          minus the idle rate over the same time: the cost of one object change on this node,
          and how long the change took to arrive (the other side of the trade).

Variants: Watch with immutable objects (no watch after the first read), Watch and Get through
nghttpx (TLS + HTTP/2 front: connections the node holds, wire bytes from `ss -ti`), and a
namespace-watch comparison (one watch per namespace against one per object, from a plain client:
what a namespace-watch mode would cost, before building one).

Usage: bench/cost_model.py [--daemon PATH] [--objects N] [--sync S] [--windows K] [--quick]
                           [--only get,cache,watch,immutable,http2,namespace] [--json FILE]
Prints markdown tables (BENCHMARKS.md, "API-server cost model") and writes every number to
--json (default build/bench-results/cost_model.json).
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster_bench as cb  # noqa: E402

REPO = cb.REPO
NODE_TOKEN = "cost-model-node-token"
NODE_USER = f"system:node:{cb.NODE}"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "discovery")


def counters(server, user=NODE_USER):
    return server.admin("GET", "clients")["clients"].get(user, {})


def diff(after, before):
    """after - before for the cumulative counters (dicts of counts included)."""
    out = {}
    for key, value in after.items():
        if isinstance(value, dict):
            prev = before.get(key, {})
            out[key] = {k: v - prev.get(k, 0) for k, v in value.items() if v - prev.get(k, 0)}
        elif key.endswith("_open"):
            out[key] = value
        else:
            out[key] = value - before.get(key, 0)
    return out


def socket_bytes(pid):
    """{local address: (bytes sent, bytes received)} of the established TCP sockets of `pid`
    (`ss -ti`): TLS records as TCP payload."""
    out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True,
                         text=True).stdout
    sockets = {}
    local = None
    for line in out.splitlines():
        if not line[:1].isspace():
            fields = line.split()
            local = fields[2] if f"pid={pid}," in line and len(fields) > 2 else None
            continue
        if local is not None:
            sent = re.search(r"bytes_sent:(\d+)", line)
            received = re.search(r"bytes_received:(\d+)", line)
            sockets[local] = (int(sent.group(1)) if sent else 0,
                              int(received.group(1)) if received else 0)
    return sockets


def wire_delta(before, after):
    """(sent, received) between two socket_bytes() snapshots; a socket closed in between is not
    counted (so this undercounts when connections come and go)."""
    sent = received = 0
    for local, (s, r) in after.items():
        s0, r0 = before.get(local, (0, 0))
        sent += s - s0
        received += r - r0
    return sent, received


def set_up_objects(api, daemon, n, immutable):
    vols = []
    for i in range(n):
        obj = cb.configmap(f"cm-{i}", "v0")
        if immutable:
            obj["immutable"] = True
        api.ok("POST", f"/api/v1/namespaces/{cb.NS}/configmaps", obj)
    vols = cb.set_up_pods(api, daemon, n, lambda i: f"cm-{i}")
    return vols


def wait_for(cond, timeout, what, daemon=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon is not None:
            daemon.alive()
        if cond():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def run(args, strategy, immutable=False, http2=False):
    """One daemon against a fresh server; returns the phases' counters."""
    label = strategy + (", immutable" if immutable else "") + (", HTTP/2 (nghttpx)" if http2 else "")
    workdir = Path(tempfile.mkdtemp(prefix="cost-model-", dir=args.workdir))
    n, sync, ttl = args.objects, args.sync, args.ttl
    result = {"label": label, "strategy": strategy, "immutable": immutable, "http2": http2,
              "objects": n, "sync_s": sync, "ttl_s": ttl if strategy == "Cache" else None,
              "bookmark_period_s": args.bookmark_period}
    with cb.TestApiServer() as server:
        server.admin("POST", "tokens", {"token": NODE_TOKEN, "user": NODE_USER})
        server.admin("POST", "settings", {"bookmark_period": args.bookmark_period})
        front = cb.Nghttpx(server, workdir) if http2 else None
        api = cb.Api(server)
        daemon = cb.Daemon(args.daemon, server, workdir,
                           ["--config-map-and-secret-change-detection-strategy", strategy,
                            "--sync-frequency", f"{sync}s", "--object-cache-ttl", f"{ttl}s"],
                           via_port=front.port if front else None)
        daemon.kubeconfig.write_text(daemon.kubeconfig.read_text().replace(server.token,
                                                                           NODE_TOKEN))
        try:
            vols = set_up_objects(api, daemon, n, immutable)
            load0 = os.getloadavg()[0]
            t0 = time.monotonic()
            pid = daemon.start()

            def read_all():
                c = counters(server)
                req = c.get("requests", {})
                if strategy == "Watch" and not immutable:
                    return c.get("watches_open", 0) >= n + 1
                if strategy == "Watch":  # immutable: listed once each, then unwatched
                    return req.get("list", 0) >= n + 1 and c.get("watches_open", 0) == 1
                return req.get("get", 0) >= n
            wait_for(read_all, 120, f"{label}: the daemon reading every object", daemon)
            # Start-up is over once the daemon's Events (e.g. FailedMount of a volume whose object
            # was not listed within the sync timeout) stop: 3 s without a new request but GETs.
            quiet_since, last = time.monotonic(), None
            while time.monotonic() - quiet_since < 3.0 and time.monotonic() - t0 < 180:
                req = dict(counters(server).get("requests", {}))
                req.pop("get", None)
                if req != last:
                    quiet_since, last = time.monotonic(), req
                time.sleep(0.5)
            result["start"] = counters(server)
            result["start_s"] = time.monotonic() - t0

            # Idle: whole sync periods with nothing changed.
            before, wire0, t1 = counters(server), socket_bytes(pid), time.monotonic()
            time.sleep(sync * args.windows)
            after, wire1, t2 = counters(server), socket_bytes(pid), time.monotonic()
            idle = diff(after, before)
            idle["seconds"] = t2 - t1
            idle["wire_sent"], idle["wire_received"] = wire_delta(wire0, wire1)
            result["idle"] = idle
            if http2:
                result["connections"] = cb.proc_tcp_connections(pid, front.port)
                result["server_connections"] = after.get("connections_open")
            else:
                result["connections"] = cb.proc_tcp_connections(pid, server.port)

            # Changes: every object replaced once (not for immutable objects).
            if not immutable:
                before, wire0, t3 = counters(server), socket_bytes(pid), time.monotonic()
                sent = {}
                for i in range(n):
                    rv = api.ok("GET", f"/api/v1/namespaces/{cb.NS}/configmaps/cm-{i}")[
                        "metadata"]["resourceVersion"]
                    sent[i] = cb.replace_configmap(api, f"cm-{i}", f"new-{i}", rv)[0]
                arrived = {}
                deadline = time.monotonic() + 2 * sync + ttl + 60
                while len(arrived) < n and time.monotonic() < deadline:
                    daemon.alive()
                    now = time.monotonic()
                    for i in range(n):
                        if i not in arrived and cb.read_value(vols[i]) == f"new-{i}":
                            arrived[i] = now - sent[i]
                    time.sleep(0.05)
                if len(arrived) < n:
                    raise RuntimeError(f"{label}: {n - len(arrived)} volumes never changed")
                after, wire1, t4 = counters(server), socket_bytes(pid), time.monotonic()
                change = diff(after, before)
                change["seconds"] = t4 - t3
                change["wire_sent"], change["wire_received"] = wire_delta(wire0, wire1)
                change["latency_ms"] = sorted(v * 1e3 for v in arrived.values())
                result["change"] = change
            result["load"] = [load0, os.getloadavg()[0]]
            events = api.ok("GET", f"/api/v1/namespaces/{cb.NS}/events")["items"]
            reasons = {}
            for e in events:
                key = f"{e.get('reason')}: {e.get('message', '')[:90]}"
                key = re.sub(r"cm-\d+", "cm-N", re.sub(r"pod-\d+", "pod-N", key))
                reasons[key] = reasons.get(key, 0) + int(e.get("count", 1))
            result["events"] = reasons
        finally:
            daemon.stop()
            if front:
                front.stop()
    cb.shutil.rmtree(workdir, ignore_errors=True)
    return result


# --- namespace watch against per-object watches (a plain client, no daemon) --------------------

def hold_watch(server, path, token, stop, ready):
    sock = server.connect()
    sock.settimeout(0.5)
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                  "\r\n").encode())
    ready.release()
    try:
        while not stop.is_set():
            try:
                if not sock.recv(65536):
                    return
            except TimeoutError:
                continue
            except OSError:
                return
    finally:
        sock.close()


def namespace_comparison(args):
    """`ref` objects referenced by a node in a namespace holding `ref + unref` ConfigMaps; every
    object of the namespace changed once. Per-object watches against one namespace watch."""
    rows = []
    ref = args.objects
    for unref in args.unreferenced:
        for mode in ("per-object", "namespace"):
            with cb.TestApiServer() as server:
                server.admin("POST", "tokens", {"token": NODE_TOKEN, "user": NODE_USER})
                api = cb.Api(server)
                for i in range(ref + unref):
                    cb.create_configmap(api, f"cm-{i}", "v0")
                base = f"/api/v1/namespaces/{cb.NS}/configmaps"
                server.admin("DELETE", "clients")
                # The initial read: the node's objects one by one, or the namespace's list.
                if mode == "per-object":
                    for i in range(ref):
                        server.request("GET", f"{base}?fieldSelector=metadata.name%3Dcm-{i}",
                                       token=NODE_TOKEN)
                    paths = [f"{base}?watch=true&fieldSelector=metadata.name%3Dcm-{i}"
                             f"&allowWatchBookmarks=true" for i in range(ref)]
                else:
                    server.request("GET", base, token=NODE_TOKEN)
                    paths = [f"{base}?watch=true&allowWatchBookmarks=true"]
                start = counters(server)
                stop, ready = threading.Event(), threading.Semaphore(0)
                threads = [threading.Thread(target=hold_watch,
                                            args=(server, p, NODE_TOKEN, stop, ready))
                           for p in paths]
                for t in threads:
                    t.start()
                for _ in threads:
                    ready.acquire()
                wait_for(lambda: counters(server).get("watches_open", 0) == len(paths), 60,
                         "the watches to open")
                before = counters(server)
                for i in range(ref + unref):
                    rv = api.ok("GET", f"{base}/cm-{i}")["metadata"]["resourceVersion"]
                    cb.replace_configmap(api, f"cm-{i}", f"new-{i}", rv)
                want = ref + unref if mode == "namespace" else ref
                wait_for(lambda: counters(server).get("watch_events", {}).get("MODIFIED", 0)
                         - before.get("watch_events", {}).get("MODIFIED", 0) >= want, 60,
                         "every event delivered")
                after = counters(server)
                stop.set()
                for t in threads:
                    t.join()
            rows.append({"mode": mode, "referenced": ref, "unreferenced": unref,
                         "initial_requests": sum(start.get("requests", {}).values()),
                         "initial_bytes_out": start.get("bytes_out", 0),
                         "watches": len(paths),
                         "change_events": diff(after, before).get("watch_events", {}).get(
                             "MODIFIED", 0),
                         "change_bytes_out": after["bytes_out"] - before["bytes_out"]})
    return rows


# --- the fleet ----------------------------------------------------------------------------------

FLEET = {"nodes": 5000, "objects_per_node": 100, "sync_s": 60.0, "cache_ttl_s": 300.0,
         "bookmark_per_watch_per_min": 1.0, "watch_timeout_mean_s": 45 * 60.0,
         "streams_per_connection": 100, "changes_per_object_per_hour": 1.0}


def per_object_rates(r):
    """What one (node, object) pair costs, from a run: GETs per sync period, bytes per GET,
    bytes per bookmark, bytes per change event, request bytes per watch."""
    idle, start, n = r["idle"], r["start"], r["objects"]
    periods = idle["seconds"] / r["sync_s"]
    gets = idle.get("requests", {}).get("get", 0)
    bookmarks = idle.get("watch_events", {}).get("BOOKMARK", 0)
    out = {"gets_per_sync": gets / periods / n,
           "get_bytes_in": idle.get("bytes_in", 0) / gets if gets else 0.0,
           "get_bytes_out": idle.get("bytes_out", 0) / gets if gets else 0.0,
           "bookmark_bytes": idle.get("bytes_out", 0) / bookmarks if bookmarks and not gets
           else 0.0}
    reads = start.get("requests", {})
    watch_requests = reads.get("watch", 0) + reads.get("list", 0)
    if watch_requests:  # a list and a watch per object: the bytes of a (re)start, per object
        out["restart_bytes_in"] = start.get("bytes_in", 0) / (watch_requests / 2)
    if "change" in r:
        c = r["change"]
        out["change_bytes_out"] = max(0.0, (c.get("bytes_out", 0) - idle.get("bytes_out", 0)
                                            / idle["seconds"] * c["seconds"]) / n)
        out["change_p50_s"] = cb.percentile(c["latency_ms"], 50) / 1e3
    return out


def extrapolate(results):
    """The fleet's cost per strategy (FLEET's assumptions; BENCHMARKS.md lists them)."""
    f = FLEET
    pairs = f["nodes"] * f["objects_per_node"]
    change_rate = pairs * f["changes_per_object_per_hour"] / 3600.0  # (node, object) changes/s
    rows = []
    by = {(r["strategy"], r["immutable"], r["http2"]): r for r in results}
    for key, name in ((("Get", False, False), "Get"), (("Cache", False, False), "Cache"),
                      (("Watch", False, False), "Watch"),
                      (("Watch", True, False), "Watch, immutable objects")):
        r = by.get(key)
        if r is None:
            continue
        m = per_object_rates(r)
        row = {"strategy": name, "measured": m}
        if key[0] == "Get":
            gets = pairs * m["gets_per_sync"] / f["sync_s"]
            row.update(requests_s=gets, watches=f["nodes"],
                       bytes_out_s=gets * m["get_bytes_out"], bytes_in_s=gets * m["get_bytes_in"],
                       change_delay_s=f"up to {f['sync_s']:.0f}")
        elif key[0] == "Cache":
            # A GET at a pod sync after the TTL ran out: one per object per TTL + one sync
            # period (measured: 60 s for a 30 s TTL and 10 s syncs, i.e. this rounds down).
            gets = pairs / (f["cache_ttl_s"] + f["sync_s"])
            row.update(requests_s=gets, watches=f["nodes"],
                       bytes_out_s=gets * m["get_bytes_out"], bytes_in_s=gets * m["get_bytes_in"],
                       change_delay_s=f"up to {f['sync_s'] + f['cache_ttl_s']:.0f}")
        elif not key[1]:
            rewatches = pairs / f["watch_timeout_mean_s"]
            bookmarks = pairs * f["bookmark_per_watch_per_min"] / 60.0
            row.update(requests_s=rewatches, watches=pairs + f["nodes"],
                       bytes_out_s=bookmarks * m["bookmark_bytes"]
                       + change_rate * m.get("change_bytes_out", 0.0),
                       bytes_in_s=rewatches * m.get("restart_bytes_in", 0.0) / 2,
                       change_delay_s=f"{m.get('change_p50_s', 0):.2f} (measured p50)")
        else:
            row.update(requests_s=0.0, watches=f["nodes"], bytes_out_s=0.0, bytes_in_s=0.0,
                       change_delay_s="never (immutable)")
        streams = row["watches"] / f["nodes"] + 1
        row["http2_connections"] = f["nodes"] * math.ceil(streams / f["streams_per_connection"])
        rows.append(row)
    return rows


# --- report ------------------------------------------------------------------------------------

def requests_text(req):
    return ", ".join(f"{v} {k}" for k, v in sorted(req.items(), key=lambda kv: -kv[1])) or "0"


def report(results, ns_rows, args):
    print("\n### Per node: start, idle, one object change\n")
    print(f"{args.objects} pods, one ConfigMap each; sync period {args.sync} s; Cache TTL "
          f"{args.ttl} s; bookmark period {args.bookmark_period} s. Bytes are the server's "
          "HTTP/1.1 bytes (heads, bodies, chunk framing) without TLS; \"wire\" = the daemon's "
          "TCP payload both ways (TLS records; HTTP/2 frames through nghttpx).\n")
    print("| strategy | start: requests | start: bytes in / out | watches held | connections "
          "| idle per sync period: requests | idle per sync: bytes out (server) | idle per sync: "
          "wire sent / received | per object change: requests | per change: bytes out | "
          "per change: wire | change -> volume p50 / max (s) | load |")
    print("|" + "---|" * 13)
    for r in results:
        s, idle = r["start"], r["idle"]
        periods = idle["seconds"] / r["sync_s"]
        req_sync = {k: round(v / periods, 1) for k, v in idle.get("requests", {}).items()}
        row = [r["label"], requests_text(s.get("requests", {})),
               f"{s.get('bytes_in', 0):,} / {s.get('bytes_out', 0):,}",
               str(idle.get("watches_open", 0)), str(r.get("connections")),
               requests_text(req_sync), f"{idle.get('bytes_out', 0) / periods:,.0f}",
               f"{idle['wire_sent'] / periods:,.0f} / {idle['wire_received'] / periods:,.0f}"]
        if "change" in r:
            c = r["change"]
            idle_rate = {k: v / idle["seconds"] for k, v in idle.get("requests", {}).items()}
            extra = {k: v - idle_rate.get(k, 0) * c["seconds"] for k, v in
                     c.get("requests", {}).items()}
            extra = {k: round(max(0.0, v) / r["objects"], 2) for k, v in extra.items()
                     if v / r["objects"] >= 0.005}
            out = (c.get("bytes_out", 0) - idle.get("bytes_out", 0) / idle["seconds"]
                   * c["seconds"]) / r["objects"]
            wire = (c["wire_received"] + c["wire_sent"] - (idle["wire_sent"] +
                    idle["wire_received"]) / idle["seconds"] * c["seconds"]) / r["objects"]
            lat = c["latency_ms"]
            row += [requests_text(extra), f"{max(0, out):,.0f}", f"{max(0, wire):,.0f}",
                    f"{cb.percentile(lat, 50) / 1e3:.2f} / {max(lat) / 1e3:.2f}"]
        else:
            row += ["(immutable)", "-", "-", "-"]
        row.append(f"{r['load'][0]:.1f} -> {r['load'][1]:.1f}")
        print("| " + " | ".join(row) + " |")
    fleet = extrapolate(results)
    if fleet:
        f = FLEET
        print(f"\n### Extrapolated: {f['nodes']:,} nodes x {f['objects_per_node']} referenced "
              "objects each\n")
        print(f"Sync {f['sync_s']:.0f} s, Cache TTL {f['cache_ttl_s']:.0f} s, "
              f"{f['bookmark_per_watch_per_min']:.0f} bookmark per watch per minute, watches "
              f"renewed every {f['watch_timeout_mean_s'] / 60:.0f} min on average, "
              f"{f['streams_per_connection']} streams per HTTP/2 connection, every object "
              f"changed {f['changes_per_object_per_hour']:.0f} time(s) per hour.\n")
        print("| strategy | requests/s | watches open | HTTP/2 connections | bytes/s to nodes | "
              "bytes/s from nodes | a change reaches a volume after (s) |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for r in fleet:
            print(f"| {r['strategy']} | {r['requests_s']:,.0f} | {r['watches']:,} | "
                  f"{r['http2_connections']:,} | {r['bytes_out_s'] / 1e6:,.2f} MB/s | "
                  f"{r['bytes_in_s'] / 1e6:,.2f} MB/s | {r['change_delay_s']} |")
    for r in results:
        if r.get("events"):
            print(f"\nEvents the daemon posted ({r['label']}): " + "; ".join(
                f"{n} x {k}" for k, n in sorted(r["events"].items(), key=lambda kv: -kv[1])))
    if ns_rows:
        print("\n### One watch per namespace against one per object\n")
        print("| watches | referenced / other objects in the namespace | initial read: requests "
              "/ bytes out | watches held | every object changed once: events / bytes out |")
        print("|---|---|---|---|---|")
        for r in ns_rows:
            print(f"| {r['mode']} | {r['referenced']} / {r['unreferenced']} | "
                  f"{r['initial_requests']} / {r['initial_bytes_out']:,} | {r['watches']} | "
                  f"{r['change_events']} / {r['change_bytes_out']:,} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    p.add_argument("--objects", type=int, default=100)
    p.add_argument("--sync", type=float, default=10.0, help="--sync-frequency in seconds")
    p.add_argument("--ttl", type=float, default=30.0, help="Cache: --object-cache-ttl, seconds")
    p.add_argument("--bookmark-period", type=float, default=10.0)
    p.add_argument("--windows", type=int, default=6, help="idle sync periods measured")
    p.add_argument("--unreferenced", type=int, nargs="*", default=[0, 900])
    p.add_argument("--only", default="get,cache,watch,immutable,http2,namespace")
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--json", default=str(REPO / "build" / "bench-results" / "cost_model.json"))
    p.add_argument("--quick", action="store_true",
                   help="20 objects, 2 s sync, 6 s TTL, 3 periods, 80 unreferenced")
    args = p.parse_args()
    if args.quick:
        args.objects, args.sync, args.ttl, args.windows = 20, 2.0, 6.0, 3
        args.bookmark_period, args.unreferenced = 2.0, [80]
    only = set(args.only.split(","))
    started = time.time()
    print(f"# cost model, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
          f"{os.cpu_count()} CPUs, load {cb.load()}, daemon {args.daemon}", flush=True)
    plan = [("get", "Get", False, False), ("cache", "Cache", False, False),
            ("watch", "Watch", False, False), ("immutable", "Watch", True, False),
            ("http2", "Watch", False, True), ("http2", "Get", False, True)]
    results = []
    for key, strategy, immutable, http2 in plan:
        if key in only:
            results.append(run(args, strategy, immutable, http2))
            print(f"# {results[-1]['label']}: done, load {cb.load()}", flush=True)
    ns_rows = namespace_comparison(args) if "namespace" in only else []
    report(results, ns_rows, args)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                               "args": vars(args), "runs": results, "namespace": ns_rows,
                               "fleet_assumptions": FLEET, "fleet": extrapolate(results)},
                              indent=1))
    print(f"# wrote {out} ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
