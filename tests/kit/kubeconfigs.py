"""A kubeconfig of one cluster, one token user and one context, as the command tests write it."""
from __future__ import annotations

from pathlib import Path

import yaml


def token_kubeconfig(path: Path, server: str, *, token: str = "t", insecure: bool = False) -> Path:
    """Write, at ``path``, a kubeconfig reaching ``server`` with a bearer ``token``; ``insecure``
    skips verifying the server's certificate (an https test server of its own)."""
    cluster: dict[str, object] = {"server": server}
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path
