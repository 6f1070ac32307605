"""``serve`` configuration: flags, ``PLACEMENT_WEBHOOK_*`` variables, ``--dev`` defaults."""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import pytest

from webhook import cli
from webhook.commands import serve
from webhook.kube.kinds import BUILTIN

ROOT = Path(__file__).resolve().parents[2]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    return parser.parse_args(list(argv))


REQUIRED = {"PLACEMENT_WEBHOOK_POLICIES": "/p", "PLACEMENT_WEBHOOK_TLS_CERT": "/c", "PLACEMENT_WEBHOOK_TLS_KEY": "/k"}


def test_every_flag_has_an_environment_variable_named_after_it() -> None:
    envs = {opt.flag: opt.env for opt in serve.OPTIONS}
    assert envs["tls-cert"] == "PLACEMENT_WEBHOOK_TLS_CERT"
    assert envs["shutdown-grace"] == "PLACEMENT_WEBHOOK_SHUTDOWN_GRACE"
    assert all(env == "PLACEMENT_WEBHOOK_" + flag.upper().replace("-", "_") for flag, env in envs.items())


def test_a_flag_wins_over_its_environment_variable() -> None:
    values = serve.resolve(_args("--port", "9443"), {**REQUIRED, "PLACEMENT_WEBHOOK_PORT": "7443"})
    assert values["port"] == 9443


def test_environment_variables_fill_what_flags_leave_out() -> None:
    env = {**REQUIRED, "PLACEMENT_WEBHOOK_SHUTDOWN_GRACE": "12.5", "PLACEMENT_WEBHOOK_CLIENT_CA": "/ca.crt"}
    values = serve.resolve(_args(), env)
    assert values["shutdown_grace"] == 12.5
    assert values["client_ca"] == Path("/ca.crt")
    assert values["tls_cert"] == Path("/c") and values["policies"] == [Path("/p")]


def test_defaults_apply_when_neither_flag_nor_variable_is_set() -> None:
    values = serve.resolve(_args(), REQUIRED)
    expected = {"host": "0.0.0.0", "port": 8443, "metrics_port": 8080, "shutdown_grace": 30.0, "reload_interval": 5.0, "log_level": "info"}
    assert {k: values[k] for k in expected} == expected
    assert values["client_ca"] is None and values["dev"] is False


def test_several_policy_folders_come_from_repeated_flags_or_a_path_list() -> None:
    assert serve.resolve(_args("--policies", "a", "--policies", "b"), REQUIRED)["policies"] == [Path("a"), Path("b")]
    assert serve.resolve(_args(), {**REQUIRED, "PLACEMENT_WEBHOOK_POLICIES": "a:b"})["policies"] == [Path("a"), Path("b")]


def test_dev_fills_in_the_local_setup_and_flags_still_win() -> None:
    values = serve.resolve(_args("--dev", "--port", "9443"), {})
    assert values["tls_cert"] == Path("certs/tls.crt") and values["tls_key"] == Path("certs/tls.key")
    assert values["policies"] == [Path("policies")]
    assert values["host"] == "127.0.0.1" and values["port"] == 9443
    assert serve.resolve(_args(), {"PLACEMENT_WEBHOOK_DEV": "true"})["host"] == "127.0.0.1"


@pytest.mark.parametrize("missing", ["PLACEMENT_WEBHOOK_POLICIES", "PLACEMENT_WEBHOOK_TLS_CERT", "PLACEMENT_WEBHOOK_TLS_KEY"])
def test_policies_certificate_and_key_are_required_without_dev(missing: str) -> None:
    env = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(serve.ConfigError, match=f"or {missing}\\) is required"):
        serve.resolve(_args(), env)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PLACEMENT_WEBHOOK_PORT", "https", "must be a port number from 0 to 65535, not 'https'"),
        ("PLACEMENT_WEBHOOK_PORT", "70000", "must be a port number from 0 to 65535, not '70000'"),
        ("PLACEMENT_WEBHOOK_METRICS_PORT", "-1", "must be a port number from 0 to 65535, not '-1'"),
        ("PLACEMENT_WEBHOOK_SHUTDOWN_GRACE", "-5", "seconds >= 0"),
        ("PLACEMENT_WEBHOOK_RELOAD_INTERVAL", "nan", "seconds >= 0"),
        ("PLACEMENT_WEBHOOK_DEV", "maybe", "expected true or false"),
        ("PLACEMENT_WEBHOOK_LOG_LEVEL", "loud", "must be one of debug, info, warning, error"),
    ],
)
def test_a_bad_environment_value_is_a_usage_error_naming_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(serve.ConfigError, match=message) as caught:
        serve.resolve(_args(), {**REQUIRED, variable: value})
    assert str(caught.value).startswith(variable)


@pytest.mark.parametrize(("flag", "value"), [("--port", "99999"), ("--shutdown-grace", "soon"), ("--log-level", "loud")])
def test_a_bad_flag_value_is_a_usage_error(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", flag, value])
    assert caught.value.code == 2
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "70000", "-1", "", "8443.0", "0x20fb"])
def test_a_bad_port_variable_names_the_variable_and_the_expected_form(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, setting in REQUIRED.items():
        monkeypatch.setenv(name, setting)
    monkeypatch.setenv("PLACEMENT_WEBHOOK_PORT", value)
    assert cli.main(["serve"]) == 2
    message = f"PLACEMENT_WEBHOOK_PORT: must be a port number from 0 to 65535, not {value!r}"
    assert capsys.readouterr().err == f"placement-webhook serve: {message}\n"


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--port", "abc", "must be a port number from 0 to 65535, not 'abc'"),
        ("--metrics-port", "-1", "must be a port number from 0 to 65535, not '-1'"),
        ("--shutdown-grace", "soon", "must be a number of seconds >= 0, not 'soon'"),
        ("--reload-interval", "inf", "must be a number of seconds >= 0, not 'inf'"),
        ("--log-level", "loud", "must be one of debug, info, warning, error, not 'loud'"),
        ("--tls-cert", "", "must be a file path, not ''"),
        ("--policies", "", "must be a file or folder path, not ''"),
    ],
)
def test_a_bad_flag_names_the_flag_and_the_expected_form(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", flag, value])
    err = capsys.readouterr().err
    assert caught.value.code == 2
    assert err.splitlines()[-1] == f"placement-webhook serve: error: argument {flag}: {message}"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PLACEMENT_WEBHOOK_SHUTDOWN_GRACE", "soon", "must be a number of seconds >= 0, not 'soon'"),
        ("PLACEMENT_WEBHOOK_RELOAD_INTERVAL", "inf", "must be a number of seconds >= 0, not 'inf'"),
        ("PLACEMENT_WEBHOOK_LOG_LEVEL", "loud", "must be one of debug, info, warning, error, not 'loud'"),
        ("PLACEMENT_WEBHOOK_DEV", "maybe", "expected true or false (1, yes, on / 0, no, off), not 'maybe'"),
        ("PLACEMENT_WEBHOOK_TLS_CERT", "", "must be a file path, not ''"),
        ("PLACEMENT_WEBHOOK_CLIENT_CA", " ", "must be a file path, not ' '"),
        ("PLACEMENT_WEBHOOK_POLICIES", ":", "must be a list of file or folder paths separated by ':', not ':'"),
    ],
)
def test_every_variable_parser_says_what_it_expects(variable: str, value: str, message: str) -> None:
    with pytest.raises(serve.ConfigError) as caught:
        serve.resolve(_args(), {**REQUIRED, variable: value})
    assert str(caught.value) == f"{variable}: {message}"


def test_serve_without_its_required_settings_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in REQUIRED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PLACEMENT_WEBHOOK_DEV", raising=False)
    assert cli.main(["serve"]) == 2
    assert "--policies (or PLACEMENT_WEBHOOK_POLICIES) is required" in capsys.readouterr().err


def test_a_broken_kinds_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kinds = tmp_path / "kinds.yaml"
    kinds.write_text("kinds:\n- kind: Widget\n")
    code = cli.main(["serve", "--policies", "p", "--tls-cert", "c", "--tls-key", "k", "--kinds-config", str(kinds)])
    assert code == 2
    assert "kinds[0]" in capsys.readouterr().err


def test_the_operations_guide_documents_every_flag_and_variable() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    for opt in serve.OPTIONS:
        assert f"`--{opt.flag}" in guide, opt.flag
        assert f"`{opt.env}`" in guide, opt.env


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cluster-view", "on"], "cluster view: no kubeconfig given and not running in a cluster"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "cluster view: /nonexistent/kubeconfig: kubeconfig file not found"),
        (["--cluster-view", "sometimes"], "must be one of auto, on, off, not 'sometimes'"),
    ],
)
def test_a_cluster_view_that_cannot_be_configured_is_a_usage_error(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SystemExit) if "sometimes" in argv else contextlib.nullcontext():
        code = cli.main(["serve", "--dev", *argv])
        assert code == 2
    assert message in capsys.readouterr().err


def test_without_a_kubeconfig_or_a_pod_auto_means_no_cluster_view(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    values = {"cluster_view": "auto", "kubeconfig": None, "context": None}
    assert serve.cluster_config(values) is None
    assert serve.cluster_config({**values, "cluster_view": "off", "kubeconfig": "/any"}) is None


# --- where --dev finds its files ------------------------------------------------------------


def test_dev_in_the_repository_root_uses_its_policies_and_certs_folder() -> None:
    files = serve.dev_setup(ROOT, {"HOME": "/home/me"})
    assert files == serve.DevSetup(certs=Path("certs"), policies=Path("policies"),
                                   example=Path("examples/review-deployment-v1.json"), in_repository=True)


def test_dev_elsewhere_uses_the_checkouts_policies_and_the_user_state_folder(tmp_path: Path) -> None:
    files = serve.dev_setup(tmp_path, {"HOME": "/home/me", "XDG_STATE_HOME": "/state"}, package_root=ROOT)
    assert files.policies == ROOT / "policies" and files.example == ROOT / "examples" / "review-deployment-v1.json"
    assert files.certs == Path("/state/placement-webhook/dev-certs") and not files.in_repository


@pytest.mark.parametrize("state", ["", "relative/state"])
def test_without_an_absolute_xdg_state_home_the_certificates_go_under_local_state(state: str) -> None:
    assert serve.dev_state_dir({"HOME": "/home/me", "XDG_STATE_HOME": state}) == Path("/home/me/.local/state/placement-webhook")


def test_dev_without_a_checkout_says_plainly_that_the_policies_are_missing(tmp_path: Path) -> None:
    files = serve.dev_setup(tmp_path, {"HOME": str(tmp_path)}, package_root=tmp_path / "site-packages")
    assert files.policies is None and files.example is None
    with pytest.raises(serve.ConfigError, match=r"no policies/ folder here.*not in the wheel.*--policies PATH"):
        serve.resolve(_args("--dev"), {}, dev_files=files)
    # Policies named by the user are enough: the certificates still go to the state folder.
    values = serve.resolve(_args("--dev", "--policies", "mine"), {}, dev_files=files)
    assert values["policies"] == [Path("mine")] and values["tls_cert"] == files.certs / "tls.crt"


def test_dev_prints_a_curl_only_for_a_sample_that_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ca.crt").write_text("a CA")
    state = argparse.Namespace(config=argparse.Namespace(tls_cert=tmp_path / "tls.crt", port=9443, metrics_port=9080))
    serve._print_dev_example(state, serve.DevSetup(certs=tmp_path, policies=None, example=None, in_repository=False))
    out = capsys.readouterr().out
    assert "curl --cacert" not in out and "--data-binary" not in out
    assert "No sample AdmissionReview here (examples/review-deployment-v1.json is in the repository" in out
    assert "POST your own to https://localhost:9443/mutate" in out


def test_a_background_audit_reads_the_cluster_and_needs_one(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    values = serve.resolve(_args("--cluster-view", "off"), {**REQUIRED, "PLACEMENT_WEBHOOK_AUDIT_INTERVAL": "300"})
    assert values["audit_interval"] == 300.0
    assert serve.server_config({**values, "cluster": None}, BUILTIN).audit_interval == 300.0
    assert cli.main(["serve", "--dev", "--cluster-view", "off", "--audit-interval", "60"]) == 2
    assert "--audit-interval: no kubeconfig given and not running in a cluster" in capsys.readouterr().err
    assert serve.resolve(_args(), REQUIRED)["audit_interval"] == 0.0  # off unless asked for
