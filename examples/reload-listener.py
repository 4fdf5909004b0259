#!/usr/bin/python3
"""The demo pod's application, for the tour: listens on ADDRESS:8099 (the demo pod's own address)
and, for each reload call the daemon makes, prints when it came, how long after the volume's
..data swap, and what the application now reads in app.properties.

Usage: examples/reload-listener.py [--address 127.0.0.1] [--volume DIR]
(`make run` and `make run-cluster` start it; DIR is the pod's app-config volume.)
"""
import argparse
import os
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--volume", default="run/root/pods/web-demo/volumes/"
                                            "kubernetes.io~configmap/app-config")
    args = parser.parse_args()
    volume = Path(args.volume)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            now = time.time()
            try:
                swapped = os.lstat(volume / "..data").st_mtime
                since = f"{(now - swapped) * 1000:.0f} ms after the ..data swap"
                content = (volume / "app.properties").read_text().strip().replace("\n", "; ")
            except OSError as e:
                since, content = "volume not readable", str(e)
            print(f"{time.strftime('%H:%M:%S', time.localtime(now))} application: reload asked "
                  f"({self.command} {self.path}), {since}; app.properties: {content}", flush=True)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    class Server(HTTPServer):
        def server_bind(self):
            # HTTPServer's own looks the address's name up (getfqdn), which waits for DNS
            # timeouts in a pod network without a resolver; the name is never used here.
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = self.server_address[:2]

    try:
        server = Server((args.address, 8099), Handler)
    except OSError as e:
        print(f"reload-listener: {args.address}:8099: {e}; the demo's reload calls will fail",
              file=sys.stderr)
        return 1
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
