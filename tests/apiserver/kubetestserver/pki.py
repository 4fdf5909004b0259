"""Test PKI: a throw-away CA, a server certificate for 127.0.0.1/localhost and one client certificate.

Generated with the `openssl` command-line tool (Debian package `openssl`) so nothing outside the
Debian archive is needed. Keys are EC P-256: fast to generate, accepted by OpenSSL, Go and Python.
"""

import os
import subprocess


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def _signed_cert(directory, stem, subject, extensions):
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{stem}.key", "-out", f"{stem}.csr", "-subj", subject, cwd=directory)
    ext_file = os.path.join(directory, f"{stem}.ext")
    with open(ext_file, "w") as f:
        f.write(extensions)
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{stem}.crt", "-days", "3", "-sha256",
             "-extfile", f"{stem}.ext", cwd=directory)


def generate(directory, client_user="cert-user", client_group="system:nodes"):
    """Writes ca.crt/ca.key, server.crt/server.key and client.crt/client.key into `directory`.

    The client certificate's CN is `client_user` (the identity the server sees), O its group.
    Returns a dict of absolute paths.
    """
    os.makedirs(directory, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "3", "-sha256",
             "-subj", "/CN=kube-test-apiserver-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash", cwd=directory)
    _signed_cert(directory, "server", "/CN=kube-test-apiserver",
                 "basicConstraints=CA:FALSE\n"
                 "keyUsage=critical,digitalSignature,keyEncipherment\n"
                 "extendedKeyUsage=serverAuth\n"
                 "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes\n"
                 "authorityKeyIdentifier=keyid\n")
    _signed_cert(directory, "client", f"/O={client_group}/CN={client_user}",
                 "basicConstraints=CA:FALSE\n"
                 "keyUsage=critical,digitalSignature,keyEncipherment\n"
                 "extendedKeyUsage=clientAuth\n"
                 "authorityKeyIdentifier=keyid\n")
    return {name: os.path.abspath(os.path.join(directory, name))
            for name in ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt",
                         "client.key")}
