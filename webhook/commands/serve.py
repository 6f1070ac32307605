"""``placement-webhook serve``: the admission server, configured by flags and ``PLACEMENT_WEBHOOK_*``.

Every flag has an environment variable named after it (``--tls-cert`` ->
``PLACEMENT_WEBHOOK_TLS_CERT``); a flag given on the command line wins over its variable.
``--dev`` fills in a local setup: certificates under ``certs/`` (made when missing),
policies from ``policies/``, listening on 127.0.0.1.
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.cluster.config import ClusterConfig
from webhook.commands import common
from webhook.exitcodes import Exit
from webhook.kube.kinds import Targets
from webhook.server.config import ServerConfig

ENV_PREFIX = "PLACEMENT_WEBHOOK_"
DEV_CERTS = Path("certs")
DEV_POLICIES = Path("policies")
DEV_EXAMPLE = Path("examples/review-deployment-v1.json")
HELP = "run the admission server"


class ConfigError(ValueError):
    """A flag or environment variable has an unusable value (exit code 2)."""


# Each parser raises ValueError saying what it expects and what it got: resolve() prefixes
# the variable's name, argparse the flag's (a raw int() or float() error names neither).


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false (1, yes, on / 0, no, off), not {text!r}")


def _path(text: str) -> Path:
    # Path("") is the working directory: an empty value would silently name a folder.
    if not text.strip():
        raise ValueError(f"must be a file path, not {text!r}")
    return Path(text)


def _policy_path(text: str) -> Path:
    if not text.strip():
        raise ValueError(f"must be a file or folder path, not {text!r}")
    return Path(text)


def _paths(text: str) -> list[Path]:
    paths = [Path(p) for p in text.split(os.pathsep) if p.strip()]
    if not paths:
        raise ValueError(f"must be a list of file or folder paths separated by {os.pathsep!r}, not {text!r}")
    return paths


def _port(text: str) -> int:
    digits = text.strip()
    # int() would also take "-1", "+5", "8_443" and non-ASCII digits.
    if not (digits.isascii() and digits.isdigit()) or int(digits) > 65535:
        raise ValueError(f"must be a port number from 0 to 65535, not {text!r}")
    return int(digits)


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < math.inf:  # also rejects NaN
        raise ValueError(f"must be a number of seconds >= 0, not {text!r}")
    return seconds


def _level(text: str) -> str:
    from webhook.server.logs import LEVELS

    if text.strip().lower() not in LEVELS:
        raise ValueError(f"must be one of {', '.join(LEVELS)}, not {text!r}")
    return text.strip().lower()


MODES = ("auto", "on", "off")


def _mode(text: str) -> str:
    if text.strip().lower() not in MODES:
        raise ValueError(f"must be one of {', '.join(MODES)}, not {text!r}")
    return text.strip().lower()


def _name(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


@dataclass(frozen=True)
class Option:
    """One setting: its flag, how its text parses, its default and its ``--dev`` default."""

    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None
    dev: Any = None

    @property
    def dest(self) -> str:
        return self.flag.replace("-", "_")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.flag.upper().replace("-", "_")


OPTIONS = (
    Option("policies", _paths, None, "policy folder or file (repeatable; env: os.pathsep-separated)", "PATH", dev=[DEV_POLICIES]),
    Option("tls-cert", _path, None, "serving certificate (PEM, may include the chain)", "FILE", dev=DEV_CERTS / "tls.crt"),
    Option("tls-key", _path, None, "serving certificate's private key (PEM)", "FILE", dev=DEV_CERTS / "tls.key"),
    Option("client-ca", _path, None, "CA bundle for client certificates: turns on mutual TLS", "FILE"),
    Option("host", str, "0.0.0.0", "address to listen on", "ADDR", dev="127.0.0.1"),
    Option("port", _port, 8443, "TLS port: /mutate, /healthz, /readyz", "PORT"),
    Option("metrics-port", _port, 8080, "plain-HTTP port: /metrics, /healthz, /readyz", "PORT"),
    Option("shutdown-grace", _seconds, 30.0, "seconds in-flight reviews get to finish after SIGTERM", "SECONDS"),
    Option("reload-interval", _seconds, 5.0, "seconds between checks of certificate and policy files", "SECONDS"),
    Option("kinds-config", _path, None, "YAML file declaring extra workload kinds", "FILE"),
    Option("log-level", _level, "info", "debug, info, warning or error", "LEVEL"),
    Option("kubeconfig", _path, None, "kubeconfig of the cluster view (default: the in-cluster service account)", "FILE"),
    Option("context", _name, None, "kubeconfig context of the cluster view (default: the current one)", "NAME"),
    Option("cluster-view", _mode, "auto",
           "watch nodes, namespaces and priority classes: on, off, or auto (on with --kubeconfig or in a pod)", "MODE"),
    Option("match-label-keys", _mode, "auto",
           "whether pod affinity honours matchLabelKeys: auto (from Kubernetes 1.31, by the server's version), "
           "on or off (for a cluster that changed the MatchLabelKeysInPodAffinity feature gate)", "MODE"),
    Option("cluster-view-max-age", _seconds, 120.0,
           "seconds without word from the API server after which the view's checks are skipped", "SECONDS"),
    Option("dev", _bool, False, "local setup: certs/ (made when missing), policies/, 127.0.0.1"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    for opt in OPTIONS:
        text = f"{opt.help} [env {opt.env}" + (f"; default {_shown(opt.default)}]" if opt.default not in (None, False) else "]")
        if opt.parse is _bool:
            parser.add_argument(f"--{opt.flag}", dest=opt.dest, action="store_const", const=True, default=None, help=text)
        elif opt.parse is _paths:  # the flag is repeated, one path each time
            kind = _flag_type(opt.flag, _policy_path)
            parser.add_argument(f"--{opt.flag}", dest=opt.dest, action="append", type=kind, default=None, metavar=opt.metavar, help=text)
        else:
            parser.add_argument(f"--{opt.flag}", dest=opt.dest, type=_flag_type(opt.flag, opt.parse), default=None, metavar=opt.metavar, help=text)


def _shown(value: Any) -> str:
    return str(value[0]) if isinstance(value, list) else str(value)


def _flag_type(flag: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its message, not argparse's "invalid <type> value"."""

    def parse_flag(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    parse_flag.__name__ = flag  # argparse names the type in some of its own messages
    return parse_flag


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings by precedence: flag, then environment variable, then ``--dev`` default, then default."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        flagged = getattr(args, opt.dest, None)
        if flagged is not None:
            values[opt.dest] = flagged
        elif environ.get(opt.env) is not None:
            try:
                values[opt.dest] = opt.parse(environ[opt.env])
            except ValueError as exc:
                raise ConfigError(f"{opt.env}: {exc}") from exc
    dev = bool(values.get("dev", False))
    for opt in OPTIONS:
        if opt.dest not in values:
            values[opt.dest] = opt.dev if dev and opt.dev is not None else opt.default
    for opt in OPTIONS[:3]:  # policies, tls-cert, tls-key
        if values[opt.dest] is None:
            raise ConfigError(f"--{opt.flag} (or {opt.env}) is required, or use --dev")
    return values


def run(args: argparse.Namespace) -> int:
    from webhook.server import logs

    try:
        values = resolve(args, os.environ)
    except ConfigError as exc:
        common.error("serve", str(exc))
        return Exit.USAGE
    targets = common.targets(argparse.Namespace(kinds_config=values["kinds_config"]), "serve")
    if targets is None:
        return Exit.USAGE
    try:
        values["cluster"] = cluster_config(values)
    except ConfigError as exc:
        common.error("serve", str(exc))
        return Exit.USAGE
    logs.setup(values["log_level"])
    if values["dev"]:
        _prepare_dev(values)
    return _serve(values, targets)


def cluster_config(values: Mapping[str, Any]) -> ClusterConfig | None:
    """Where the cluster view reads from, by ``--cluster-view``: ``off`` none; ``on`` the
    kubeconfig, else the pod's service account, or a usage error; ``auto`` the same when a
    kubeconfig is given or the server runs in a pod, else none. An API server that is
    merely unreachable is no error: the view starts stale and catches up."""
    from webhook.cluster import config as cluster_config_module

    mode, kubeconfig = values["cluster_view"], values["kubeconfig"]
    if mode == "off" or (mode == "auto" and kubeconfig is None and not cluster_config_module.in_pod()):
        return None
    try:
        return cluster_config_module.load(str(kubeconfig) if kubeconfig else None, values["context"])
    except cluster_config_module.ConfigError as exc:
        raise ConfigError(f"cluster view: {exc}") from exc


def _serve(values: dict[str, Any], targets: Targets) -> int:
    import asyncio

    from webhook.server import app

    cluster = values["cluster"]
    config = ServerConfig(
        policies=tuple(values["policies"]),
        tls_cert=values["tls_cert"],
        tls_key=values["tls_key"],
        client_ca=values["client_ca"],
        host=values["host"],
        port=values["port"],
        metrics_port=values["metrics_port"],
        shutdown_grace=values["shutdown_grace"],
        reload_interval=values["reload_interval"],
        targets=targets,
        cluster=cluster,
        cluster_view_max_age=values["cluster_view_max_age"],
        match_label_keys={"auto": None, "on": True, "off": False}[values["match_label_keys"]],
    )
    on_ready = _print_dev_example if values["dev"] else None
    try:
        return asyncio.run(app.serve(config, on_ready=on_ready))
    except OSError as exc:  # the port is taken, the address does not exist, ...
        common.error("serve", str(exc))
        return Exit.FINDINGS


def _prepare_dev(values: dict[str, Any]) -> None:
    """Make a local CA and serving certificate under ``certs/`` unless usable ones exist."""
    from webhook.server import certs

    cert, key = values["tls_cert"], values["tls_key"]
    if cert.parent != DEV_CERTS or key.parent != DEV_CERTS:
        return  # the user named their own files
    if cert.exists() and key.exists() and not _expires_soon(cert):
        return
    certs.ensure(DEV_CERTS, service="placement-webhook", namespace="default", dns=["localhost"], ips=["127.0.0.1", "::1"])
    print(f"made a development CA and serving certificate in {DEV_CERTS}/", file=sys.stderr)


def _expires_soon(cert: Path) -> bool:
    from webhook.server import tls

    try:
        info = tls.describe(cert.read_bytes())
    except (OSError, tls.CertificateError):
        return True
    return info.not_after - dt.datetime.now(dt.UTC) < dt.timedelta(days=1)


def _print_dev_example(state: Any) -> None:
    config = state.config
    print(
        "placement-webhook is serving. Try:\n"
        f"  curl --cacert {DEV_CERTS}/ca.crt -H 'Content-Type: application/json' \\\n"
        f"    --data-binary @{DEV_EXAMPLE} https://localhost:{config.port}/mutate\n"
        f"Metrics: curl http://localhost:{config.metrics_port}/metrics",
        flush=True,
    )
