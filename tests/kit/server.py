"""What the server tests share: a generated PKI, policy texts, metric samples."""
from __future__ import annotations

import copy
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.server import certs

ZONE_POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: zone
spec:
  match:
    kinds: [Deployment]
  placement:
    nodeSelector:
      zone: a
"""

BROKEN_POLICY = """\
apiVersion: placement.novasphere.dev/v1alpha1
kind: PlacementPolicy
metadata:
  name: broken
spec:
  placement:
    nodeSelectr: {disktype: ssd}
"""


@dataclass(frozen=True)
class Pki:
    """A CA and a serving certificate for localhost, written to ``folder``."""

    folder: Path
    ca: certs.KeyPair

    @property
    def cert(self) -> Path:
        return self.folder / "tls.crt"

    @property
    def key(self) -> Path:
        return self.folder / "tls.key"

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    def rotate(self) -> certs.KeyPair:
        """Write a new serving certificate (same CA) in place; returns it."""
        pair = certs.make_serving(self.ca, service="placement-webhook", namespace="default", dns=["localhost"], ips=["127.0.0.1"])
        certs.write_pair(pair, cert_file=self.cert, key_file=self.key)
        return pair

    def client_context(self, *, client: certs.KeyPair | None = None) -> ssl.SSLContext:
        """What the API server does: verify the chain and the host name."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if client is not None:
            folder = self.folder / f"client-{uuid.uuid4().hex[:8]}"
            certs.write_pair(client, cert_file=folder / "c.crt", key_file=folder / "c.key")
            ctx.load_cert_chain(folder / "c.crt", folder / "c.key")
        return ctx


def make_pki(folder: Path) -> Pki:
    certs.ensure(folder, service="placement-webhook", namespace="default", dns=["localhost"], ips=["127.0.0.1"])
    return Pki(folder, certs.load_pair(folder / "ca.crt", folder / "ca.key"))




def with_node_affinity_terms(obj: dict[str, Any], count: int) -> dict[str, Any]:
    """``obj`` with ``count`` required node-affinity terms (to force an engine error)."""
    obj = copy.deepcopy(obj)
    terms = [{"matchExpressions": [{"key": f"k{i}", "operator": "Exists"}]} for i in range(count)]
    obj["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    return obj


def many_terms_policy(count: int) -> str:
    """A policy whose required node affinity has ``count`` terms: ANDed into an object that
    has many terms too, the cross product passes the engine's 64-term limit."""
    terms = "".join(f"    - matchExpressions: [{{key: p{i}, operator: Exists}}]\n" for i in range(count))
    return (
        "apiVersion: placement.novasphere.dev/v1alpha1\nkind: PlacementPolicy\n"
        "metadata:\n  name: many-terms\nspec:\n  match:\n    kinds: [Deployment]\n"
        "  placement:\n    nodeAffinity:\n      required:\n" + terms.replace("    - ", "      - ")
    )


def sample(registry: Any, name: str, labels: dict[str, str] | None = None) -> float:
    """A metric sample's value, 0 when it was never set."""
    value = registry.get_sample_value(name, labels or {})
    return float(value or 0.0)
