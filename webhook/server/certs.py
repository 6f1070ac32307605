"""TLS for the admission server: the serving certificate source and certificate generation.

``CertificateSource`` serves whatever certificate is on disk right now. Secret volumes give no
reliable change events (the kubelet swaps a ``..data`` symlink), so the files are polled by the
digest of their content. Every reload builds a complete new ``SSLContext``; the listening
context only hands each new handshake over to the current one (``sni_callback`` runs for
every ClientHello, with or without SNI), so new connections get the new certificate while
established ones keep theirs, and a broken rotation can never damage the context in use.

``placement-webhook certs`` makes a CA and a serving certificate for ``SERVICE.NAMESPACE.svc``.
"""
from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import ssl
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

CA_DAYS = 3650
SERVING_DAYS = 365


# --- the serving certificate source -------------------------------------------------------


@dataclass(frozen=True)
class CertInfo:
    """What the server reports about the certificate it serves."""

    serial: int
    not_after: dt.datetime
    subject: str

    @property
    def expiry_timestamp(self) -> float:
        return self.not_after.timestamp()


class CertificateError(Exception):
    """The certificate files cannot be used (missing, unreadable, not a matching pair)."""


class CertificateSource:
    """The TLS context of the server, reloaded from ``cert_file``/``key_file`` on change."""

    def __init__(self, *, cert_file: str | Path, key_file: str | Path, client_ca: str | Path | None = None) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.client_ca = Path(client_ca) if client_ca else None
        self.info: CertInfo | None = None
        self.last_error = ""  # why the files on disk are not in use, when they are not
        self._current: ssl.SSLContext | None = None
        self._digest: str | None = None  # of the files behind ``_current``
        self._failed: str | None = None  # digest of the last broken state, to report it once
        self.context = self._new_context()
        self.context.sni_callback = self._hand_over

    @property
    def ready(self) -> bool:
        """True once a valid certificate and key are loaded."""
        return self._current is not None

    def poll(self) -> bool | None:
        """Reload when the files changed: True loaded, False broken (previous kept), None unchanged.

        A broken state raises nothing and is reported once (the caller logs the returned
        False with ``last_error``); polling retries it until the files change again.
        """
        try:
            digest = self._read_digest()
            if digest in (self._digest, self._failed):
                return None
            context, info = self._load()
            if self._read_digest() != digest:
                # Rotated while loading: the pair just loaded may mix old and new files.
                return None
        except CertificateError as exc:
            marker = f"error:{exc}"
            if marker == self._failed:
                return None
            self._failed, self.last_error = marker, str(exc)
            return False
        self._current, self._digest, self._failed, self.info = context, digest, None, info
        self.last_error = ""
        return True

    def _hand_over(self, conn: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> int | None:
        current = self._current
        if current is None:
            return ssl.ALERT_DESCRIPTION_INTERNAL_ERROR
        conn.context = current
        return None

    def _new_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        # aiohttp speaks HTTP/1.1 only; say so, or an h2-capable client may guess wrong.
        ctx.set_alpn_protocols(["http/1.1"])
        if self.client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def _read_digest(self) -> str:
        h = hashlib.sha256()
        for path in self._paths():
            h.update(_read(path))
            h.update(b"\0")
        return h.hexdigest()

    def _paths(self) -> list[Path]:
        return [self.cert_file, self.key_file] + ([self.client_ca] if self.client_ca else [])

    def _load(self) -> tuple[ssl.SSLContext, CertInfo]:
        ctx = self._new_context()
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
            if self.client_ca is not None:
                ctx.load_verify_locations(cafile=str(self.client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise CertificateError(f"{self.cert_file}, {self.key_file}: {exc}") from exc
        return ctx, describe(_read(self.cert_file))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CertificateError(f"{path}: {exc.strerror or exc}") from exc


def describe(cert_pem: bytes) -> CertInfo:
    """Serial, expiry and subject of the first certificate in a PEM bundle."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as exc:
        raise CertificateError(f"not a PEM certificate: {exc}") from exc
    return CertInfo(cert.serial_number, cert.not_valid_after_utc, cert.subject.rfc4514_string())


# --- generation -----------------------------------------------------------------------------


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


# --- the ``certs`` command ------------------------------------------------------------------


def configure_certs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service", default="placement-webhook", help="the webhook's Service name")
    parser.add_argument("--namespace", default="placement-webhook", help="the Service's namespace")
    parser.add_argument("--out", default="certs", type=Path, help="output folder (default: certs)")
    parser.add_argument("--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)")
    parser.add_argument("--ip", action="append", default=[], metavar="ADDR", help="extra IP address (repeatable)")
    parser.add_argument("--days", type=int, default=SERVING_DAYS, help=f"serving certificate validity (default {SERVING_DAYS})")
    parser.add_argument("--new-ca", action="store_true", help="replace an existing ca.crt/ca.key in --out")


def run_certs(args: argparse.Namespace) -> int:
    """Write the files, then print the caBundle alone on stdout (for scripts)."""
    try:
        for addr in args.ip:
            ipaddress.ip_address(addr)
        if args.days < 1:
            raise ValueError(f"--days must be at least 1, not {args.days}")
    except ValueError as exc:
        print(f"placement-webhook certs: {exc}", file=sys.stderr)
        return 2
    out: Path = args.out
    try:
        ca = ensure(out, service=args.service, namespace=args.namespace, dns=args.dns, ips=args.ip, days=args.days, new_ca=args.new_ca)
    except (OSError, ValueError, CertificateError) as exc:
        print(f"placement-webhook certs: {exc}", file=sys.stderr)
        return 1
    names = ", ".join(service_dns_names(args.service, args.namespace) + args.dns + args.ip)
    print(f"wrote {out}/ca.crt, ca.key, tls.crt, tls.key for {names}", file=sys.stderr)
    print("caBundle for the MutatingWebhookConfiguration:", file=sys.stderr)
    print(ca_bundle(ca))
    return 0
