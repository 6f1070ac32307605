"""Reading one of the chart's workloads out of a render: its objects, its Deployment's pod and
container, the container's command line through the real ``placement-webhook`` parser, and the
RBAC arithmetic the chart tests check grants with."""
from __future__ import annotations

import argparse
import contextlib
import io
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from webhook import cli

__all__ = ["ChartWorkload", "granted", "group_resource", "selects"]


@dataclass(frozen=True)
class ChartWorkload:
    """A workload the chart renders: its objects' ``name``, its ``app.kubernetes.io/component``
    label, and the ``placement-webhook`` verb its container runs."""

    name: str
    component: str
    verb: str

    def objects(self, rendered: Any) -> list[dict[str, Any]]:
        return [o for o in rendered.objects
                if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == self.component]

    def named(self, rendered: Any, kind: str, name: str | None = None) -> dict[str, Any]:
        wanted = self.name if name is None else name
        (found,) = [o for o in rendered.of_kind(kind) if o["metadata"]["name"] == wanted]
        return found

    def deployment(self, rendered: Any) -> dict[str, Any]:
        return self.named(rendered, "Deployment")

    def pod_spec(self, rendered: Any) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment(rendered)["spec"]["template"]["spec"]
        return spec

    def container(self, rendered: Any) -> dict[str, Any]:
        (only,) = self.pod_spec(rendered)["containers"]
        return only

    def parse(self, container: dict[str, Any]) -> argparse.Namespace:
        """The container's command line through the real ``placement-webhook`` parser."""
        assert container["command"] == ["placement-webhook", self.verb]
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                return cli.build_parser().parse_args([self.verb, *container["args"]])
        except SystemExit:
            pytest.fail(f"placement-webhook {self.verb} refuses the chart's args: {errors.getvalue()}")


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def group_resource(path: str) -> tuple[str, str]:
    """``/api/v1/pods?...`` -> ("", "pods"); ``/apis/scheduling.k8s.io/v1/priorityclasses`` -> (group, resource)."""
    parts = urlsplit(path).path.strip("/").split("/")
    return ("", parts[2]) if parts[0] == "api" else (parts[1], parts[3])
