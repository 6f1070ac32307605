"""The serving certificate of the TLS server, reloaded from disk when it changes.

``CertificateSource`` serves whatever certificate is on disk right now. Secret volumes give no
reliable change events (the kubelet swaps a ``..data`` symlink), so the files are polled by the
digest of their content. Every reload builds a complete new ``SSLContext``; the listening
context only hands each new handshake over to the current one (``sni_callback`` runs for
every ClientHello, with or without SNI), so new connections get the new certificate while
established ones keep theirs, and a broken rotation can never damage the context in use.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

__all__ = ["CertInfo", "CertificateError", "CertificateSource", "describe"]


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
