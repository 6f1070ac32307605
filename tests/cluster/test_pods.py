"""The one index of pods by node: kept from the pod informer's changes, heard by listeners after
it holds them, and shared by every controller on a view."""
from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.cluster.cache import ClusterCache
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.cluster.informer import ChangeHandler, Projected
from webhook.cluster.pods import PODS, PodsByNode
from webhook.labeler.controller import Labeler
from webhook.spot.config import SpotConfig
from webhook.spot.controller import SpotController


class Pods:
    """An informer's store and change handlers, driven by hand."""

    def __init__(self) -> None:
        self.store: dict[str, Projected] = {}
        self.handlers: list[ChangeHandler] = []

    def add_handler(self, handler: ChangeHandler) -> None:
        self.handlers.append(handler)

    def put(self, key: str, node: str | None) -> None:
        namespace, name = key.split("/")
        new = {"metadata": {"namespace": namespace, "name": name}, "spec": {"nodeName": node}}
        self._tell(key, new)

    def delete(self, key: str) -> None:
        self._tell(key, None)

    def _tell(self, key: str, new: Projected | None) -> None:
        old = self.store.pop(key, None)
        if new is not None:
            self.store[key] = new
        for handler in self.handlers:
            handler(key, old, new)


def test_a_pod_is_on_the_node_its_node_name_names_from_binding_to_deletion() -> None:
    pods = Pods()
    index = PodsByNode(pods)
    pods.put("shop/web-1", None)  # pending: on no node
    assert index.node_of("shop/web-1") is None and index.assigned_to("n1") == {}
    pods.put("shop/web-1", "n1")  # bound
    assert index.node_of("shop/web-1") == "n1" and list(index.assigned_to("n1")) == ["shop/web-1"]
    pods.put("shop/web-2", "n1")
    pods.delete("shop/web-1")
    assert list(index.assigned_to("n1")) == ["shop/web-2"] and index.node_of("shop/web-1") is None


def test_listeners_hear_the_node_left_and_the_node_now_once_the_index_holds_it() -> None:
    pods = Pods()
    index = PodsByNode(pods)
    heard: list[tuple[str, str | None, str | None, bool]] = []
    index.listen(lambda key, before, after, old, new: heard.append(
        (key, before, after, key in index.assigned_to(after or ""))))
    pods.put("shop/web-1", None)
    pods.put("shop/web-1", "n1")
    pods.put("shop/web-1", "n1")
    pods.delete("shop/web-1")
    assert heard == [("shop/web-1", None, None, False), ("shop/web-1", None, "n1", True),
                     ("shop/web-1", "n1", "n1", True), ("shop/web-1", "n1", None, False)]


KEYS = st.sampled_from(["a/p1", "a/p2", "b/p1", "b/p3"])
NODES = st.sampled_from([None, "n1", "n2", "n3"])
CHANGES = st.lists(st.one_of(st.tuples(st.just("put"), KEYS, NODES), st.tuples(st.just("delete"), KEYS, st.none())))


@given(CHANGES)
def test_the_index_is_always_the_store_grouped_by_node_name(changes: list[tuple[str, str, str | None]]) -> None:
    pods = Pods()
    index = PodsByNode(pods)
    for verb, key, node in changes:
        if verb == "put":
            pods.put(key, node)
        else:
            pods.delete(key)
    grouped: dict[str, dict[str, Any]] = {}
    for key, pod in pods.store.items():
        if pod["spec"]["nodeName"]:
            grouped.setdefault(pod["spec"]["nodeName"], {})[key] = pod
    assert {node: dict(index.assigned_to(node)) for node in ("n1", "n2", "n3") if index.assigned_to(node)} == grouped
    assert {key: index.node_of(key) for key in pods.store} == {
        key: pod["spec"]["nodeName"] or None for key, pod in pods.store.items()}


def test_the_labeler_and_the_spot_controller_on_one_view_share_one_index_and_one_pod_informer() -> None:
    client = Client(ClusterConfig("http://127.0.0.1:1"))  # never called: nothing starts
    cache = ClusterCache(client)
    labeler = Labeler(client, cache)
    spot = SpotController(client, cache, SpotConfig())
    assert labeler.pods is spot.pods is cache.pods_by_node(lambda pod: dict(pod))
    assert [name for name in cache.informers if name == PODS] == [PODS]
