"""The accept loop the scripted HTTP/2 servers of the client transport tests share: TLS with ALPN
h2 on 127.0.0.1:PORT, each connection served on a thread of its own by `serve(sock, number)`
(numbered from 1). With `ca`, a client certificate signed by it is required."""
import itertools
import socket
import ssl
import threading


def serve_forever(port, cert, key, serve, ca=None):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if ca is not None:
        context.load_verify_locations(ca)
        context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", port))
    counter = itertools.count(1)
    while True:
        raw, _ = listener.accept()
        try:
            sock = context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(sock, next(counter)), daemon=True).start()
