"""The extender's HTTP side: ``POST <prefix>/<filterVerb>`` and ``<prefix>/<prioritizeVerb>``,
``/healthz``, ``/readyz`` and ``/metrics``.

Every answer has a body. Input the extender cannot answer (not JSON, not an ExtenderArgs, too
large) gets, from filter, an ``ExtenderFilterResult`` whose ``Error`` says why (the scheduler
then treats the extender as failed, and skips it when it is ``ignorable``), and from
prioritize a 400 with a JSON error ``{"error", "status"}`` (the scheduler ignores prioritize
errors: ``prioritizeNodes`` in pkg/scheduler/core/generic_scheduler.go). A bug of ours is logged
and answered the same way, except that prioritize says 500; the server never dies of a request.

Nodes come from the request (whole Node objects) or, for node names (``nodeCacheCapable``),
from the cluster view; a name the view does not know passes the filter and scores 5. Without a
cluster view (``--no-cluster``) names cannot be judged at all: every node passes and scores 5, and
the extender says so loudly, without failing readiness (``Extender.warnings``).

Every other error answer (an unknown path, a wrong method, a body aiohttp cannot read) is JSON
``{"error", "status"}``, as on every server of the project (``webhook.runtime.errors``).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from webhook.runtime import probes
from webhook.extender import protocol
from webhook.extender.scoring import FactsCache, History, NodeFacts, filter_nodes, node_facts, prioritize
from webhook.runtime import errors
from webhook.spot.config import SpotConfig
from webhook.spot.nodes import Detector, classify

__all__ = ["Extender", "NodeSource", "make_app"]

log = logging.getLogger(__name__)
PREFIX = "placement_webhook_extender"
# The scheduler waits 5 s by default (DefaultExtenderTimeout); these buckets resolve the
# milliseconds an answer takes and still show a stall before the timeout.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0)
DEFAULT_MAX_BYTES = 256 * 2**20  # 1,000 whole Nodes with their images are tens of MiB
FIX_UNJUDGED = "run the extender with a cluster view, or set nodeCacheCapable: false in the scheduler's extenders entry"


class NodeSource(Protocol):
    """What the extender reads of the cluster view (``ClusterCache`` has both)."""

    def nodes(self) -> Any: ...

    def priority_class(self, name: str) -> Mapping[str, Any] | None: ...


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(f"{PREFIX}_requests", "Requests answered, by verb and result.", ["verb", "result"],
                                registry=r)
        self.duration = Histogram(f"{PREFIX}_request_duration_seconds", "Time to answer, by verb.", ["verb"],
                                  buckets=BUCKETS, registry=r)
        self.filtered = Counter(f"{PREFIX}_nodes_filtered", "Nodes filtered out, by reason.", ["reason"], registry=r)
        self.unjudged = Counter(f"{PREFIX}_unjudged_requests",
                                "Requests that named nodes (nodeCacheCapable: true) to an extender without a cluster "
                                "view (--no-cluster): every node passed and scored 5, by verb.", ["verb"], registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Extender:
    """Answers filter and prioritize from ``config``, the request and the cluster view."""

    def __init__(self, config: SpotConfig, *, view: NodeSource | None = None, clock: Callable[[], float] = time.time,
                 metrics: Metrics | None = None) -> None:
        self.config = config
        self.view = view
        self.clock = clock
        self.detector = Detector(config)
        self.history = History(config, clock)
        self.metrics = metrics or Metrics()
        self._facts = FactsCache(self.detector, config)
        self._unjudged: dict[str, int] = {}  # verb -> requests that named nodes without a view


    def saw_node(self, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """A node informer's change handler: a spot node newly marked for reclaim counts
        against its pool (``History``), whether or not a pod is being scheduled."""
        if new is not None and self.detector.reclaim(new, self.clock()) is not None:
            self.history.saw(new)

    def _known(self, args: protocol.ExtenderArgs, verb: str) -> Mapping[str, NodeFacts]:
        """The facts of the nodes a request is about: from its Node objects, or from the view
        (remembered between requests, recomputed only for the nodes that changed)."""
        if not args.names_mode:
            return node_facts(args.nodes, self.detector, self.config)
        if self.view is None:
            self._cannot_judge(verb)
            return {}
        return self._facts.of(self.view.nodes())

    def _cannot_judge(self, verb: str) -> None:
        """Node names without a view to look them up in: counted, and logged once per verb."""
        self.metrics.unjudged.labels(verb).inc()
        first = verb not in self._unjudged
        self._unjudged[verb] = self._unjudged.get(verb, 0) + 1
        if first:
            log.warning("node names sent to an extender without a cluster view: every node passes and scores 5",
                        extra={"fields": {"verb": verb, "fix": FIX_UNJUDGED}})

    def warnings(self) -> list[str]:
        """What ``/readyz`` says beside ``ok``: the requests answered without being judged.

        They do not fail readiness. The scheduler's entry is ``ignorable: true``, so an unready
        extender is skipped, which changes nothing for the pods (every node passes and scores 5
        either way); and an unready pod leaves the Service, so it would never hear that the
        scheduler was reconfigured, while whole-Node requests (another scheduler's) are still
        judged. Loud instead: a warning per verb, ``unjudged_requests_total``, and this."""
        return [f"{count} {verb} request(s) named nodes (nodeCacheCapable: true), which an extender without a "
                f"cluster view (--no-cluster) cannot judge: every node passed and scored 5; {FIX_UNJUDGED}"
                for verb, count in sorted(self._unjudged.items())]

    def _classify(self, pod: Mapping[str, Any]) -> Any:
        classes: dict[str, Mapping[str, Any]] = {}
        name = str((pod.get("spec") or {}).get("priorityClassName") or "")
        if name and self.view is not None:
            found = self.view.priority_class(name)
            if found is not None:
                classes[name] = found
        return classify(pod, self.config, classes)

    def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        known = self._known(args, "filter")
        outcome = filter_nodes(self._classify(args.pod), args.node_names, known, self.detector, self.config,
                               self.clock(), self.history)
        for reason, count in outcome.reasons.items():
            self.metrics.filtered.labels(reason).inc(count)
        return protocol.filter_result(args, outcome.passed, outcome.failed, outcome.unresolvable)

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        known = self._known(args, "prioritize")
        scores = prioritize(self._classify(args.pod), args.node_names, known, self.detector, self.config,
                            self.clock(), self.history)
        return protocol.priority_list(scores)


def make_app(extender: Extender, *, prefix: str = "/", filter_verb: str = "filter",
             prioritize_verb: str = "prioritize", max_bytes: int = DEFAULT_MAX_BYTES,
             not_ready: Callable[[], list[str]] = list) -> web.Application:
    base = "/" + prefix.strip("/") if prefix.strip("/") else ""
    metrics = extender.metrics

    async def read_args(request: web.Request) -> protocol.ExtenderArgs:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise protocol.BadArgs(f"the request is larger than {max_bytes} bytes") from None
        except web.RequestPayloadError as exc:
            raise protocol.BadArgs(f"the body could not be read: {errors.payload_problem(exc)}") from None
        return protocol.parse_body(body)

    async def filter_handler(request: web.Request) -> web.Response:
        started = time.perf_counter()
        result = "ok"
        names_mode: bool | None = None
        try:
            args = await read_args(request)
            names_mode = args.names_mode
            answer = extender.filter(args)
        except protocol.BadArgs as exc:
            result, answer = "bad-request", protocol.error_result(names_mode, str(exc))
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the extender down
            log.exception("filter failed")
            result, answer = "error", protocol.error_result(names_mode, f"internal error: {type(exc).__name__}")
        metrics.requests.labels("filter", result).inc()
        metrics.duration.labels("filter").observe(time.perf_counter() - started)
        return web.Response(body=protocol.encode(answer), content_type="application/json")

    async def prioritize_handler(request: web.Request) -> web.Response:
        started = time.perf_counter()
        result = "ok"
        try:
            response = web.Response(body=protocol.encode(extender.prioritize(await read_args(request))),
                                    content_type="application/json")
        except protocol.BadArgs as exc:
            result, response = "bad-request", errors.error_response(400, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug of ours, never an answer to bad input
            log.exception("prioritize failed")
            result, response = "error", errors.error_response(500, f"internal error: {type(exc).__name__}")
        metrics.requests.labels("prioritize", result).inc()
        metrics.duration.labels("prioritize").observe(time.perf_counter() - started)
        return response

    app = errors.install(web.Application(client_max_size=max_bytes))
    app.add_routes([web.post(f"{base}/{filter_verb}", filter_handler),
                    web.post(f"{base}/{prioritize_verb}", prioritize_handler),
                    *probes.routes(metrics=metrics.render, not_ready=not_ready, warnings=extender.warnings)])
    return app
