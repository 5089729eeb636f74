"""TLS files and the protocols a server is measured over.

The protocols: `h1` (HTTP/1.1 in cleartext), `h1-tls` (HTTP/1.1 over TLS), `h2` (HTTP/2 over TLS, chosen by
ALPN) and `h2c` (HTTP/2 in cleartext, with prior knowledge) (docs/protocols.md).

The files: the key and PEM writers every certificate of netarena uses (the cluster's control plane,
cluster/certs.py, and a run's server certificate), and the server certificate made for each run that measures
a TLS level: self-signed for localhost, 127.0.0.1 and ::1, valid for a short time, given to every server of the
run and trusted by its checks and its generator. Made with the `cryptography` package.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .process import process_start_time

H1 = "h1"
H1_TLS = "h1-tls"
H2 = "h2"
H2C = "h2c"
# The protocols a level may be measured over, cleartext HTTP/1.1 first (the default of manifests and suites).
PROTOCOLS = (H1, H1_TLS, H2, H2C)
# The protocols served over TLS: the server gets the run's certificate.
TLS_PROTOCOLS = (H1_TLS, H2)
# The protocols spoken as HTTP/2: netarena-load --h2, the checks' HTTP/2 connection.
HTTP2_PROTOCOLS = (H2, H2C)
# The environment variable every server is started with, naming its level's protocol ({protocol} too): a server
# offers HTTP/2 only when it says h2 or h2c (a server for h1-tls must not choose h2 by ALPN, one for h2 must).
PROTOCOL_ENV = "NETARENA_PROTOCOL"

KEY_BITS = 2048  # RSA: accepted by every TLS library the contestants use
# A run's server certificate outlives the longest run by far, and is useless the day after.
RUN_CERT_VALID_DAYS = 2
# The names the run's servers are reached by: the generator and the checks connect to 127.0.0.1 (or ::1).
RUN_CERT_DNS = ("localhost",)
RUN_CERT_IPS = ("127.0.0.1", "::1")


def protocol_problem(name: str) -> str | None:
    """Why `name` is not a protocol a level can be measured over, or None when it is."""
    if name in PROTOCOLS:
        return None
    return f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}"


def is_tls(protocol: str) -> bool:
    return protocol in TLS_PROTOCOLS


def is_http2(protocol: str) -> bool:
    return protocol in HTTP2_PROTOCOLS


def new_key():
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def write_key(path: Path, key) -> None:
    """The private key as unencrypted PKCS#8 PEM, readable by its owner only (mode 0600 from its creation)."""
    from cryptography.hazmat.primitives import serialization

    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def write_cert(path: Path, cert) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@dataclass(frozen=True)
class RunCertificate:
    """A run's server certificate and key (PEM files) in their own folder, removed with `remove`."""

    folder: Path
    cert: Path
    key: Path

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# The environment variables a server started for a level over TLS gets, by placeholder ({tls_cert}, {tls_key}).
TLS_ENV = {"tls_cert": "NETARENA_TLS_CERT", "tls_key": "NETARENA_TLS_KEY"}


def tls_placeholders(certificate: RunCertificate | None) -> dict[str, str]:
    """{tls_cert} and {tls_key}: the run's PEM files for a server started over TLS, "" for a cleartext one."""
    if certificate is None:
        return {"tls_cert": "", "tls_key": ""}
    return {"tls_cert": str(certificate.cert), "tls_key": str(certificate.key)}


def hand_over(certificate: RunCertificate, user) -> None:
    """Make the files the server's own (server_user.ServerUser: netarena as root runs servers as another user),
    so that it may read the key, which stays readable by its owner only."""
    for path in (certificate.folder, certificate.cert, certificate.key):
        if path.stat().st_uid != user.uid:
            os.chown(path, user.uid, user.gid)


# The folder a run's certificate is kept in, inside the run's log folder (runner.run_log_dir); and verify's, one
# per verify process inside the cache's verify-logs/ (several verifies may share a cache).
RUN_CERT_FOLDER = "tls"
VERIFY_CERT_PREFIX = "tls-"


def verify_certificate_folder(log_dir: Path, pid: int) -> Path:
    return log_dir / f"{VERIFY_CERT_PREFIX}{pid}"


def remove_stale_certificates(results_dir: Path | None = None, live_run_ids: set[int] = frozenset(),
                              verify_log_dir: Path | None = None) -> list[Path]:
    """The certificates (and keys) a killed run or verify left behind (kill -9 skips their removal): a run's
    whose run is not running now (live_run_ids: the runs whose orchestrator is alive), a verify's whose process
    is gone. Removed, returned. Only this module's own folders are touched."""
    stale = []
    if results_dir is not None and (Path(results_dir) / "logs").is_dir():
        for run_dir in (Path(results_dir) / "logs").glob("run-*"):
            folder = run_dir / RUN_CERT_FOLDER
            run_id = run_dir.name.removeprefix("run-")
            if folder.is_dir() and run_id.isdigit() and int(run_id) not in live_run_ids:
                stale.append(folder)
    if verify_log_dir is not None and Path(verify_log_dir).is_dir():
        for folder in Path(verify_log_dir).glob(f"{VERIFY_CERT_PREFIX}*"):
            pid = folder.name.removeprefix(VERIFY_CERT_PREFIX)
            if folder.is_dir() and pid.isdigit() and int(pid) != os.getpid() and process_start_time(int(pid)) is None:
                stale.append(folder)
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    return stale


def make_run_certificate(folder: Path) -> RunCertificate:
    """Write server.pem and server.key, a self-signed certificate for localhost, 127.0.0.1 and ::1 valid for
    RUN_CERT_VALID_DAYS, into `folder` (made, mode 0700). A fresh key every time: nothing secret outlives a run."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    now = datetime.datetime.now(datetime.timezone.utc)
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netarena run server")])
    san = [x509.DNSName(n) for n in RUN_CERT_DNS] + [x509.IPAddress(ipaddress.ip_address(a)) for a in RUN_CERT_IPS]
    # Its own issuer, and not a CA: the client is given it as its trust anchor (--cacert, the checks' ssl
    # context) and meets it as the server's own certificate, which webpki (rustls) refuses to be a CA.
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=RUN_CERT_VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    out = RunCertificate(folder, folder / "server.pem", folder / "server.key")
    write_key(out.key, key)
    write_cert(out.cert, cert)
    return out
