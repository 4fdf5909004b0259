#!/usr/bin/python3
"""An HTTP/2 server for one test of the client's own transport (http2_test.cc): the first
connection answers the first of its first two streams, then sends GOAWAY naming that stream as
the last it processed (the other one is refused: never processed) and closes; every later
connection answers every stream. A body names the connection and the path it answers.

Usage: h2_goaway_server.py PORT CERT KEY (Debian python3-h2).
"""
import sys

import h2.config
import h2.connection
import h2.events

from h2_tls_listener import serve_forever


def serve(sock, number):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths = {}
    ended = []
    while True:
        data = sock.recv(65535)
        if not data:
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                paths[event.stream_id] = dict(event.headers)[b":path"].decode()
            elif isinstance(event, h2.events.StreamEnded):
                ended.append(event.stream_id)
        if number == 1 and len(ended) < 2:
            sock.sendall(conn.data_to_send())
            continue
        streams = sorted(ended[:1]) if number == 1 else list(ended)
        for stream_id in streams:
            body = f"connection {number} {paths[stream_id]}".encode()
            conn.send_headers(stream_id, [(":status", "200"), ("content-type", "text/plain"),
                                          ("content-length", str(len(body)))])
            conn.send_data(stream_id, body, end_stream=True)
        ended = [s for s in ended if s not in streams]
        if number == 1:
            conn.close_connection(last_stream_id=streams[0])
            sock.sendall(conn.data_to_send())
            sock.close()
            return
        sock.sendall(conn.data_to_send())


def main():
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    serve_forever(port, cert, key, serve)


if __name__ == "__main__":
    main()
