"""metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics (what metrics-server serves), from data the
test sets. Served only when the server is built with ``metrics=True``; otherwise the group is
absent from discovery and its paths are 404, as on a cluster without metrics-server."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import JSON, not_found
from .registry import rfc3339
from .selectors import labels_match, parse_labels

API_VERSION = "metrics.k8s.io/v1beta1"


@dataclass
class MetricsData:
    nodes: dict[str, JSON] = field(default_factory=dict)  # name -> usage
    pods: dict[tuple[str, str], list[JSON]] = field(default_factory=dict)  # (ns, name) -> containers
    labels: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    window: str = "10s"

    def set_node(self, name: str, cpu: str, memory: str, labels: dict[str, str] | None = None) -> None:
        self.nodes[name] = {"cpu": cpu, "memory": memory}
        self.labels[("", name)] = dict(labels or {})

    def set_pod(self, namespace: str, name: str, containers: dict[str, tuple[str, str]],
                labels: dict[str, str] | None = None) -> None:
        self.pods[(namespace, name)] = [{"name": c, "usage": {"cpu": cpu, "memory": mem}}
                                        for c, (cpu, mem) in containers.items()]
        self.labels[(namespace, name)] = dict(labels or {})

    def _meta(self, ns: str, name: str) -> JSON:
        meta: JSON = {"name": name, "creationTimestamp": rfc3339()}
        if ns:
            meta["namespace"] = ns
        if self.labels.get((ns, name)):
            meta["labels"] = self.labels[(ns, name)]
        return meta

    def node(self, name: str) -> JSON:
        return {"metadata": self._meta("", name), "timestamp": rfc3339(), "window": self.window,
                "usage": self.nodes[name]}

    def pod(self, ns: str, name: str) -> JSON:
        return {"metadata": self._meta(ns, name), "timestamp": rfc3339(), "window": self.window,
                "containers": self.pods[(ns, name)]}

    def get(self, resource: str, ns: str | None, name: str) -> JSON:
        if resource == "nodes":
            if name not in self.nodes:
                raise not_found("metrics.k8s.io", "nodes", name)
            return {"kind": "NodeMetrics", "apiVersion": API_VERSION, **self.node(name)}
        if (ns or "", name) not in self.pods:
            raise not_found("metrics.k8s.io", "pods", name)
        return {"kind": "PodMetrics", "apiVersion": API_VERSION, **self.pod(ns or "", name)}

    def list(self, resource: str, ns: str | None, label_selector: str) -> JSON:
        reqs = parse_labels(label_selector) if label_selector else []
        items: list[Any]
        if resource == "nodes":
            items = [self.node(n) for n in sorted(self.nodes) if labels_match(reqs, self.labels.get(("", n)))]
            kind = "NodeMetricsList"
        else:
            items = [self.pod(pns, pname) for pns, pname in sorted(self.pods)
                     if (ns is None or pns == ns) and labels_match(reqs, self.labels.get((pns, pname)))]
            kind = "PodMetricsList"
        return {"kind": kind, "apiVersion": API_VERSION, "metadata": {}, "items": items}
