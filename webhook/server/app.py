"""The admission server: aiohttp composition, routes, TLS and metrics sites, graceful shutdown.

Two applications share one ``State``: the TLS app (``/mutate`` and the probes) and the
plain-HTTP metrics app (``/metrics`` and the probes). The ``/mutate`` handler does transport
only: it reads the body, maps a bad review to HTTP 400 (the one place a review's errors become
HTTP statuses) and hands the request to ``admission.admit``, the function the dry-run CLI and
the policy test suites call too. Every other error answer (a wrong path or method, a request
the HTTP parser refuses) comes from ``errors``, in the same JSON shape.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from webhook.cluster.cache import ClusterCache
    from webhook.cluster.config import ClusterConfig
    from webhook.policy.sources import Assembled, LeftOut
    from webhook.audit.background import BackgroundAudit
    from webhook.server.status import StatusWriter

from webhook import codec
from webhook.cluster.view import ClusterView
from webhook.engine import admission, review
from webhook.policy import crd
from webhook.policy.policyset import PolicySet
from webhook.runtime import errors, logs, reload, run, sync
from webhook.runtime.run import Context
from webhook.runtime.tls import CertificateSource
from webhook.server import policies as policy_sources
from webhook.server import validation
from webhook.server.config import ServerConfig
from webhook.server.metrics import CONTENT_TYPE, RESULT_INVALID, Metrics
from webhook.server.policies import PolicySources

log = logging.getLogger(__name__)
# The logger of per-review lines.
REVIEW_LOGGER = "webhook.review"
review_log = logging.getLogger(REVIEW_LOGGER)

# An UPDATE review carries object and oldObject, each up to the API server's 3 MiB.
MAX_BODY = 7 * 1024 * 1024
# The validating webhook of PlacementPolicies (server/validation.py).
VALIDATE_POLICY = "/validate-policy"


class State:
    """What the handlers share: certificate and policy sources, metrics, the shutdown flag."""

    def __init__(self, config: ServerConfig, *, metrics: Metrics | None = None) -> None:
        self.config = config
        self.certs = CertificateSource(cert_file=config.tls_cert, key_file=config.tls_key, client_ca=config.client_ca)
        self.policies = PolicySources(config.policies, sources=config.policies_from, targets=config.targets)
        # One assembly at a time, whether files or objects changed.
        self.assembling = asyncio.Lock()
        self.object_changes = asyncio.Event()  # a PlacementPolicy's definition changed
        self.status: StatusWriter | None = None  # the status writer, with policies from the cluster
        self.audit: BackgroundAudit | None = None  # the background audit, with --audit-interval
        self.metrics = metrics if metrics is not None else Metrics()
        self.shutting_down = False
        # Reviews being read or answered (requests are unhashable): id -> their connection.
        self.in_flight: dict[int, asyncio.Transport | None] = {}
        self._quiet = asyncio.Event()  # set while nothing is in flight
        self._quiet.set()
        self._empty = PolicySet(targets=config.targets, loaded=False)
        self.cache: ClusterCache | None = None  # the watch-backed cluster view, when configured

    def begin(self, request: web.BaseRequest) -> None:
        self.in_flight[id(request)] = request.transport
        self._quiet.clear()

    def end(self, request: web.BaseRequest) -> None:
        self.in_flight.pop(id(request), None)
        if not self.in_flight:
            self._quiet.set()

    async def quiesce(self, timeout: float) -> bool:
        """Wait until no review is in flight; False when ``timeout`` ran out first."""
        try:
            await asyncio.wait_for(self._quiet.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def not_ready(self) -> list[str]:
        """Why the server should not receive traffic; empty when ready."""
        reasons = []
        if not self.certs.ready:
            reasons.append("no valid serving certificate loaded")
        if not self.policies.ready:
            reasons.append(self._no_policies())
        if self.shutting_down:
            reasons.append("shutting down")
        return reasons

    def _no_policies(self) -> str:
        files = self.policies.files
        if files is not None and files.loaded is None:
            return "no valid policy set loaded"
        informer = self.cache.informers.get(policy_sources.INFORMER) if self.cache is not None else None
        cause = f" ({informer.last_error})" if informer is not None and informer.last_error else ""
        if informer is not None and getattr(informer.last_exception, "status", None) == 404:
            cause = f" (404: the API server does not serve {crd.NAME}: is its CustomResourceDefinition installed?)"
        return f"the cluster's PlacementPolicies not listed yet{cause}"

    def cluster_view(self) -> ClusterView | None:
        """The cluster view admission may use: the cache while it is synced and has heard from
        the API server within the bound, else None (the checks that need it are skipped with
        a note). Memory only: admission never waits on the API server."""
        cache = self.cache
        if cache is None or not self.config.cluster_view:
            return None
        return cache if cache.fresh(self.config.cluster_view_max_age) else None

    def policy_set(self) -> PolicySet:
        current = self.policies.policies
        return current if current is not None else self._empty

    def reload_certificate(self) -> None:
        """Poll the certificate files once; count and log what happened."""
        result = self.certs.poll()
        if result is None:
            return
        self.metrics.certificate_reloads.labels("success" if result else "failure").inc()
        info = self.certs.info
        if result and info is not None:
            self.metrics.certificate_expiry.set(info.expiry_timestamp)
            log.info("serving certificate loaded", extra={"fields": {"serial": f"{info.serial:x}", "subject": info.subject, "notAfter": info.not_after.isoformat()}})
        elif info is not None:
            log.error("serving certificate not loaded, keeping the previous one", extra={"fields": {"error": self.certs.last_error}})
        else:  # nothing loaded yet: there is no previous one to keep, and the server is not ready
            log.error("serving certificate not loaded, none is serving", extra={"fields": {"error": self.certs.last_error}})

    async def reload_policies(self) -> None:
        """Poll the policy files once (in a thread: a large set takes a while to validate), and
        assemble the set again when they changed."""
        if self.policies.files is None:
            return
        async with self.assembling:
            result = await asyncio.to_thread(self.policies.poll_files)
            if result is None:
                return
            self.metrics.policy_reloads.labels("success" if result else "failure").inc()
            if result and self._objects_ready():
                self._published(await asyncio.to_thread(self.policies.assemble, None))
            elif not result and self.policies.files.loaded is not None:
                log.error("policy change rejected, the previous set keeps serving", extra={"fields": {"errors": self.policies.errors[:50]}})
            elif not result:  # nothing loaded yet: there is no previous set, and the server is not ready
                log.error("policy set not loaded, no set is serving", extra={"fields": {"errors": self.policies.errors[:50]}})

    def _objects_ready(self) -> bool:
        return not self.policies.cluster or self.policies.objects_listed

    async def assemble_objects(self) -> None:
        """Assemble the set again from the cluster's PlacementPolicies as the informer holds them."""
        informer = self.cache.informers[policy_sources.INFORMER] if self.cache is not None else None
        if informer is None or not informer.synced:
            return
        async with self.assembling:
            objects = informer.values()  # a snapshot, taken on the loop
            if not self.policies.can_assemble():  # the files never loaded: their policies are unknown
                self.policies.remember(objects)
                return
            assembled = await asyncio.to_thread(self.policies.assemble, objects)
            self._published(assembled)

    def _published(self, assembled: Assembled) -> None:
        """Serve ``assembled``; say what it is: its size and digest, and each definition newly left out."""
        previous = self.policies.left_out()
        self.policies.publish(assembled)
        current = assembled.policies
        self.metrics.policies_loaded.set(len(current))
        self.metrics.policies_left_out.set(len(assembled.left_out))
        log.info("policy set loaded", extra={"fields": {"policies": len(current), "digest": current.digest(),
                                                        "leftOut": sorted(assembled.left_out)}})
        for name, left in sorted(assembled.left_out.items()):
            if previous.get(name) != left:
                _log_left_out(name, left)
        if self.status is not None:
            self.status.wake.set()
        if self.audit is not None:  # the verdicts may have changed with the policies
            self.audit.wake.set()


def _log_left_out(name: str, left: LeftOut) -> None:
    """One error line for a definition left out: its first error in the message, all in the fields."""
    first = left.errors[0] if left.errors else None
    said = f": {first.field}: {first.message}" if first is not None and first.field else ""
    errors = [str(e) for e in left.errors][:50]
    log.error(f"PlacementPolicy {name} is not in force ({left.reason}){said}",
              extra={"fields": {"policy": name, "reason": left.reason, "errors": errors}})


STATE = web.AppKey("state", State)


def make_app(state: State) -> web.Application:
    """The TLS application: ``POST /mutate``, ``POST /validate-policy``, ``GET /healthz``,
    ``GET /readyz``, and the reloaders."""
    app = errors.install(web.Application(client_max_size=MAX_BODY))
    app[STATE] = state
    app.add_routes([web.post("/mutate", mutate), web.post(VALIDATE_POLICY, validate_policy),
                    web.get("/healthz", healthz), web.get("/readyz", readyz)])
    app.cleanup_ctx.extend(reloaders(state))
    app.cleanup_ctx.append(cluster_view)
    return app


def make_metrics_app(state: State) -> web.Application:
    """The plain-HTTP application: ``GET /metrics`` and the probes."""
    app = errors.install(web.Application())
    app[STATE] = state
    app.add_routes([web.get("/metrics", metrics), web.get("/healthz", healthz), web.get("/readyz", readyz)])
    return app


def reloaders(state: State) -> list[Context]:
    """Load the certificate, then the policies, before serving; poll both until shutdown."""

    async def certificate_step() -> None:
        state.reload_certificate()

    interval = state.config.reload_interval
    return [reload.periodically(certificate_step, interval=interval, name="certificate-reloader"),
            reload.periodically(state.reload_policies, interval=interval, name="policy-reloader")]


async def cluster_view(app: web.Application) -> AsyncIterator[None]:
    """Watch the cluster while serving, when configured: the view's resources and, with policies
    from the cluster, the PlacementPolicy objects (assembled into the set after each burst of
    changes; their status written by the holder of the Lease). Started, not awaited: readiness
    never waits for the view (admission uses it only once it is synced, ``State.cluster_view``),
    only for the first list of PlacementPolicies when the set is made of them."""
    state = app[STATE]
    config = state.config
    if config.cluster is None:
        yield
        return
    from webhook.cluster.cache import RESOURCES, ClusterCache
    from webhook.cluster.client import Client

    state.cache = ClusterCache(Client(config.cluster), match_label_keys=config.match_label_keys,
                               resources=RESOURCES if config.cluster_view else {})
    tasks = _watch_policies(state, state.cache) if state.policies.cluster else []
    tasks += _leader_work(state, state.cache)
    state.metrics.watch_cluster(state.cache.status)
    try:
        async with sync.watched(state.cache):
            log.info("cluster view started", extra={"fields": {
                "server": config.cluster.host, "view": config.cluster_view, "policies": state.policies.cluster}})
            started = [asyncio.create_task(work, name=name) for name, work in tasks]
            try:
                yield
            finally:
                for task in started:
                    task.cancel()
                await asyncio.gather(*started, return_exceptions=True)
    finally:
        for _, work in tasks:
            work.close()  # a coroutine that never started (closing a finished one does nothing)


def _watch_policies(state: State, cache: ClusterCache) -> list[tuple[str, Coroutine[Any, Any, None]]]:
    """The PlacementPolicy informer in ``cache``, and the work it feeds: the assembly after each
    burst of definition changes, and the status writer (``state.status``, run under the Lease)."""
    from webhook.server import status

    config = state.config
    informer = cache.add(policy_sources.INFORMER, policy_sources.PATH, policy_sources.project)
    writer = status.StatusWriter(cache.client, state.policies, informer,
                                 on_write=lambda result: state.metrics.policy_status_writes.labels(result).inc())
    state.status = writer

    def changed(key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if policy_sources.definition_changed(old, new):
            state.object_changes.set()
        else:
            writer.status_changed(key, new)

    informer.add_handler(changed)

    async def assemble() -> None:
        await informer.synced_event.wait()
        state.object_changes.clear()  # the first list's objects, all in the assembly below
        await state.assemble_objects()  # the first list, which may hold no object at all
        await policy_sources.follow(state.object_changes, state.assemble_objects)

    return [("policy-assembler", assemble())]


def _leader_work(state: State, cache: ClusterCache) -> list[tuple[str, Coroutine[Any, Any, None]]]:
    """The work only the holder of the Lease does: the status writer (policies from the cluster)
    and the background audit (``--audit-interval``); none, no Lease is stood for."""
    from webhook.cluster import config as cluster_config
    from webhook.runtime.leader import LeaderElectionConfig, default_identity
    from webhook.server import leading, status

    config = state.config
    works: dict[str, leading.Work] = {}
    writer = state.status
    if writer is not None:
        works["policy-status"] = lambda lost: writer.run(lost, interval=config.status_interval)
    if config.audit_interval > 0 and config.cluster is not None:
        audit = state.audit = _background_audit(state, cache, config.cluster)
        works["audit"] = lambda lost: audit.run(lost, interval=config.audit_interval)
    if not works:
        return []
    lease = LeaderElectionConfig(
        namespace=config.lease_namespace or cluster_config.pod_namespace() or "default", name=config.lease_name,
        identity=default_identity(), field_manager=status.FIELD_MANAGER)
    return [("leader", leading.lead(cache.client, lease, works))]


def _background_audit(state: State, cache: ClusterCache, where: ClusterConfig) -> BackgroundAudit:
    """The background audit of the cluster at ``where`` against the set in force, its reports
    written with ``cache``'s client, its figures in the server's metrics."""
    from webhook.audit.background import BackgroundAudit, SnapshotAudit, read_cluster
    from webhook.audit.writer import ReportWriter

    def refused(reason: str) -> None:
        state.metrics.audit_report_errors.labels(reason).inc()

    targets = state.config.targets
    return BackgroundAudit(ReportWriter(cache.client, on_error=refused), where=where,
                           policies=lambda: state.policies.policies, audit=SnapshotAudit(targets),
                           sink=state.metrics, read=functools.partial(read_cluster, kinds=targets))


# --- handlers ---------------------------------------------------------------------------------


async def mutate(request: web.Request) -> web.Response:
    """One AdmissionReview in, one out; bad input is a 4xx with a JSON error, never a 500."""
    state = request.app[STATE]
    state.begin(request)
    try:
        response = await _mutate(request, state)
    finally:
        state.end(request)
    if state.shutting_down:
        response.force_close()  # no further request on this connection: we are going away
    return response


async def _mutate(request: web.Request, state: State) -> web.Response:
    started = time.perf_counter()
    if request.content_type != "application/json":
        return _reject(state, started, 415, f"Content-Type must be application/json, not {request.content_type!r}")
    if request.content_length is not None and request.content_length > MAX_BODY:
        return _reject(state, started, 413, f"body of {request.content_length} bytes is over the {MAX_BODY}-byte limit")
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _reject(state, started, 413, f"body is over the {MAX_BODY}-byte limit")
    except web.RequestPayloadError as exc:  # a Content-Encoding that does not decode, a chunk cut short
        return _reject(state, started, 400, f"body could not be read: {errors.payload_problem(exc)}")
    try:
        req = review.parse(body)
    except review.BadReview as exc:
        return _reject(state, started, 400, str(exc))
    outcome = admission.admit(req, policies=state.policy_set(), cluster=state.cluster_view())
    if outcome.applied and not req.dry_run:  # a dry run changes nothing stored
        state.policies.count(outcome.applied)
    patch = codec.dumps(outcome.patch) if outcome.patch else b""
    answer = review.encoded_answer(req, patch=patch, warnings=outcome.warnings)
    seconds = time.perf_counter() - started
    state.metrics.observe_review(
        kind=outcome.target.kind if outcome.target is not None else "other",
        operation=req.operation,
        result=outcome.result,
        seconds=seconds,
        applied=outcome.applied,
        audited=outcome.audited,
        failed=outcome.failed,
    )
    logs.info(review_log, "review", _log_fields(req, outcome, patch, seconds))
    return web.Response(body=answer, content_type="application/json")


def _log_fields(request: review.Request, outcome: admission.Outcome, patch: bytes, seconds: float) -> dict[str, Any]:
    """The fields of the review's log line: the request, what admission did, the answer sent."""
    group, version = request.group, request.version
    fields: dict[str, Any] = {
        "uid": request.uid,
        "kind": f"{group}/{version}/{request.kind}" if group else f"{version}/{request.kind}",
        "namespace": request.namespace,
        "name": request.name,
        "operation": request.operation,
        "subResource": request.sub_resource,
        "dryRun": request.dry_run,
        "result": outcome.result,
        "applied": outcome.applied,
        "audited": outcome.audited,
        "failed": outcome.failed,
        "patchOperations": len(outcome.patch),
        "patchBytes": len(patch),
        "warnings": len(outcome.warnings),
        "durationMs": round(seconds * 1000, 3),
    }
    if outcome.error:
        fields["error"] = outcome.error
    if outcome.reason:  # why it was ignored or skipped: an owner, a subresource, the skip annotation
        fields["reason"] = outcome.reason
    return fields


def _reject(state: State, started: float, status: int, message: str) -> web.Response:
    state.metrics.observe_review(kind="", operation="", result=RESULT_INVALID, seconds=time.perf_counter() - started)
    review_log.warning("review rejected", extra={"fields": {"status": status, "error": message}})
    return errors.error_response(status, message)


async def validate_policy(request: web.Request) -> web.Response:
    """The validating webhook of PlacementPolicies: lint's verdict on the policy being applied,
    against the set in force (``validation``). Bad input is a 4xx, like ``/mutate``'s."""
    state = request.app[STATE]
    state.begin(request)
    try:
        body = await _body(request)
        if isinstance(body, web.Response):
            return body
        try:
            req = review.parse(body)
        except review.BadReview as exc:
            return errors.error_response(400, str(exc))
        verdict = validation.check(req, state.policies.assembled, targets=state.config.targets)
        review_log.info("policy review", extra={"fields": validation.log_fields(req, verdict)})
        return web.Response(body=codec.dumps(validation.answer(req, verdict)), content_type="application/json")
    finally:
        state.end(request)


async def _body(request: web.Request) -> bytes | web.Response:
    """The body of a review, or the 4xx answer to a request that has none to read."""
    if request.content_type != "application/json":
        return errors.error_response(415, f"Content-Type must be application/json, not {request.content_type!r}")
    if request.content_length is not None and request.content_length > MAX_BODY:
        return errors.error_response(413, f"body of {request.content_length} bytes is over the {MAX_BODY}-byte limit")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        return errors.error_response(413, f"body is over the {MAX_BODY}-byte limit")
    except web.RequestPayloadError as exc:
        return errors.error_response(400, f"body could not be read: {errors.payload_problem(exc)}")


async def healthz(request: web.Request) -> web.Response:
    """Alive: the event loop answers."""
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """Ready: certificate and policies loaded, not shutting down."""
    reasons = request.app[STATE].not_ready()
    if reasons:
        return errors.error_response(503, "not ready: " + "; ".join(reasons))
    return web.Response(text="ok\n")


async def metrics(request: web.Request) -> web.Response:
    body = request.app[STATE].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


# --- running -----------------------------------------------------------------------------------


async def serve(config: ServerConfig, *, on_ready: Callable[[State], None] | None = None) -> int:
    """Serve until SIGTERM or SIGINT, then shut down gracefully; returns the exit code."""
    state = State(config)
    return await run.run(component(state, on_ready=on_ready))


def component(state: State, *, on_ready: Callable[[State], None] | None = None) -> run.Component:
    """The admission server: the metrics port, then the TLS port (whose application loads the
    certificate and the policies, and watches the cluster). On a signal ``/readyz`` fails at
    once; the TLS port is drained (``_drain``) while the metrics port keeps answering."""
    config = state.config

    def shutting_down() -> None:
        state.shutting_down = True  # /readyz fails from this instant

    def ready() -> None:
        if on_ready is not None:
            on_ready(state)

    async def drain(runner: web.AppRunner) -> None:
        await _drain(runner, state, config.shutdown_grace)

    # The grace period is spent in ``_drain``; the runner's own timeout only bounds the
    # cancellation of reviews still unfinished after it.
    return run.Component(
        name="serve", log=log,
        endpoints=(run.Endpoint(make_metrics_app(state), config.host, config.metrics_port),
                   run.Endpoint(make_app(state), config.host, config.port, tls=state.certs, drain=drain)),
        describe=lambda: {"address": f"{config.host}:{config.port}", "metrics": f"{config.host}:{config.metrics_port}",
                          "notReady": state.not_ready()},
        stopping={"graceSeconds": config.shutdown_grace},
        on_ready=ready, on_stop=shutting_down)


async def _drain(runner: web.AppRunner, state: State, grace: float) -> None:
    """Stop listening, close idle keep-alive connections, let in-flight reviews finish.

    aiohttp's own shutdown closes every connection first and then ignores bytes still
    arriving on them, which would cut off a review whose body is still being uploaded;
    so only connections with nothing in flight are closed here. The metrics port keeps
    answering (``/readyz`` 503) meanwhile.
    """
    for site in list(runner.sites):
        await site.stop()
    busy = set(state.in_flight.values())
    for connection in runner.server.connections if runner.server else []:
        if connection.transport not in busy:
            connection.close()
    if not await state.quiesce(grace):
        log.warning("grace period over, cutting off reviews in flight", extra={"fields": {"inFlight": len(state.in_flight)}})
