"""Certificates for a deployment: one certificate authority, one key and certificate per party.

Every connection of a deployment is mutual TLS (gRPC's ``ssl_*_credentials``): each party
presents a certificate signed by the deployment's certificate authority (CA) and checks
the other's, and each party is authorised by the name in its certificate (its common
name and DNS subject-alternative name: ``server-3``, ``client-3-7``, ``aggregator``,
``dealer``, ``coordinator``). :func:`make_certificates` creates them with the
``cryptography`` package's X.509 builder (ECDSA P-256 keys, SHA-256 signatures), for local
tests or a first deployment; in production each party generates its own key and the
consortium's CA signs its certificate request (``docs/deploy.md``).

Files, in one folder: ``ca.pem`` (the CA's certificate: what every party trusts),
``NAME.pem`` and ``NAME.key`` per party (the key readable by its owner only, mode 0600).
The CA's key is written only with ``keep_ca_key`` (to sign parties added later).

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     paths = make_certificates(["server-0", "client-0-0"], d)
...     sorted(p.name for p in Path(d).iterdir())
['ca.pem', 'client-0-0.key', 'client-0-0.pem', 'server-0.key', 'server-0.pem']
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pgfl.files import FileError

__all__ = ["Identity", "make_certificates", "party_names"]

#: Validity of the certificates :func:`make_certificates` issues.
VALIDITY_DAYS = 30


def party_names(P: int, K: int, trusted: Iterable[str] = ()) -> list[str]:
    """Every party of a deployment of ``P`` units of ``K`` clients, plus trusted parties.

    >>> party_names(2, 1, ["aggregator"])
    ['coordinator', 'aggregator', 'server-0', 'server-1', 'client-0-0', 'client-1-0']
    """
    servers = [f"server-{p}" for p in range(P)]
    clients = [f"client-{p}-{k}" for p in range(P) for k in range(K)]
    return ["coordinator", *trusted, *servers, *clients]


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pgfl deployment"),
        ]
    )


def _alt_names(name: str, hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = [x509.DNSName(name)]
    for h in hosts:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            entries.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(entries)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.unlink(missing_ok=True)  # a new file: never written through a link
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def make_certificates(
    names: Iterable[str],
    folder: str | Path,
    *,
    hosts: Mapping[str, Iterable[str]] | None = None,
    keep_ca_key: bool = False,
) -> dict[str, Path]:
    """A CA and a certificate per party in ``folder``; the paths by name (``"ca"``: the CA).

    ``hosts[name]``: the host names or IP addresses the party is reached at (its
    certificate names them too; default ``127.0.0.1`` and ``localhost``).
    """
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FileError(f"cannot create the certificate folder {out} ({exc.strerror})") from None
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALIDITY_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("pgfl deployment CA")
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = {"ca": out / "ca.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    if keep_ca_key:
        _write_key(out / "ca.key", ca_key)
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        where = list((hosts or {}).get(name, ["127.0.0.1", "localhost"]))
        cert = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(_alt_names(name, where), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )  # fmt: skip
        (out / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(out / f"{name}.key", key)
        paths[name] = out / f"{name}.pem"
    return paths


@dataclass(frozen=True)
class Identity:
    """A party's TLS material: its name, its key and certificate, and the CA it trusts."""

    name: str
    key: bytes
    cert: bytes
    ca: bytes

    @classmethod
    def load(cls, folder: str | Path, name: str) -> Identity:
        """``NAME.key``, ``NAME.pem`` and ``ca.pem`` of ``folder`` (one line if missing)."""
        d = Path(folder)
        files = [d / f"{name}.key", d / f"{name}.pem", d / "ca.pem"]
        for f in files:
            if not f.is_file():
                raise FileError(
                    f"{f}: no such file (deploy.certs must hold ca.pem and {name}.pem/.key; "
                    "pgfl deploy CONFIG --make-certs DIR creates them)"
                )
        key, cert, ca = (f.read_bytes() for f in files)
        return cls(name, key, cert, ca)
