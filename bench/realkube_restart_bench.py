#!/usr/bin/env python3
"""Recovery after API server restarts, against the real kube-apiserver v1.20.2 (tests/realkube).

The daemon runs under a node's identity (client certificate, Node authorizer and NodeRestriction),
Watch strategy, beside a pod whose configMap volume the (simulated) kubelet has set up. Then,
`--restarts` times, `--interval` seconds apart: the server is killed (SIGKILL), stays down for an
outage drawn from `--outage` (seconds, min,max), and is started again with the same flags. As
soon as the server takes writes again the ConfigMap is changed (as the admin), while a probe GETs
it every 100 ms with the daemon's own credentials: the first 200 is the moment the daemon's
identity may read the object again (before it, the server is down or the Node authorizer's graph
is still filling). Measured per restart: from that first 200 to the new content on disk (the
volume polled every 5 ms), and from the change to the disk.

    bench/realkube_restart_bench.py --daemon build/bin/volumemanager [--restarts 10]
        [--interval 130] [--outage 2,9] [--json out.json]

Needs `make real-kube` (build/realkube). Prints one
line per restart and a summary (median, p99 = the worst of 10, max); the daemon's log and the
servers' logs stay in the work dir it prints.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests" / "apiserver"))
sys.path.insert(0, str(REPO / "tests" / "realkube"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--restarts", type=int, default=10)
    parser.add_argument("--interval", type=float, default=130.0,
                        help="seconds from one kill to the next (at least 120: client-go's "
                             "backoffs reset after 2 minutes without a failure)")
    parser.add_argument("--outage", default="2,9", help="min,max seconds the server stays down")
    parser.add_argument("--workdir")
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ["VOLUMEMANAGER_BIN"] = str(Path(args.daemon).resolve())

    import api_servers
    from conftest import visible_files
    from test_cluster import CM, cm_volume
    from test_node_identity import NodeCluster

    low, high = (float(x) for x in args.outage.split(","))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="realkube-restarts-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work dir: {work}", flush=True)
    results = []
    with api_servers.api_server("real", work, client_cert_user=api_servers.NODE_USER,
                                chart_rbac=False) as server:
        c = NodeCluster(work, server, "certificate")
        try:
            c.put_configmap("app", {"level": "0"})
            uid = c.create_pod("web", [cm_volume("cfg", "app")])
            c.kubelet_sets_up(uid, CM, "cfg", {"level": "0"})
            volume = c.volume_dir(uid, CM, "cfg")
            c.start()
            c.wait_synced("configmap default/app")
            path = "/api/v1/namespaces/default/configmaps/app"
            for n in range(1, args.restarts + 1):
                killed = time.monotonic()
                outage = random.uniform(low, high)
                server.kill()
                time.sleep(outage)
                server.start(wait=False)
                readable = {}

                def probe():
                    codes = []
                    while True:
                        try:
                            status, _ = server.request("GET", path, client_cert=True)
                        except OSError:
                            status = "down"
                        if status == 200:
                            readable["at"] = time.monotonic()
                            readable["codes"] = codes
                            return
                        codes.append(status)
                        time.sleep(0.1)
                thread = threading.Thread(target=probe, daemon=True)
                thread.start()
                value = f"restart-{n}"
                # The change, as soon as the server takes writes.
                while True:
                    try:
                        status, body = server.request(
                            "PATCH", path, json.dumps({"data": {"level": value}}).encode(),
                            headers={"Content-Type": "application/merge-patch+json"})
                    except OSError:
                        status = None
                    if status == 200:
                        break
                    time.sleep(0.05)
                changed = time.monotonic()
                while visible_files(volume).get("level") != value.encode():
                    if time.monotonic() - changed > 120:
                        raise RuntimeError(f"restart {n}: the change never reached the disk")
                    time.sleep(0.005)
                on_disk = time.monotonic()
                thread.join(timeout=120)
                after_readable = on_disk - readable["at"]
                forbidden = readable["codes"].count(403)
                row = {"restart": n, "outage_s": round(outage, 2),
                       "server_back_s": round(changed - killed - outage, 3),
                       "change_to_disk_s": round(on_disk - changed, 3),
                       "readable_to_disk_s": round(after_readable, 3),
                       "probe_403s": forbidden}
                results.append(row)
                print(json.dumps(row), flush=True)
                server.wait_ready()
                time.sleep(max(0.0, killed + args.interval - time.monotonic()))
        finally:
            c.stop()
    lat = sorted(r["readable_to_disk_s"] for r in results)
    summary = {"restarts": len(results),
               "readable_to_disk_median_s": round(statistics.median(lat), 3),
               "readable_to_disk_p99_s": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
               "readable_to_disk_max_s": lat[-1],
               "change_to_disk_max_s": max(r["change_to_disk_s"] for r in results)}
    print(json.dumps(summary), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
