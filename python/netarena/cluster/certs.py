"""The control plane's TLS files: one CA, and a certificate per role (scheduler, worker, client) signed by it.

Dask checks every peer's certificate against the CA (mutual TLS, `require_encryption`), so a worker or a
client without a certificate from this CA cannot connect. The CA's key stays in DIR, readable by its owner
only: keep it off the hosts, it signs new members. Made with the `cryptography` package.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from ..tls import new_key, write_cert, write_key

ROLES = ("scheduler", "worker", "client")
VALID_DAYS = 365


def make_certs(folder: Path, *, force: bool = False) -> dict[str, Path]:
    """Write ca.pem/ca.key and ROLE.pem/ROLE.key for each role into folder; refuses to overwrite unless force."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    names = ["ca.pem", "ca.key"] + [f"{r}.{ext}" for r in ROLES for ext in ("pem", "key")]
    existing = [n for n in names if (folder / n).exists()]
    if existing and not force:
        raise FileExistsError(f"{folder} already holds {', '.join(existing)}; pass --force to replace them "
                              "(every host then needs the new files)")
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca_key = new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netarena cluster CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    write_key(folder / "ca.key", ca_key)
    write_cert(folder / "ca.pem", ca)
    out = {"ca": folder / "ca.pem"}
    for role in ROLES:
        key = new_key()
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"netarena {role}")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                # Every role is both: a worker serves the scheduler and connects to it.
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        write_key(folder / f"{role}.key", key)
        write_cert(folder / f"{role}.pem", cert)
        out[role] = folder / f"{role}.pem"
    return out
