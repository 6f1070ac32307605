"""The extender as a component: its verbs and probes on one port (HTTPS when given a certificate,
which is reloaded when its files change), and the cluster view the verbs read node names from."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from webhook.cluster.cache import NODES, ClusterCache
from webhook.cluster.client import Client
from webhook.cluster.config import ClusterConfig
from webhook.extender.app import DEFAULT_MAX_BYTES, Extender, make_app
from webhook.runtime import reload, sync
from webhook.runtime.run import CannotStart, Component, Context, Endpoint
from webhook.runtime.tls import CertificateSource
from webhook.spot.config import SpotConfig
from webhook.spot.nodes import node_projection

__all__ = ["CERTIFICATE_INTERVAL", "ExtenderConfig", "component"]

log = logging.getLogger("webhook.extender")
CERTIFICATE_INTERVAL = 10.0  # seconds between looks at the certificate files


@dataclass(frozen=True)
class ExtenderConfig:
    """Where the extender listens, its certificate (None: plain HTTP), the cluster it reads node
    names from (None: whole Node objects only), and its verbs."""

    host: str = "127.0.0.1"
    port: int = 8888
    tls: tuple[Path, Path] | None = None  # certificate and key
    cluster: ClusterConfig | None = None
    url_prefix: str = "/"
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    max_request_bytes: int = DEFAULT_MAX_BYTES


def component(settings: SpotConfig, config: ExtenderConfig) -> Component:
    """The extender judging by ``settings``, as ``config`` says."""
    cache = None
    contexts: list[Context] = []
    if config.cluster is not None:
        # Its projection keeps the annotations the reclaim detector reads.
        cache = ClusterCache(Client(config.cluster), projections={NODES: node_projection(settings)})
        contexts.append(sync.watching(cache))
    extender = Extender(settings, view=cache)
    if cache is not None:
        cache.informers[NODES].add_handler(extender.saw_node)
    certs = None
    if config.tls is not None:
        certs = CertificateSource(cert_file=config.tls[0], key_file=config.tls[1])
        contexts.append(certificates(certs))
    app = make_app(extender, prefix=config.url_prefix, filter_verb=config.filter_verb,
                   prioritize_verb=config.prioritize_verb, max_bytes=config.max_request_bytes,
                   not_ready=(lambda: sync.not_ready(cache)) if cache is not None else list)
    return Component(
        name="extender", log=log, endpoints=(Endpoint(app, config.host, config.port, tls=certs, shutdown_timeout=2.0),),
        contexts=tuple(contexts),
        describe=lambda: {"address": f"{config.host}:{config.port}", "tls": certs is not None,
                          "clusterView": cache is not None})


def certificates(certs: CertificateSource) -> Context:
    """The certificate loaded before the extender listens (one that does not load is a usage
    error), then looked at every ``CERTIFICATE_INTERVAL`` seconds; a broken rotation is logged and
    the certificate in use kept."""

    async def load() -> None:
        if certs.poll() is False:
            raise CannotStart(certs.last_error)

    async def reload_certificate() -> None:
        if certs.poll() is False:
            log.error("certificate reload failed", extra={"fields": {"error": certs.last_error}})

    return reload.periodically(reload_certificate, interval=CERTIFICATE_INTERVAL, name="certificate-reloader",
                               first=load)
