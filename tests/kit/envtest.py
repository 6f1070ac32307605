"""An envtest-style control plane for the end-to-end tier: etcd and kube-apiserver on loopback, and
the webhook as a real ``placement-webhook serve`` subprocess over TLS.

This follows controller-runtime's envtest convention: ``KUBEBUILDER_ASSETS`` names a folder holding
the ``etcd`` and ``kube-apiserver`` binaries (``hack/envtest-assets.sh`` prints one, building it when
nothing else provides it). Here the control plane is etcd and kube-apiserver; the tests that need
kube-scheduler or kube-controller-manager start them from the same folder (see ``Scheduler``). Imported by name (``from envkit import ...``); ``conftest`` puts this
folder on the path.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.kit.e2e_workloads import RESOURCES

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "placement-webhook"
SKIP_REASON = (
    "the e2e tier needs a real API server: set KUBEBUILDER_ASSETS to a folder holding the "
    "kube-apiserver and etcd binaries (`export KUBEBUILDER_ASSETS=\"$(hack/envtest-assets.sh)\"` finds or "
    "builds one); see docs/install.md"
)
BINARIES = ("etcd", "kube-apiserver")


def find_assets(environ: dict[str, str] | None = None) -> Path | None:
    """The KUBEBUILDER_ASSETS folder when it holds both binaries, else None."""
    value = (environ if environ is not None else dict(os.environ)).get("KUBEBUILDER_ASSETS", "")
    if not value:
        return None
    folder = Path(value)
    if all(os.access(folder / name, os.X_OK) for name in BINARIES):
        return folder
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], bool], *, what: str, timeout: float = 60.0, interval: float = 0.25) -> None:
    """Poll ``check`` until it holds; readiness of real processes cannot be faked."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


@dataclass
class Process:
    """A child process whose output goes to a log file, stopped politely then firmly."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, *, grace: float = 15.0) -> int | None:
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        code = self.popen.returncode
        self.popen = None
        return code

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def answers(self, url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
        """Whether ``url`` answers 200; a process that died fails at once, with its output."""
        if not self.running():
            raise RuntimeError(f"{self.name} exited early; last output:\n{self.tail()}")
        return _get(url, context=context, token=token) == 200


def _get(url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def make_certs(out: Path, *, service: str, ips: list[str], dns: list[str]) -> Path:
    """CA + serving certificate with the project's own ``placement-webhook certs`` command."""
    argv = [sys.executable, "-m", "webhook", "certs", "--service", service, "--namespace", "default", "--out", str(out)]
    for name in dns:
        argv += ["--dns", name]
    for ip in ips:
        argv += ["--ip", ip]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"placement-webhook certs failed: {done.stderr}")
    return out


def make_service_account_key(path: Path) -> Path:
    """The key kube-apiserver signs and checks service-account tokens with (required flags)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
    return path


# An audit.k8s.io/v1 Policy for ``ControlPlane(audit_policy=...)``: every write, once (at
# ResponseComplete), with who made it; a node patch with its body too; an Eviction also when it
# is received, so that one still in the API server's hands shows (RequestReceived without its
# ResponseComplete, by auditID). Reads are left out: they are most of the traffic and say nothing
# about who changed what.
_ONCE: list[str] = ["RequestReceived"]  # omitted: one event a request, when it is answered
AUDIT_WRITES: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "rules": [
        {"level": "None", "users": ["system:apiserver"]},  # its own bootstrap objects and endpoints
        {"level": "Metadata", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods/eviction"]}]},
        {"level": "Request", "verbs": ["patch"], "resources": [{"group": "", "resources": ["nodes"]}],
         "omitStages": _ONCE},
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"],
         "omitStages": _ONCE},
        {"level": "None"},
    ],
}


@dataclass
class ControlPlane:
    """etcd + kube-apiserver on loopback, with an admin bearer token in ``system:masters``.

    ``users`` each get a token of their own, in ``system:masters`` too (``write_kubeconfig(path,
    user=...)``), so the API server tells their requests apart from the admin's. With
    ``audit_policy`` (an ``audit.k8s.io/v1`` Policy, e.g. ``AUDIT_WRITES``) the API server logs
    the requests it selects to ``audit_log``, one JSON event a line (``audit_events``)."""

    assets: Path
    workdir: Path
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    etcd_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    processes: list[Process] = field(default_factory=list)
    users: tuple[str, ...] = ()
    audit_policy: Mapping[str, Any] | None = None
    tokens: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.tokens = {"envtest-admin": self.token, **{user: secrets.token_hex(16) for user in self.users}}

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events so far (none without ``audit_policy``); a line the API server
        is still writing is left for the next read."""
        if not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                events.append(json.loads(line))
        return events

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "apiserver-pki" / "ca.crt"

    def start(self) -> None:
        self._start_etcd()
        self._start_apiserver()

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def _start_etcd(self) -> None:
        peer = free_port()
        client_url = f"http://127.0.0.1:{self.etcd_port}"
        etcd = Process("etcd", [
            str(self.assets / "etcd"),
            "--name=envtest",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=envtest=http://127.0.0.1:{peer}",
            # A throw-away store: durability only costs time here.
            "--unsafe-no-fsync=true",
        ], self.workdir / "etcd.log")
        etcd.start()
        self.processes.append(etcd)
        wait_until(lambda: etcd.answers(f"{client_url}/health"), what="etcd /health")

    def _apiserver_argv(self) -> list[str]:
        pki = make_certs(self.workdir / "apiserver-pki", service="kubernetes", ips=["127.0.0.1"], dns=["localhost"])
        sa_key = make_service_account_key(self.workdir / "sa.key")
        tokens = self.workdir / "tokens.csv"
        tokens.write_text("".join(f'{token},{user},{user},"system:masters"\n' for user, token in self.tokens.items()))
        tokens.chmod(0o600)
        return [
            str(self.assets / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.api_port}",
            f"--tls-cert-file={pki / 'tls.crt'}",
            f"--tls-private-key-file={pki / 'tls.key'}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={sa_key}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # No controller creates service-account tokens here (envtest does the same).
            "--disable-admission-plugins=ServiceAccount",
            *self._audit_flags(),
        ]

    def _audit_flags(self) -> list[str]:
        if self.audit_policy is None:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(json.dumps(self.audit_policy, indent=2))  # JSON is YAML
        # Blocking: each event is written in the request's own goroutine, none dropped under load.
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                "--audit-log-mode=blocking"]

    def _start_apiserver(self) -> None:
        apiserver = Process("kube-apiserver", self._apiserver_argv(), self.workdir / "kube-apiserver.log")
        apiserver.start()
        self.processes.append(apiserver)
        self._wait_apiserver_ready(apiserver)

    def _wait_apiserver_ready(self, apiserver: Process) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        wait_until(
            lambda: apiserver.answers(f"{self.url}/readyz", context=context, token=self.token),
            what="kube-apiserver /readyz",
            timeout=120,
        )

    def api_client(self, *, retries: bool | None = None) -> Any:
        """A kubernetes ``ApiClient`` with the admin token; ``retries=False``: a refused connection
        fails at once (urllib3 retries it three times by default)."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.retries = retries
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"authorization": self.token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(configuration)

    def write_kubeconfig(self, path: Path, *, user: str = "envtest-admin") -> Path:
        """A kubeconfig for the admin token (or ``user``'s, one of ``users``), as a server
        outside the cluster would be given.

        The token is one in ``--token-auth-file`` (group ``system:masters``, so RBAC lets it
        list and watch everything); the CA is the one that signed the serving certificate.
        JSON is valid YAML, so ``clientcmd`` and the official Python loader both read it."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "envtest", "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": {"token": self.tokens[user]}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
            "current-context": "envtest",
        }
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    def server_version(self) -> tuple[int, int]:
        """(major, minor) from GET /version; minor may carry a "+" on vendor builds."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        request = urllib.request.Request(f"{self.url}/version", headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            info = json.load(response)
        return int(re.sub(r"\D", "", info["major"])), int(re.sub(r"\D", "", info["minor"]))

    def _apiserver(self) -> Process:
        return next(p for p in self.processes if p.name == "kube-apiserver")

    @contextlib.contextmanager
    def apiserver_stopped(self, *, grace: float = 15.0) -> Iterator[Outage]:
        """kube-apiserver is down inside the block; etcd keeps running, so no object is lost.

        It is stopped as a kubelet stops a container: SIGTERM, then SIGKILL after ``grace``
        seconds (kube-apiserver drains for up to 60 s while watches are open). It comes back
        with the same argv (port, certificates, token file): every client keeps its
        configuration. Go listeners set SO_REUSEADDR, so the port can be bound again at once
        even with connections of the old process in TIME_WAIT. The ``Outage`` yielded gets its
        times as they happen (monotonic clock)."""
        apiserver = self._apiserver()
        outage = Outage(stopping=time.monotonic())
        apiserver.stop(grace=grace)
        outage.stopped = time.monotonic()
        try:
            yield outage
        finally:
            outage.starting = time.monotonic()
            apiserver.start()
            self._wait_apiserver_ready(apiserver)
            outage.ready = time.monotonic()


@dataclass
class Outage:
    """When a process was asked to stop, was gone, was started again and answered ready
    (``time.monotonic()``; 0.0 until it happened)."""

    stopping: float
    stopped: float = 0.0
    starting: float = 0.0
    ready: float = 0.0

    @property
    def down(self) -> float:
        """Seconds from the stop signal to ready again."""
        return self.ready - self.stopping


@dataclass
class Webhook:
    """``placement-webhook serve`` over TLS on loopback, as the API server reaches it by URL.

    With ``kubeconfig`` it also keeps the cluster view (``--cluster-view on``), which forgets
    what it knows after ``view_max_age`` seconds without word from the API server, unless
    ``cluster_view`` is False. ``policies_from`` is ``--policies-from``: with ``cluster`` it reads
    the cluster's PlacementPolicy objects (``policies`` None: no policy files at all)."""

    workdir: Path
    policies: Path | None
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    kubeconfig: Path | None = None
    view_max_age: int = 30
    policies_from: str = "files"
    cluster_view: bool = True
    process: Process | None = field(default=None, init=False)

    @property
    def pki(self) -> Path:
        return self.workdir / "webhook-pki"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"

    @property
    def validate_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/validate-policy"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode((self.pki / "ca.crt").read_bytes()).decode()

    def _argv(self) -> list[str]:
        argv = [
            sys.executable, "-m", "webhook", "serve",
            f"--policies-from={self.policies_from}",
            *([f"--policies={self.policies}"] if self.policies is not None else []),
            f"--tls-cert={self.pki / 'tls.crt'}",
            f"--tls-key={self.pki / 'tls.key'}",
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--metrics-port={self.metrics_port}",
            "--shutdown-grace=2",
        ]
        if self.kubeconfig is not None:
            argv += [f"--kubeconfig={self.kubeconfig}", f"--cluster-view={'on' if self.cluster_view else 'off'}",
                     f"--cluster-view-max-age={self.view_max_age}"]
        return argv

    def start(self) -> None:
        if not (self.pki / "tls.crt").exists():
            make_certs(self.pki, service="placement-webhook", ips=["127.0.0.1"], dns=["localhost"])
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_WEBHOOK_")}
        self.process = Process("placement-webhook", self._argv(), self.workdir / "webhook.log", env=env)
        self.process.start()
        process = self.process
        wait_until(
            lambda: process.answers(f"http://127.0.0.1:{self.metrics_port}/readyz"),
            what="placement-webhook /readyz",
        )

    def stop(self) -> int | None:
        code = self.process.stop() if self.process else None
        self.process = None
        return code

    def readyz(self) -> tuple[int, int]:
        """/readyz on the plain port and on the TLS port (0: no answer at all)."""
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        plain = _get(f"http://127.0.0.1:{self.metrics_port}/readyz")
        return plain, _get(f"https://127.0.0.1:{self.port}/readyz", context=context)

    def metrics(self) -> str:
        """The Prometheus exposition of the metrics port; a dead server fails with its output."""
        if self.process is None or not self.process.running():
            tail = self.process.tail() if self.process else ""
            raise RuntimeError(f"placement-webhook is not running; last output:\n{tail}")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    def view_metric(self, name: str, resource: str) -> float | None:
        """``placement_webhook_cluster_view_<name>{resource=...}``, or None when not exported."""
        return metric_value(self.metrics(), f"placement_webhook_cluster_view_{name}", {"resource": resource})


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def metric_value(text: str, name: str, labels: Mapping[str, str]) -> float | None:
    """The value of the sample ``name{labels}`` in a Prometheus text exposition."""
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None or sample["name"] != name:
            continue
        found = {m["key"]: m["value"] for m in _LABEL.finditer(sample["labels"] or "")}
        if found == dict(labels):
            return float(sample["value"])
    return None


# k8s.io/apimachinery/pkg/util/net.NewWarningHeader: `299 - "text"`, the text a quoted-string
# with `"` and `\` escaped by a backslash. The API server adds one header per warning
# (Header().Add in endpoints/filters/warning.go); urllib3 joins repeated headers with ", ".
_WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')


def warnings_from_headers(headers: Any) -> list[str]:
    """The texts of the ``Warning`` response headers (RFC 7234 form) the API server sent."""
    values: Iterable[str]
    if hasattr(headers, "getlist"):
        values = headers.getlist("Warning")
    else:
        values = [v for k, v in dict(headers or {}).items() if k.lower() == "warning"]
    return [re.sub(r"\\(.)", r"\1", m) for value in values for m in _WARNING.findall(value)]


def webhook_configuration(*, url: str, ca_bundle: str, kind: str = "MutatingWebhookConfiguration",
                          values: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chart's own MutatingWebhookConfiguration (or ``kind``: the ValidatingWebhookConfiguration
    of PlacementPolicies, with ``values`` reading them from the cluster), pointed at a webhook
    outside the cluster."""
    import helm_python
    import yaml

    chosen = {"webhook": {"url": url}, "tls": {"mode": "secret", "secretName": "unused", "caBundle": ca_bundle},
              **(values or {})}
    with helm_python.Chart.load(CHART) as chart:
        manifests = chart.render(values=chosen, name="e2e", namespace="placement-system", is_install=True)
    for path, text in manifests.items():
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                return doc
    raise LookupError(f"the chart rendered no {kind}")


# A minimal KubeVirt VirtualMachine CRD: the real one's names and scope, and a schema that keeps
# every field (KubeVirt's own schema is large; the webhook treats the object as raw JSON anyway).
VM_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "virtualmachines.kubevirt.io"},
    "spec": {
        "group": "kubevirt.io",
        "scope": "Namespaced",
        "names": {"plural": "virtualmachines", "singular": "virtualmachine", "kind": "VirtualMachine",
                  "listKind": "VirtualMachineList", "shortNames": ["vm", "vms"]},
        "versions": [{
            "name": "v1",
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }},
        }],
    },
}


@contextlib.contextmanager
def stopped(webhook: Webhook) -> Iterator[None]:
    """The webhook is down inside the block and serving again after it."""
    webhook.stop()
    try:
        yield
    finally:
        webhook.start()


# --- kube-scheduler: the real scheduler, for holding `explain` against it -----------------------

SCHEDULER = "kube-scheduler"


def find_binary(assets: Path, name: str) -> Path | None:
    """``name`` in the assets folder when it is there and executable, else None."""
    binary = assets / name
    return binary if os.access(binary, os.X_OK) else None


def find_scheduler(assets: Path) -> Path | None:
    """``kube-scheduler`` in the assets folder. setup-envtest ships etcd, kube-apiserver and
    kubectl only; the tests that compare ``explain`` with the real scheduler need the
    kube-scheduler binary of the same release copied next to them."""
    return find_binary(assets, SCHEDULER)


def scheduler_skip_reason(assets: Path) -> str:
    return (
        f"{SCHEDULER} is missing from KUBEBUILDER_ASSETS ({assets}): comparing `explain` with the real "
        f"scheduler needs an executable {SCHEDULER} next to etcd and kube-apiserver (setup-envtest does not "
        "ship it: copy the kube-scheduler binary of the same Kubernetes release there, or let "
        "hack/envtest-assets.sh build the whole control plane)"
    )


def binary_version(binary: Path) -> tuple[int, int] | None:
    """(major, minor) from ``binary --version`` (``Kubernetes v1.19.16``); None when unreadable."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"v(\d+)\.(\d+)", done.stdout + done.stderr)
    return (int(found[1]), int(found[2])) if found else None


def insecure_context() -> ssl.SSLContext:
    """TLS without verification, for a server's self-signed serving certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass
class Component:
    """A control-plane binary run beside a ``ControlPlane`` with the admin kubeconfig.

    It serves /healthz only on its secure port (a free one, loopback, a self-signed certificate
    in ``--cert-dir``), with delegated authentication and authorization through the same
    kubeconfig, so the admin token is accepted there. Leader election is off: it acts from the
    start. The insecure port of v1.19-v1.22 (on every interface by default) is turned off with
    ``--port=0``, which v1.23 still accepts (as its only value) and v1.24 dropped. Subclasses
    name the binary (``NAME``), its certificate folder (``PKI``) and their own ``flags``."""

    NAME: ClassVar[str] = ""
    PKI: ClassVar[str] = ""

    control_plane: ControlPlane
    workdir: Path
    port: int = field(default_factory=free_port)
    process: Process | None = field(default=None, init=False)

    @property
    def binary(self) -> Path:
        return self.control_plane.assets / self.NAME

    @property
    def healthz(self) -> str:
        return f"https://127.0.0.1:{self.port}/healthz"

    def flags(self) -> list[str]:
        """What this component adds to the common serving flags."""
        return []

    def argv(self, kubeconfig: Path, version: tuple[int, int] | None) -> list[str]:
        argv = [
            str(self.binary),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            *self.flags(),
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / self.PKI}",
            # Level 2 logs each decision (a pod's scheduling attempt): the log says why, when a test fails.
            "--v=2",
        ]
        if version is not None and version < (1, 24):
            argv.append("--port=0")
        return argv

    def start(self) -> None:
        kubeconfig = self.control_plane.write_kubeconfig(self.workdir / f"{self.PKI.removesuffix('-pki')}.kubeconfig")
        version = binary_version(self.binary) or self.control_plane.server_version()
        process = Process(self.NAME, self.argv(kubeconfig, version), self.workdir / f"{self.NAME}.log")
        self.process = process
        process.start()
        context = insecure_context()
        wait_until(
            lambda: process.answers(self.healthz, context=context, token=self.control_plane.token),
            what=f"{self.NAME} /healthz",
            timeout=60,
        )

    def stop(self) -> int | None:
        code = self.process.stop() if self.process else None
        self.process = None
        return code

    def running(self) -> bool:
        return self.process is not None and self.process.running()

    def tail(self, lines: int = 40) -> str:
        return self.process.tail(lines) if self.process else ""


@dataclass
class Scheduler(Component):
    """kube-scheduler with its default profile."""

    NAME: ClassVar[str] = SCHEDULER
    PKI: ClassVar[str] = "scheduler-pki"


CONTROLLER_MANAGER = "kube-controller-manager"


@dataclass
class ControllerManager(Component):
    """kube-controller-manager running only ``controllers`` (the old names, which every release
    since 1.19 accepts), with the admin credentials rather than a service account per controller
    (no token controller runs here)."""

    NAME: ClassVar[str] = CONTROLLER_MANAGER
    PKI: ClassVar[str] = "controller-manager-pki"

    controllers: tuple[str, ...] = ("deployment", "replicaset", "disruption", "garbagecollector")

    def flags(self) -> list[str]:
        return [f"--controllers={','.join(self.controllers)}", "--use-service-account-credentials=false"]


class Cluster:
    """The typed entry points of the kubernetes client the tests use, on one ApiClient."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        # Typed as Any: the generated client serialises plain dicts as bodies, which its stubs do
        # not admit, and the tests want dicts back (raw JSON, as the webhook sees objects).
        self.core: Any = client.CoreV1Api(api_client)
        self.objects: Any = client.CustomObjectsApi(api_client)
        self.crds: Any = client.ApiextensionsV1Api(api_client)
        self.admission: Any = client.AdmissionregistrationV1Api(api_client)
        self.scheduling: Any = client.SchedulingV1Api(api_client)

    def create(self, namespace: str, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        group, version, plural = RESOURCES[obj["kind"]]
        extra = {"dry_run": "All"} if dry_run else {}
        created: dict[str, Any] = self.objects.create_namespaced_custom_object(group, version, namespace, plural, obj, **extra)
        return created

    def create_warned(self, namespace: str, obj: dict[str, Any], *, dry_run: bool = False) -> tuple[dict[str, Any], list[str]]:
        """Create ``obj`` and return it with the warnings the API server sent back: admission
        webhook warnings come back as ``Warning: 299 - "..."`` response headers (since 1.19)."""
        group, version, plural = RESOURCES[obj["kind"]]
        extra = {"dry_run": "All"} if dry_run else {}
        created, _status, headers = self.objects.create_namespaced_custom_object_with_http_info(
            group, version, namespace, plural, obj, **extra
        )
        return created, warnings_from_headers(headers)

    def get(self, namespace: str, kind: str, name: str) -> dict[str, Any]:
        group, version, plural = RESOURCES[kind]
        found: dict[str, Any] = self.objects.get_namespaced_custom_object(group, version, namespace, plural, name)
        return found

    def replace(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        group, version, plural = RESOURCES[obj["kind"]]
        name = obj["metadata"]["name"]
        replaced: dict[str, Any] = self.objects.replace_namespaced_custom_object(group, version, namespace, plural, name, obj)
        return replaced

    def exists(self, namespace: str, kind: str, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.get(namespace, kind, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create_namespace(self, *, labels: dict[str, str] | None = None) -> str:
        name = f"e2e-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
        return name


# --- reading the API server's answers in the e2e tests ------------------------------------------


def raw_json(response: Any) -> Any:
    """The body of a kubernetes-client call made with ``_preload_content=False``: the JSON the
    API server wrote (not the client's models)."""
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def quietly(delete: Callable[[], Any]) -> None:
    """Run a delete; an object already gone (404) is what was wanted."""
    from kubernetes.client.exceptions import ApiException

    try:
        delete()
    except ApiException as exc:
        if exc.status != 404:
            raise


def unschedulable(pod: Mapping[str, Any]) -> str | None:
    """The message of a ``PodScheduled=False`` condition with reason Unschedulable, else None."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            return str(condition.get("message") or "")
    return None
