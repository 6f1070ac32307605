"""TLS three ways: chart-generated self-signed, cert-manager, or an existing Secret plus caBundle."""
from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

SERVICE_NAMES = [
    "pw-placement-webhook",
    "pw-placement-webhook.placement-system",
    "pw-placement-webhook.placement-system.svc",
    "pw-placement-webhook.placement-system.svc.cluster.local",
]


def _pem(data: str) -> bytes:
    return base64.b64decode(data)


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    key = issuer.public_key()
    assert cert.signature_hash_algorithm is not None
    if isinstance(key, rsa.RSAPublicKey):
        key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    elif isinstance(key, ec.EllipticCurvePublicKey):
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    else:
        return False
    return cert.issuer == issuer.subject


def test_self_signed_mode_generates_a_ca_and_a_serving_certificate_it_signed(default: Any) -> None:
    secret = default.one("Secret")
    assert secret["type"] == "kubernetes.io/tls"
    ca = x509.load_pem_x509_certificate(_pem(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(_pem(secret["data"]["tls.crt"]))
    assert _signed_by(cert, ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert b"PRIVATE KEY" in _pem(secret["data"]["tls.key"])


def test_the_serving_certificate_names_every_way_to_reach_the_service(default: Any) -> None:
    cert = x509.load_pem_x509_certificate(_pem(default.one("Secret")["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert set(SERVICE_NAMES) <= set(names)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages


def test_the_webhook_trusts_the_generated_ca(default: Any) -> None:
    assert default.webhook["clientConfig"]["caBundle"] == default.one("Secret")["data"]["ca.crt"]


def test_the_deployment_mounts_the_generated_secret(default: Any) -> None:
    volumes = {v["name"]: v for v in default.pod_spec["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == default.one("Secret")["metadata"]["name"]


def test_self_signed_validity_follows_the_values(render: Callable[..., Any]) -> None:
    secret = render({"tls": {"selfSigned": {"validityDays": 30}}}).one("Secret")
    cert = x509.load_pem_x509_certificate(_pem(secret["data"]["tls.crt"]))
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert 29 <= lifetime.days <= 31


def test_cert_manager_mode_builds_a_private_ca_chain_and_injects_it(render: Callable[..., Any]) -> None:
    rendered = render({"tls": {"mode": "cert-manager"}})
    issuers = {i["metadata"]["name"]: i["spec"] for i in rendered.of_kind("Issuer")}
    assert issuers == {"pw-placement-webhook-selfsigned": {"selfSigned": {}}, "pw-placement-webhook-ca": {"ca": {"secretName": "pw-placement-webhook-ca"}}}
    certs = {c["metadata"]["name"]: c["spec"] for c in rendered.of_kind("Certificate")}
    assert certs["pw-placement-webhook-ca"]["isCA"] is True
    serving = certs["pw-placement-webhook-serving"]
    assert serving["issuerRef"] == {"name": "pw-placement-webhook-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert serving["secretName"] == "pw-placement-webhook-tls"
    assert serving["dnsNames"] == SERVICE_NAMES
    annotations = rendered.one("MutatingWebhookConfiguration")["metadata"]["annotations"]
    assert annotations["cert-manager.io/inject-ca-from"] == "placement-system/pw-placement-webhook-serving"
    assert "caBundle" not in rendered.webhook["clientConfig"], "cainjector owns caBundle"
    assert not rendered.of_kind("Secret")


def test_cert_manager_with_an_existing_issuer_only_requests_the_serving_certificate(render: Callable[..., Any]) -> None:
    ref = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    rendered = render({"tls": {"mode": "cert-manager", "certManager": {"issuerRef": ref}}})
    assert not rendered.of_kind("Issuer")
    assert rendered.one("Certificate")["spec"]["issuerRef"] == ref


def test_secret_mode_uses_the_given_secret_and_ca_bundle_and_creates_no_certificate(render: Callable[..., Any]) -> None:
    rendered = render({"tls": {"mode": "secret", "secretName": "corp-webhook-tls", "caBundle": "Q0FCVU5ETEU="}})
    assert not rendered.of_kind("Secret") and not rendered.of_kind("Certificate")
    volumes = {v["name"]: v for v in rendered.pod_spec["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "corp-webhook-tls"
    assert rendered.webhook["clientConfig"]["caBundle"] == "Q0FCVU5ETEU="
