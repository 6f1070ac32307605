"""``placement-webhook extender``: the kube-scheduler extender for spot and on-demand capacity
(docs/extender.md). ``--print-scheduler-config`` prints the ``extenders:`` stanza to add to the
``KubeSchedulerConfiguration``, with ``ignorable: true`` so that an extender that is down never
blocks scheduling.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from webhook.commands import common
from webhook.exitcodes import Exit

if TYPE_CHECKING:
    from webhook.extender.component import ExtenderConfig
    from webhook.spot.config import SpotConfig

HELP = "serve the kube-scheduler extender for spot and on-demand capacity"
# The scheduler's default httpTimeout is 5 s; an answer takes milliseconds.
HTTP_TIMEOUT = "5s"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="the SpotConfig file (docs/extender.md); default: built-in")
    parser.add_argument("--address", "--host", dest="host", default="127.0.0.1", metavar="ADDR",
                        help="address to listen on (default: 127.0.0.1, this machine only; the chart passes "
                        "0.0.0.0, every address of the pod)")
    parser.add_argument("--port", type=common.whole(1), default=8888)
    parser.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (reloaded on change)")
    parser.add_argument("--tls-key", metavar="FILE")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="the cluster, for node names (nodeCacheCapable) and PriorityClasses "
                        "(default: the pod's service account, else $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME")
    parser.add_argument("--no-cluster", action="store_true",
                        help="no cluster view: only whole Node objects are judged (nodeCacheCapable: false)")
    parser.add_argument("--url-prefix", default="/", metavar="PATH", help="path the verbs are served under")
    parser.add_argument("--filter-verb", default="filter", metavar="VERB")
    parser.add_argument("--prioritize-verb", default="prioritize", metavar="VERB")
    parser.add_argument("--max-request-bytes", type=common.whole(1024), default=256 * 2**20, metavar="BYTES")
    parser.add_argument("--print-scheduler-config", metavar="URL",
                        help="print the KubeSchedulerConfiguration extenders stanza for the extender at URL "
                        "(e.g. https://placement-extender.placement-system.svc:8888) and exit")
    parser.add_argument("--weight", type=common.whole(1), default=5,
                        help="for --print-scheduler-config: the extender's weight (its 0..10 score x weight x 10 "
                        "meets the default plugins' weighted 0..100 scores)")
    parser.add_argument("--node-cache-capable", action=argparse.BooleanOptionalAction, default=True,
                        help="for --print-scheduler-config: send node names (default) or whole Node objects")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def scheduler_url(text: str) -> str:
    """The extender's base URL as the scheduler's ``urlPrefix`` needs it: ``http`` or ``https``,
    a host, an optional port, and nothing else (the path is ``--url-prefix``'s). ``ValueError``
    says what is wrong."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port  # a port that is not a number, or out of range, raises here
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r} must start with http:// or https://")
    if not parts.hostname or any(c.isspace() or c in "/\\" for c in parts.hostname):
        raise ValueError(f"{text!r} does not name a valid host")
    if port == 0:
        raise ValueError(f"{text!r} names port 0")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{text!r} carries a user name: the scheduler authenticates with tlsConfig, not in the URL")
    if parts.path not in ("", "/") or parts.query or parts.fragment or text.strip().endswith(("?", "#")):
        raise ValueError(f"{text!r} has more than scheme, host and port: give the path the verbs are served "
                         "under with --url-prefix")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def stanza(url: str, *, filter_verb: str, prioritize_verb: str, weight: int, node_cache_capable: bool,
           prefix: str = "/") -> dict[str, Any]:
    """The ``extenders`` entry of a ``KubeSchedulerConfiguration`` (v1 field names)."""
    base = url.rstrip("/") + ("/" + prefix.strip("/") if prefix.strip("/") else "")
    entry: dict[str, Any] = {"urlPrefix": base, "filterVerb": filter_verb, "prioritizeVerb": prioritize_verb,
                             "weight": weight, "nodeCacheCapable": node_cache_capable, "ignorable": True,
                             "httpTimeout": HTTP_TIMEOUT}
    if base.startswith("https://"):
        entry["enableHTTPS"] = True
        entry["tlsConfig"] = {"caFile": "/etc/kubernetes/placement-extender/ca.crt"}
    return entry


def run(args: argparse.Namespace) -> int:
    import yaml

    from webhook.runtime import logs

    if args.print_scheduler_config:
        try:
            url = scheduler_url(args.print_scheduler_config)
        except ValueError as exc:
            common.error("extender", f"--print-scheduler-config: {exc}")
            return Exit.USAGE
        entry = stanza(url, filter_verb=args.filter_verb,
                       prioritize_verb=args.prioritize_verb, weight=args.weight,
                       node_cache_capable=args.node_cache_capable, prefix=args.url_prefix)
        print("# Add to the KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1):")
        sys.stdout.write(yaml.safe_dump({"extenders": [entry]}, sort_keys=False))
        return Exit.OK
    if bool(args.tls_cert) != bool(args.tls_key):
        common.error("extender", "give --tls-cert and --tls-key together (or neither, for HTTP)")
        return Exit.USAGE
    settings = common.load_spot_config(args.config)
    if isinstance(settings, int):
        return settings
    config = extender_config(args)
    if isinstance(config, int):
        return config
    logs.setup(args.log_level)
    try:
        return asyncio.run(_serve(settings, config))
    except KeyboardInterrupt:
        return 130


def extender_config(args: argparse.Namespace) -> ExtenderConfig | int:
    """The flags as configuration (HTTPS when both --tls-cert and --tls-key are given), or exit
    code 2 after an error line."""
    from webhook.cluster import config as cluster_config
    from webhook.extender.component import ExtenderConfig

    where = None
    if not args.no_cluster:
        try:
            where = cluster_config.load(args.kubeconfig, args.context, user_default=True)
        except cluster_config.ConfigError as exc:
            common.error("extender", f"{exc} (or --no-cluster to judge whole Node objects only)")
            return Exit.USAGE
    tls = (Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert and args.tls_key else None
    return ExtenderConfig(host=args.host, port=args.port, tls=tls, cluster=where, url_prefix=args.url_prefix,
                          filter_verb=args.filter_verb, prioritize_verb=args.prioritize_verb,
                          max_request_bytes=args.max_request_bytes)


async def _serve(settings: SpotConfig, config: ExtenderConfig) -> int:
    from webhook.extender.component import component
    from webhook.runtime.run import CannotStart, run

    try:
        return await run(component(settings, config))
    except CannotStart as exc:
        common.error("extender", str(exc))
        return exc.code
