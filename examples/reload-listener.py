#!/usr/bin/python3
"""The demo pod's application, for the tour: listens on 127.0.0.1:8099 (the standalone pod's own
address) and, for each reload call the daemon makes, prints when it came, how long after the
volume's ..data swap, and what the application now reads in app.properties.

Usage: examples/reload-listener.py [ROOT_DIR]   (default run/root, where `make run` writes)
"""
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "run/root")
VOLUME = ROOT / "pods/web-demo/volumes/kubernetes.io~configmap/app-config"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        now = time.time()
        try:
            swapped = os.lstat(VOLUME / "..data").st_mtime
            since = f"{(now - swapped) * 1000:.0f} ms after the ..data swap"
            content = (VOLUME / "app.properties").read_text().strip().replace("\n", "; ")
        except OSError as e:
            since, content = "volume not readable", str(e)
        print(f"{time.strftime('%H:%M:%S', time.localtime(now))} reload: {self.command} "
              f"{self.path}, {since}; app.properties: {content}", flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", 8099), Handler).serve_forever()
