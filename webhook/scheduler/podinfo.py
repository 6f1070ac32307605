"""``framework.PodInfo``: what the scheduler reads of a pod, parsed once.

Affinity terms follow ``newAffinityTerm`` / ``GetAffinityTerms`` (pkg/scheduler/framework/types.go):
a term's namespaces are its ``namespaces`` list, or the pod's own namespace when the list is
empty and there is no ``namespaceSelector``; the selectors are ``LabelSelectorAsSelector``
(nil: nothing, empty: everything). ``matchLabelKeys``/``mismatchLabelKeys`` are merged into
the label selector as the API server does when it creates the pod (``updateLabelSelector`` in
pkg/registry/core/pod/strategy.go; MatchLabelKeysInPodAffinity, beta and on since v1.31, after
which the scheduler no longer merges them itself). Merging is idempotent, so a pod read back
from the API (already merged) is treated the same as a template.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.kube.affinity import PREFERRED, REQUIRED
from webhook.scheduler.labels import (
    NOTHING,
    Selector,
    compile_selector,
    str_labels,
)
from webhook.scheduler.resources import (
    Resource,
    non_zero_requests,
    pod_requests,
    to_resource,
)
from webhook.kube.times import timestamp

__all__ = ["AffinityTerm", "HostPort", "PodInfo", "WeightedTerm", "host_ports", "pod_key"]

HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort), sanitized as HostPortInfo does
_ids = itertools.count(1)
_NO_TERMS: tuple[Any, ...] = ()


class AffinityTerm:
    """``framework.AffinityTerm``; ``matches`` is ``AffinityTerm.Matches``."""

    __slots__ = ("namespaces", "ns_selector", "selector", "topology_key")

    def __init__(self, namespaces: frozenset[str], selector: Selector, topology_key: str, ns_selector: Selector) -> None:
        self.namespaces = namespaces
        self.selector = selector
        self.topology_key = topology_key
        self.ns_selector = ns_selector

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str]) -> bool:
        """The pod is in one of the term's namespaces (listed, or selected by the namespace
        selector over ``ns_labels``) and its labels match the term's selector."""
        if namespace in self.namespaces or (not self.ns_selector.nothing and self.ns_selector.matches(ns_labels)):
            return self.selector.matches(labels)
        return False

    def merged(self, namespace_labels: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
        """``mergeAffinityTermNamespacesIfNotEmpty``: the incoming pod's terms resolve their
        namespace selector against the namespaces that exist, once. An empty selector
        (Everything) is left as it is and keeps matching every namespace."""
        if self.ns_selector.empty or self.ns_selector.nothing:
            return self
        chosen = {ns for ns, labels in namespace_labels.items() if self.ns_selector.matches(labels)}
        return AffinityTerm(self.namespaces | chosen, self.selector, self.topology_key, NOTHING)


class WeightedTerm(AffinityTerm):
    """``framework.WeightedAffinityTerm``."""

    __slots__ = ("weight",)

    def __init__(self, term: AffinityTerm, weight: int) -> None:
        super().__init__(term.namespaces, term.selector, term.topology_key, term.ns_selector)
        self.weight = weight

    def merged(self, namespace_labels: Mapping[str, Mapping[str, str]]) -> WeightedTerm:
        return WeightedTerm(super().merged(namespace_labels), self.weight)


def _merge_label_keys(term: Mapping[str, Any], labels: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The term's labelSelector with matchLabelKeys (In) and mismatchLabelKeys (NotIn) added
    for each key the pod has; a nil selector stays nil (it matches nothing anyway)."""
    selector = term.get("labelSelector")
    match_keys, mismatch_keys = term.get("matchLabelKeys") or (), term.get("mismatchLabelKeys") or ()
    if selector is None or (not match_keys and not mismatch_keys):
        return selector
    extra = [{"key": k, "operator": op, "values": [labels[k]]}
             for keys, op in ((match_keys, "In"), (mismatch_keys, "NotIn")) for k in keys if k in labels]
    if not extra:
        return selector
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or ()), *extra]}


def _term(raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    ns_selector_raw = raw.get("namespaceSelector")
    listed = frozenset(str(n) for n in raw.get("namespaces") or ())
    # getNamespacesFromPodAffinityTerm: no list and no namespaceSelector means the pod's namespace.
    namespaces = frozenset({namespace}) if not listed and ns_selector_raw is None else listed
    return AffinityTerm(namespaces, compile_selector(_merge_label_keys(raw, labels)),
                        str(raw.get("topologyKey", "")), compile_selector(ns_selector_raw))


def _terms(raw: Sequence[Mapping[str, Any]] | None, namespace: str, labels: Mapping[str, str]) -> tuple[AffinityTerm, ...]:
    return tuple(_term(t, namespace, labels) for t in raw or ())


def _weighted(raw: Sequence[Mapping[str, Any]] | None, namespace: str, labels: Mapping[str, str]) -> tuple[WeightedTerm, ...]:
    return tuple(WeightedTerm(_term(t.get("podAffinityTerm") or {}, namespace, labels), int(t.get("weight") or 0))
                 for t in raw or ())


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """``schedutil.GetHostPorts``: ports with a hostPort of containers and of sidecars (init
    containers with restartPolicy Always), with HostPortInfo's defaults (0.0.0.0, TCP)."""
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += list(spec.get("containers") or ())
    return tuple((str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), int(p["hostPort"]))
                 for c in containers for p in c.get("ports") or () if int(p.get("hostPort") or 0) > 0)


def _guard(parse: Callable[[], tuple[Any, ...]], strict: bool) -> tuple[Any, ...]:
    try:
        return parse()
    except ValueError:
        if strict:
            raise
        return _NO_TERMS


def _start_time(status: Mapping[str, Any]) -> float | None:
    # A garbled startTime reads as none (the pod counts as starting now), not as an error.
    return timestamp(status.get("startTime"))


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName') or '(unnamed)'}"


class PodInfo:
    """One pod, parsed: identity, labels, priority, requests (as ``calculateResource`` counts
    them for a NodeInfo), host ports and its pod (anti-)affinity terms."""

    __slots__ = (
        "has_affinity",
        "id",
        "labels",
        "name",
        "namespace",
        "non0_cpu",
        "non0_mem",
        "obj",
        "ports",
        "preferred_affinity",
        "preferred_anti_affinity",
        "priority",
        "requests",
        "required_affinity",
        "required_anti_affinity",
        "start_time",
        "terminating",
    )

    def __init__(self, pod: Mapping[str, Any], *, strict: bool = True) -> None:
        """``strict``: raise ``ValueError`` for a selector the API would not accept (the pod
        being scheduled); otherwise drop that group of terms, as ``NewPodInfo``'s ignored
        error leaves a bound pod without them."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.id = next(_ids)
        self.obj = pod
        self.name = str(meta.get("name") or meta.get("generateName") or "")
        self.namespace = str(meta.get("namespace") or "default")
        self.labels = str_labels(meta.get("labels"))
        # corev1helpers.PodPriority: spec.priority, 0 when unset (admission fills it in).
        self.priority = int(spec.get("priority") or 0)
        self.start_time = _start_time(pod.get("status") or {})
        self.terminating = meta.get("deletionTimestamp") is not None
        requests = pod_requests(spec)
        self.requests: Resource = to_resource(requests)
        self.non0_cpu, self.non0_mem = non_zero_requests(spec, requests)
        self.ports = host_ports(spec)
        self._parse_affinity(spec.get("affinity") or {}, strict)

    def _parse_affinity(self, affinity: Mapping[str, Any], strict: bool) -> None:
        pod_affinity = affinity.get("podAffinity")
        anti = affinity.get("podAntiAffinity")
        # NodeInfo.PodsWithAffinity holds pods with a podAffinity or podAntiAffinity field.
        self.has_affinity = pod_affinity is not None or anti is not None
        if not self.has_affinity:
            self.required_affinity = self.required_anti_affinity = _NO_TERMS
            self.preferred_affinity = self.preferred_anti_affinity = _NO_TERMS
            return
        ns, labels = self.namespace, self.labels
        pod_affinity, anti = pod_affinity or {}, anti or {}
        self.required_affinity = _guard(lambda: _terms(pod_affinity.get(REQUIRED), ns, labels), strict)
        self.required_anti_affinity = _guard(lambda: _terms(anti.get(REQUIRED), ns, labels), strict)
        self.preferred_affinity = _guard(lambda: _weighted(pod_affinity.get(PREFERRED), ns, labels), strict)
        self.preferred_anti_affinity = _guard(lambda: _weighted(anti.get(PREFERRED), ns, labels), strict)

    def renamed(self, pod: Mapping[str, Any]) -> PodInfo:
        """Another replica of the same spec: the parse shared, a new identity and name."""
        clone = object.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            object.__setattr__(clone, slot, getattr(self, slot))
        clone.id = next(_ids)
        clone.obj = pod
        clone.name = str((pod.get("metadata") or {}).get("name") or self.name)
        return clone

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"
