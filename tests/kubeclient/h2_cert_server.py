#!/usr/bin/python3
"""An HTTP/2 server that requires a client certificate, for the client certificate rotation test
of the client's own transport (http2_test.cc). Each connection answers with the serial of the
certificate it was opened with:

  /whoami   200 "<serial> connection <n>"
  /watch    200, "<serial>\\n" and then nothing: the stream stays open (a watch)
  /held     answered ("<serial>") only once some connection has asked for /release
  /release  200 "released"

Usage: h2_cert_server.py PORT CERT KEY CA (Debian python3-h2).
"""
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.events

from h2_tls_listener import serve_forever

released = threading.Event()


def respond(conn, stream_id, body, end=True):
    data = body.encode()
    headers = [(":status", "200"), ("content-type", "text/plain")]
    if end:
        headers.append(("content-length", str(len(data))))
    conn.send_headers(stream_id, headers)
    conn.send_data(stream_id, data, end_stream=end)


def serve(sock, number):
    serial = format(int(sock.getpeercert()["serialNumber"], 16), "x")
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    sock.settimeout(0.05)
    paths = {}
    held = []
    while True:
        try:
            data = sock.recv(65535)
            if not data:
                return
        except socket.timeout:
            data = b""
        except (ssl.SSLError, OSError):
            return
        for event in conn.receive_data(data) if data else []:
            if isinstance(event, h2.events.RequestReceived):
                paths[event.stream_id] = dict(event.headers)[b":path"].decode()
            elif isinstance(event, h2.events.StreamEnded):
                path = paths.get(event.stream_id, "")
                if path == "/whoami":
                    respond(conn, event.stream_id, f"{serial} connection {number}")
                elif path == "/watch":
                    respond(conn, event.stream_id, f"{serial}\n", end=False)
                elif path == "/held":
                    held.append(event.stream_id)
                elif path == "/release":
                    released.set()
                    respond(conn, event.stream_id, "released")
            elif isinstance(event, h2.events.StreamReset):
                held = [s for s in held if s != event.stream_id]
        if released.is_set():
            for stream_id in held:
                respond(conn, stream_id, serial)
            held = []
        try:
            sock.sendall(conn.data_to_send())
        except (ssl.SSLError, OSError):
            return


def main():
    port, cert, key, ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    serve_forever(port, cert, key, serve, ca=ca)


if __name__ == "__main__":
    main()
