"""The serving certificate source: polling by digest, atomic swaps, broken rotations."""
from __future__ import annotations

import os
import ssl
from pathlib import Path

from tests.kit.server import Pki, make_pki
from webhook.runtime import tls


def _source(pki: Pki, *, client_ca: Path | None = None) -> tls.CertificateSource:
    return tls.CertificateSource(cert_file=pki.cert, key_file=pki.key, client_ca=client_ca)


def test_source_is_not_ready_until_a_valid_pair_is_loaded(tmp_path: Path) -> None:
    source = tls.CertificateSource(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key")
    assert source.poll() is False
    assert not source.ready
    assert "tls.crt" in source.last_error
    make_pki(tmp_path)
    assert source.poll() is True
    assert source.ready and source.last_error == ""


def test_unchanged_files_are_not_reloaded(pki: Pki) -> None:
    source = _source(pki)
    assert source.poll() is True
    assert source.poll() is None


def test_a_rewritten_certificate_is_loaded_with_its_serial_and_expiry(pki: Pki) -> None:
    source = _source(pki)
    source.poll()
    pair = pki.rotate()
    assert source.poll() is True
    assert source.info is not None
    assert source.info.serial == pair.cert.serial_number
    assert source.info.expiry_timestamp == pair.cert.not_valid_after_utc.timestamp()


def test_a_mismatched_key_keeps_the_previous_certificate_and_is_reported_once(pki: Pki, tmp_path: Path) -> None:
    source = _source(pki)
    source.poll()
    before = source.info
    other = make_pki(tmp_path / "other")
    pki.key.write_bytes(other.key.read_bytes())
    assert source.poll() is False
    assert "KEY_VALUES_MISMATCH" in source.last_error or "key values mismatch" in source.last_error
    assert source.ready and source.info == before
    assert source.poll() is None  # the same broken state is not reported again


def test_a_missing_key_during_rotation_is_tolerated(pki: Pki) -> None:
    source = _source(pki)
    source.poll()
    pki.key.unlink()
    assert source.poll() is False
    assert source.ready
    pair = pki.rotate()
    assert source.poll() is True
    assert source.info is not None and source.info.serial == pair.cert.serial_number


def test_a_secret_volume_symlink_swap_is_picked_up(tmp_path: Path) -> None:
    # The kubelet writes ..<timestamp>/ then atomically renames a new ..data symlink over the
    # old one; tls.crt and tls.key are symlinks through ..data.
    mount = tmp_path / "mount"
    mount.mkdir()
    first, second = make_pki(mount / "..2024_01_01"), make_pki(mount / "..2024_02_01")
    (mount / "..data").symlink_to("..2024_01_01")
    for name in ("tls.crt", "tls.key"):
        (mount / name).symlink_to(f"..data/{name}")
    source = tls.CertificateSource(cert_file=mount / "tls.crt", key_file=mount / "tls.key")
    assert source.poll() is True
    old_serial = source.info.serial if source.info else None
    (mount / "..data_tmp").symlink_to("..2024_02_01")
    os.replace(mount / "..data_tmp", mount / "..data")
    assert source.poll() is True
    assert source.info is not None and source.info.serial != old_serial
    assert source.info.serial == tls.describe(second.cert.read_bytes()).serial
    assert first.cert.exists()


def test_the_listening_context_refuses_anything_below_tls_1_2(pki: Pki) -> None:
    source = _source(pki)
    assert source.context.minimum_version == ssl.TLSVersion.TLSv1_2
    source.poll()
    assert source._current is not None and source._current.minimum_version == ssl.TLSVersion.TLSv1_2


def test_a_client_ca_turns_on_mutual_tls(pki: Pki) -> None:
    assert _source(pki).context.verify_mode == ssl.CERT_NONE
    assert _source(pki, client_ca=pki.ca_file).context.verify_mode == ssl.CERT_REQUIRED


def test_describe_rejects_text_that_is_not_a_certificate() -> None:
    try:
        tls.describe(b"-----BEGIN NONSENSE-----\n")
    except tls.CertificateError as exc:
        assert "not a PEM certificate" in str(exc)
    else:
        raise AssertionError("describe accepted garbage")
