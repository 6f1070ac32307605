"""Render the Helm chart with the real Helm engine (helm-python-sdk, no helm binary) for the tests.

Rendering is offline: ``lookup`` returns nothing, exactly as on a first ``helm install`` or a
``helm template``, so the self-signed mode generates its certificate.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk renders the chart; pip install helm-python-sdk")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "placement-webhook"
RELEASE = "pw"
NAMESPACE = "placement-system"

# Values that switch each TLS mode on, valid on their own.
CA_BUNDLE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"  # base64 of a PEM header: shape only
TLS_MODES: dict[str, dict[str, Any]] = {
    "self-signed": {},
    "cert-manager": {"tls": {"mode": "cert-manager"}},
    "cert-manager-issuer": {
        "tls": {"mode": "cert-manager", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}
    },
    "secret": {"tls": {"mode": "secret", "secretName": "my-webhook-tls", "caBundle": CA_BUNDLE}},
}


@dataclass(frozen=True)
class Rendered:
    """The objects one chart render produced, plus NOTES.txt."""

    objects: list[dict[str, Any]]
    notes: str

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
        return found[0]

    def kinds(self) -> set[str]:
        return {str(o["kind"]) for o in self.objects}

    @property
    def pod_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.one("Deployment")["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        containers: list[dict[str, Any]] = self.pod_spec["containers"]
        return containers[0]

    @property
    def webhook(self) -> dict[str, Any]:
        hooks: list[dict[str, Any]] = self.one("MutatingWebhookConfiguration")["webhooks"]
        assert len(hooks) == 1
        return hooks[0]


def render_chart(values: dict[str, Any] | None = None, *, namespace: str = NAMESPACE) -> Rendered:
    """Render the chart as ``helm install`` would, and split it into objects."""
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values=values, name=RELEASE, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    notes = ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(objects=objects, notes=notes)


@pytest.fixture(scope="session")
def render() -> Callable[..., Rendered]:
    return render_chart


@pytest.fixture(scope="session")
def default() -> Rendered:
    return render_chart()


@pytest.fixture(scope="session", params=sorted(TLS_MODES))
def each_mode(request: pytest.FixtureRequest) -> Iterator[tuple[str, Rendered]]:
    yield request.param, render_chart(TLS_MODES[request.param])


@pytest.fixture(scope="session")
def chart_dir() -> Path:
    return CHART
