"""Test PKI: a throw-away CA, a server certificate for 127.0.0.1/localhost and one client certificate.

Generated with the `openssl` command-line tool (Debian package `openssl`) so nothing outside the
Debian archive is needed. Keys are EC P-256: fast to generate, accepted by OpenSSL, Go and Python.
"""

import os
import subprocess
import tempfile


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def _signed_cert(directory, stem, subject, extensions, days=3):
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{stem}.key", "-out", f"{stem}.csr", "-subj", subject, cwd=directory)
    ext_file = os.path.join(directory, f"{stem}.ext")
    with open(ext_file, "w") as f:
        f.write(extensions)
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{stem}.crt", "-days", str(days), "-sha256",
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


def issue_client_cert(directory, out_path, user, groups=(), days=1):
    """Signs a new client certificate with the CA in `directory` (CN `user`, one O per group,
    valid from now for `days` days) and writes it and its key into `out_path` as one PEM file,
    certificate first, the way the kubelet writes kubelet-client-<date>.pem: a temporary file
    renamed into place, so a reader never sees half of it.

    Returns the certificate's serial (hex) and notAfter (OpenSSL's text).
    """
    if not user or "/" in user or any("/" in g for g in groups):
        raise ValueError("user and groups must be non-empty names without '/'")
    days = int(days)
    if days < 1:
        raise ValueError("days must be at least 1")
    subject = "".join(f"/O={g}" for g in groups) + f"/CN={user}"
    with tempfile.TemporaryDirectory(dir=directory) as work:
        for name in ("ca.crt", "ca.key"):
            os.symlink(os.path.join(os.path.abspath(directory), name), os.path.join(work, name))
        _signed_cert(work, "issued", subject,
                     "basicConstraints=CA:FALSE\n"
                     "keyUsage=critical,digitalSignature,keyEncipherment\n"
                     "extendedKeyUsage=clientAuth\n"
                     "authorityKeyIdentifier=keyid\n", days=days)
        with open(os.path.join(work, "issued.crt")) as f:
            cert = f.read()
        with open(os.path.join(work, "issued.key")) as f:
            key = f.read()
        info = subprocess.run(["openssl", "x509", "-noout", "-serial", "-enddate"],
                              input=cert, capture_output=True, text=True, check=True).stdout
    fields = dict(line.split("=", 1) for line in info.splitlines() if "=" in line)
    tmp = f"{out_path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(cert if cert.endswith("\n") else cert + "\n")
        f.write(key)
    os.chmod(tmp, 0o600)
    os.replace(tmp, out_path)
    return {"serial": serial_text(fields.get("serial", "")), "not_after": fields.get("notAfter", "")}


def serial_text(serial):
    """A serial number as lower-case hex without leading zeros (OpenSSL's command pads it to whole
    bytes, Python's getpeercert() does not)."""
    return format(int(serial, 16), "x") if serial else ""
