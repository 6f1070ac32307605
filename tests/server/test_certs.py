"""Certificate generation and the ``certs`` command (issue item 4)."""
from __future__ import annotations

import base64
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook import cli
from webhook.server import certs


def _sans(pair: certs.KeyPair) -> x509.SubjectAlternativeName:
    return pair.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value


def test_serving_certificate_names_the_service_in_every_form_kubernetes_uses() -> None:
    ca = certs.make_ca()
    pair = certs.make_serving(ca, service="hook", namespace="infra")
    assert _sans(pair).get_values_for_type(x509.DNSName) == [
        "hook",
        "hook.infra",
        "hook.infra.svc",
        "hook.infra.svc.cluster.local",
    ]


def test_extra_dns_names_and_ip_addresses_are_added_once() -> None:
    ca = certs.make_ca()
    pair = certs.make_serving(ca, service="hook", namespace="infra", dns=["hook.example.com", "hook"], ips=["10.0.0.7", "::1"])
    sans = _sans(pair)
    assert sans.get_values_for_type(x509.DNSName)[-1] == "hook.example.com"
    assert sans.get_values_for_type(x509.DNSName).count("hook") == 1
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.7"), ipaddress.ip_address("::1")]


def test_serving_certificate_is_signed_by_the_ca_for_server_auth_only() -> None:
    ca = certs.make_ca()
    pair = certs.make_serving(ca, service="hook", namespace="infra")
    assert pair.cert.issuer == ca.cert.subject
    pair.cert.verify_directly_issued_by(ca.cert)  # raises when the signature does not verify
    usage = pair.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert pair.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_ca_may_sign_leaf_certificates_only() -> None:
    ca = certs.make_ca()
    constraints = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    assert ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign


def test_validity_follows_the_requested_days() -> None:
    ca = certs.make_ca()
    pair = certs.make_serving(ca, service="hook", namespace="infra", days=30)
    lifetime = pair.cert.not_valid_after_utc - pair.cert.not_valid_before_utc
    assert 30 * 86400 <= lifetime.total_seconds() <= 30 * 86400 + 600


def test_keys_are_written_owner_only_and_certificates_world_readable(tmp_path: Path) -> None:
    certs.ensure(tmp_path, service="hook", namespace="infra")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}


def test_an_existing_ca_is_kept_so_the_ca_bundle_stays_valid(tmp_path: Path) -> None:
    first = certs.ensure(tmp_path, service="hook", namespace="infra")
    first_leaf = (tmp_path / "tls.crt").read_bytes()
    again = certs.ensure(tmp_path, service="hook", namespace="infra")
    assert again.cert == first.cert
    assert (tmp_path / "tls.crt").read_bytes() != first_leaf
    fresh = certs.ensure(tmp_path, service="hook", namespace="infra", new_ca=True)
    assert fresh.cert != first.cert


def test_written_pair_round_trips(tmp_path: Path) -> None:
    ca = certs.make_ca()
    certs.write_pair(ca, cert_file=tmp_path / "a.crt", key_file=tmp_path / "a.key")
    loaded = certs.load_pair(tmp_path / "a.crt", tmp_path / "a.key")
    assert loaded.cert == ca.cert
    assert isinstance(loaded.key, ec.EllipticCurvePrivateKey)
    assert loaded.key.private_numbers() == ca.key.private_numbers()


def test_certs_command_writes_the_files_and_prints_the_ca_bundle_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = cli.main(["certs", "--service", "hook", "--namespace", "infra", "--out", str(out), "--dns", "hook.local", "--ip", "10.1.2.3"])
    printed = capsys.readouterr()
    assert code == 0
    assert base64.b64decode(printed.out.strip()) == (out / "ca.crt").read_bytes()
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert "hook.local" in leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "hook.infra.svc" in printed.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ip", "not-an-ip"], "does not appear to be an IPv4 or IPv6 address"),
        (["--days", "0"], "--days must be at least 1"),
    ],
)
def test_certs_command_rejects_bad_input_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code = cli.main(["certs", "--out", str(tmp_path / "out"), *argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
