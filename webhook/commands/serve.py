"""``placement-webhook serve``: the admission server, configured by flags and ``PLACEMENT_WEBHOOK_*``.

Every flag has an environment variable named after it (``--tls-cert`` ->
``PLACEMENT_WEBHOOK_TLS_CERT``); a flag given on the command line wins over its variable.
``--dev`` fills in a local setup listening on 127.0.0.1 (``dev_setup``): from the repository
root, ``policies/`` and certificates under ``certs/`` (made when missing); from anywhere else,
the policies of the checkout this package runs from and certificates in a per-user state folder.
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.cluster.config import ClusterConfig
from webhook.commands import common
from webhook.exitcodes import Exit
from webhook.kube.kinds import Targets
from webhook.server.config import ServerConfig

if TYPE_CHECKING:
    from webhook.server.app import State

ENV_PREFIX = "PLACEMENT_WEBHOOK_"
DEV_CERTS = Path("certs")
DEV_POLICIES = Path("policies")
DEV_EXAMPLE = Path("examples/review-deployment-v1.json")
# The folder holding the ``webhook`` package: a checkout when it was installed with
# ``pip install -e .`` or is run from source, site-packages when installed from the wheel.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
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
    from webhook.runtime.logs import LEVELS

    if text.strip().lower() not in LEVELS:
        raise ValueError(f"must be one of {', '.join(LEVELS)}, not {text!r}")
    return text.strip().lower()


MODES = ("auto", "on", "off")


def _mode(text: str) -> str:
    if text.strip().lower() not in MODES:
        raise ValueError(f"must be one of {', '.join(MODES)}, not {text!r}")
    return text.strip().lower()


_sources = common.policy_sources


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
    # Their --dev defaults depend on the folder serve runs in: DevSetup.
    Option("policies", _paths, None, "policy folder or file, read with --policies-from files "
           "(repeatable; env: os.pathsep-separated)", "PATH"),
    Option("tls-cert", _path, None, "serving certificate (PEM, may include the chain)", "FILE"),
    Option("tls-key", _path, None, "serving certificate's private key (PEM)", "FILE"),
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
    Option("policies-from", _sources, ("files",),
           "where the policies come from: files (--policies), cluster (the PlacementPolicy objects, read with "
           "--kubeconfig or the pod's service account, their status written), or files,cluster", "SOURCES"),
    Option("lease-name", _name, "placement-webhook",
           "the Lease whose holder (one replica) writes the PlacementPolicy objects' status and runs the background audit", "NAME"),
    Option("lease-namespace", _name, None, "namespace of that Lease (default: the pod's own, else default)", "NS"),
    Option("audit-interval", _seconds, 0.0,
           "seconds between background audits of the cluster against the policies, written as PolicyReports by "
           "the holder of the Lease (also after each policy change); 0: no background audit", "SECONDS"),
    Option("cluster-view-max-age", _seconds, 120.0,
           "seconds without word from the API server after which the view's checks are skipped", "SECONDS"),
    Option("dev", _bool, False, "local setup on 127.0.0.1: the repository's policies/ and a development "
           "certificate, made when missing (certs/ in the repository root, else a per-user state folder)"),
)


@dataclass(frozen=True)
class DevSetup:
    """Where ``--dev`` finds its files. ``policies`` is None when no shipped policies can be
    found (an installed wheel holds none); ``example`` is None when the sample review is not there."""

    certs: Path
    policies: Path | None
    example: Path | None
    in_repository: bool  # serve runs in the repository root (or a folder laid out like it)


def dev_setup(cwd: Path, environ: Mapping[str, str], *, package_root: Path | None = PACKAGE_ROOT) -> DevSetup:
    """In a folder with a ``policies/`` folder (the repository root), everything is relative to
    it, as the README's quick start shows. Anywhere else the policies and the sample review come
    from the checkout the package runs from, and the certificates go to the per-user state
    folder: ``serve --dev`` must not litter the folder it happens to be started in."""
    checkout = package_root if package_root is not None and _is_checkout(package_root) else None
    shipped_example = checkout / DEV_EXAMPLE if checkout is not None else None
    if (cwd / DEV_POLICIES).is_dir():
        example = DEV_EXAMPLE if (cwd / DEV_EXAMPLE).is_file() else shipped_example
        return DevSetup(certs=DEV_CERTS, policies=DEV_POLICIES, example=_existing(example, cwd), in_repository=True)
    return DevSetup(certs=dev_state_dir(environ) / "dev-certs",
                    policies=checkout / DEV_POLICIES if checkout is not None else None,
                    example=_existing(shipped_example, cwd), in_repository=False)


def _is_checkout(root: Path) -> bool:
    return (root / "setup.cfg").is_file() and (root / DEV_POLICIES).is_dir()


def _existing(path: Path | None, cwd: Path) -> Path | None:
    return path if path is not None and (cwd / path).is_file() else None


def dev_state_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/placement-webhook``, else ``~/.local/state/placement-webhook`` (the XDG
    base directory rules: a relative ``XDG_STATE_HOME`` is ignored)."""
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path(environ.get("HOME") or Path.home()) / ".local" / "state"
    return base / "placement-webhook"


NO_POLICIES = ("--dev: no policies/ folder here, and the installed package has no repository beside it "
               "(the shipped policies live in the repository's policies/, not in the wheel): "
               "run it from a checkout, or give --policies PATH")



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
    if isinstance(value, tuple):
        return ",".join(value)
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


def resolve(args: argparse.Namespace, environ: Mapping[str, str], *, dev_files: DevSetup | None = None) -> dict[str, Any]:
    """Settings by precedence: flag, then environment variable, then ``--dev`` default, then default.
    ``dev_files`` says where ``--dev`` finds its files (default: ``dev_setup`` in the working folder)."""
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
    from_files = "files" in values["policies_from"]
    if not from_files and values["policies"] is not None:
        raise ConfigError("--policies (or PLACEMENT_WEBHOOK_POLICIES) is read with --policies-from files or "
                          "files,cluster, not with --policies-from cluster alone")
    values["dev_files"] = None
    if dev:
        files = dev_files if dev_files is not None else dev_setup(Path.cwd(), environ)
        values["dev_files"] = files
        defaults = {"policies": [files.policies] if files.policies is not None and from_files else None,
                    "tls_cert": files.certs / "tls.crt", "tls_key": files.certs / "tls.key"}
        for name, value in defaults.items():
            if values[name] is None:
                values[name] = value
        if values["policies"] is None and from_files:
            raise ConfigError(NO_POLICIES)
    for opt in OPTIONS[:3]:  # policies, tls-cert, tls-key
        if values[opt.dest] is None and (opt.dest != "policies" or from_files):
            raise ConfigError(f"--{opt.flag} (or {opt.env}) is required, or use --dev")
    return values


def run(args: argparse.Namespace) -> int:
    from webhook.runtime import logs

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
    """Where the cluster is, when the server reads one: for its view (``view_on``) or for its
    policies (``--policies-from cluster``): the kubeconfig, else the pod's service account, or
    a usage error (a server never picks up a user's kubeconfig of its own accord). An API
    server that is merely unreachable is no error: the view starts stale and catches up."""
    from webhook.cluster import config as cluster_config_module

    if not view_on(values) and "cluster" not in values.get("policies_from", ("files",)) and not audit_on(values):
        return None
    kubeconfig = values["kubeconfig"]
    try:
        return cluster_config_module.load(str(kubeconfig) if kubeconfig else None, values["context"])
    except cluster_config_module.ConfigError as exc:
        what = "cluster view" if view_on(values) else "--audit-interval" if audit_on(values) else "--policies-from cluster"
        raise ConfigError(f"{what}: {exc}") from exc


def audit_on(values: Mapping[str, Any]) -> bool:
    """``--audit-interval`` above 0: the server reads the cluster and writes PolicyReports."""
    return float(values.get("audit_interval") or 0.0) > 0


def view_on(values: Mapping[str, Any]) -> bool:
    """``--cluster-view``: ``on``; ``off``; ``auto``, on when a kubeconfig is given or the server
    runs in a pod."""
    from webhook.cluster import config as cluster_config_module

    mode = values["cluster_view"]
    return mode == "on" or (mode == "auto" and (values["kubeconfig"] is not None or cluster_config_module.in_pod()))


def server_config(values: Mapping[str, Any], targets: Targets) -> ServerConfig:
    """The resolved settings (``resolve``, with ``cluster`` from ``cluster_config``) as the server's configuration."""
    return ServerConfig(
        policies=tuple(values["policies"] or ()),
        tls_cert=values["tls_cert"],
        tls_key=values["tls_key"],
        client_ca=values["client_ca"],
        host=values["host"],
        port=values["port"],
        metrics_port=values["metrics_port"],
        shutdown_grace=values["shutdown_grace"],
        reload_interval=values["reload_interval"],
        targets=targets,
        cluster=values["cluster"],
        cluster_view=view_on(values),
        policies_from=tuple(values["policies_from"]),
        lease_name=values["lease_name"],
        lease_namespace=values["lease_namespace"],
        cluster_view_max_age=values["cluster_view_max_age"],
        audit_interval=values["audit_interval"],
        match_label_keys={"auto": None, "on": True, "off": False}[values["match_label_keys"]],
    )


def _serve(values: dict[str, Any], targets: Targets) -> int:
    import asyncio

    from webhook.server import app

    config = server_config(values, targets)
    files = values.get("dev_files")
    on_ready = None if files is None else (lambda state: _print_dev_example(state, files))
    try:
        return asyncio.run(app.serve(config, on_ready=on_ready))
    except OSError as exc:  # the port is taken, the address does not exist, ...
        common.error("serve", str(exc))
        return Exit.FINDINGS


def _prepare_dev(values: dict[str, Any]) -> None:
    """Say where the local setup's files come from, and make a local CA and serving certificate
    in the development certificate folder unless usable ones exist."""
    from webhook.server import certs

    files: DevSetup = values["dev_files"]
    if not files.in_repository and values["policies"] == [files.policies]:
        print(f"serve --dev: no policies/ here: loading the repository's, {files.policies}", file=sys.stderr)
    cert, key = values["tls_cert"], values["tls_key"]
    if cert.parent != files.certs or key.parent != files.certs:
        return  # the user named their own files
    if cert.exists() and key.exists() and not _expires_soon(cert):
        print(f"serve --dev: the development certificate in {files.certs}/", file=sys.stderr)
        return
    certs.ensure(files.certs, service="placement-webhook", namespace="default", dns=["localhost"], ips=["127.0.0.1", "::1"])
    print(f"serve --dev: made a development CA and serving certificate in {files.certs}/", file=sys.stderr)


def _expires_soon(cert: Path) -> bool:
    from webhook.runtime import tls

    try:
        info = tls.describe(cert.read_bytes())
    except (OSError, tls.CertificateError):
        return True
    return info.not_after - dt.datetime.now(dt.UTC) < dt.timedelta(days=1)


def _print_dev_example(state: State, files: DevSetup) -> None:
    """A ready-to-run ``curl`` that posts the sample review, printed only when the CA and the
    sample it names exist; otherwise what is missing, plainly."""
    config = state.config
    ca = config.tls_cert.parent / "ca.crt"
    url = f"https://localhost:{config.port}/mutate"
    if files.example is not None and ca.is_file():
        hint = (f"Try:\n  curl --cacert {shlex.quote(str(ca))} -H 'Content-Type: application/json' \\\n"
                f"    --data-binary {shlex.quote(f'@{files.example}')} {url}")
    elif files.example is None:
        hint = (f"No sample AdmissionReview here ({DEV_EXAMPLE} is in the repository, not in the installed "
                f"package): POST your own to {url}")
    else:
        hint = f"POST an AdmissionReview to {url} (no {ca} beside {config.tls_cert} to give curl as --cacert)"
    print(f"placement-webhook is serving. {hint}\nMetrics: curl http://localhost:{config.metrics_port}/metrics", flush=True)
