"""Certificates for the webhook: a CA, and serving certificates for ``SERVICE.NAMESPACE.svc``.

Used by ``placement-webhook certs``, ``serve --dev`` and the tests; files are written
atomically, keys readable by their owner only.
"""
from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.runtime.tls import CertificateError

CA_DAYS = 3650
SERVING_DAYS = 365


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use for an in-cluster webhook Service."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def make_ca(*, common_name: str = "placement-webhook-ca", days: int = CA_DAYS) -> KeyPair:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = _key_usage(key_cert_sign=True, crl_sign=True)
    cert = (
        _builder(name, name, key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def make_leaf(
    ca: KeyPair,
    *,
    common_name: str,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    days: int = SERVING_DAYS,
    client: bool = False,
) -> KeyPair:
    """A certificate signed by ``ca``: a TLS server certificate, or a client one for mTLS."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    usage = _key_usage(digital_signature=True)
    purpose = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        _builder(subject, ca.cert.subject, key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    sans = [x509.DNSName(n) for n in dns] + [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
    if sans:
        # Go (the API server) ignores the common name: the names must be SANs.
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def make_serving(
    ca: KeyPair, *, service: str, namespace: str, dns: Sequence[str] = (), ips: Sequence[str] = (), days: int = SERVING_DAYS
) -> KeyPair:
    """The webhook's serving certificate for its Service, plus extra names and addresses."""
    names = list(dict.fromkeys([*service_dns_names(service, namespace), *dns]))
    return make_leaf(ca, common_name=f"{service}.{namespace}.svc", dns=names, ips=ips, days=days)


def _key_usage(**enabled: bool) -> x509.KeyUsage:
    names = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
             "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
    return x509.KeyUsage(**{n: enabled.get(n, False) for n in names})


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # Tolerate clock skew between this machine and the cluster.
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
    )


def write_pair(pair: KeyPair, *, cert_file: Path, key_file: Path) -> None:
    """Write certificate (0644) and key (0600), each atomically so a watcher never sees half."""
    _write_atomic(cert_file, pair.cert_pem(), 0o644)
    _write_atomic(key_file, pair.key_pem(), 0o600)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)  # the umask must not loosen or tighten what we ask for
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load_pair(cert_file: Path, key_file: Path) -> KeyPair:
    """Read a CA written by ``write_pair`` back."""
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError(f"{key_file}: expected an EC private key")
    return KeyPair(cert, key)


def ensure(
    out: Path, *, service: str, namespace: str, dns: Iterable[str] = (), ips: Iterable[str] = (), days: int = SERVING_DAYS, new_ca: bool = False
) -> KeyPair:
    """Write ``ca.crt``/``ca.key`` (kept when present) and a fresh ``tls.crt``/``tls.key`` in ``out``.

    Keeping an existing CA keeps the webhook configuration's caBundle valid across renewals.
    Returns the CA.
    """
    ca_crt, ca_key = out / "ca.crt", out / "ca.key"
    if ca_crt.exists() and ca_key.exists() and not new_ca:
        ca = load_pair(ca_crt, ca_key)
    else:
        ca = make_ca()
        write_pair(ca, cert_file=ca_crt, key_file=ca_key)
    serving = make_serving(ca, service=service, namespace=namespace, dns=list(dns), ips=list(ips), days=days)
    write_pair(serving, cert_file=out / "tls.crt", key_file=out / "tls.key")
    return ca


def ca_bundle(ca: KeyPair) -> str:
    """The ``caBundle`` value of a webhook configuration: base64 of the CA's PEM."""
    return base64.b64encode(ca.cert_pem()).decode()
