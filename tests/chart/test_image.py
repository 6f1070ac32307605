"""The container image: the Dockerfile's invariants, and the wheel its builder stage makes.

There is no Docker engine here, so the Dockerfile is parsed and checked, and its builder command
is run for real: the wheel it builds must install into a fresh virtual environment and work.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
VALUES = ROOT / "charts" / "placement-webhook" / "values.yaml"


@dataclass(frozen=True)
class Instruction:
    stage: int
    command: str  # upper case: FROM, RUN, COPY, ...
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with line continuations joined and comments dropped, numbered by stage."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not pending):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stage = -1
    out: list[Instruction] = []
    for line in logical:
        command, _, args = line.partition(" ")
        if command.upper() == "FROM":
            stage += 1
        out.append(Instruction(stage, command.upper(), args.strip()))
    return out


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def _final(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def _env(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in _final(instructions):
        if ins.command == "ENV":
            env.update(dict(token.split("=", 1) for token in shlex.split(ins.args)))
    return env


def _arg_default(instructions: list[Instruction], name: str) -> str:
    return next(i.args.split("=", 1)[1] for i in instructions if i.command == "ARG" and i.args.startswith(f"{name}="))


def test_the_parser_joins_continuations_and_counts_stages() -> None:
    parsed = parse_dockerfile("FROM a AS b\n# note\nRUN x \\\n  && y\nFROM c\nUSER 1\n")
    assert parsed == [Instruction(0, "FROM", "a AS b"), Instruction(0, "RUN", "x  && y"), Instruction(1, "FROM", "c"), Instruction(1, "USER", "1")]


def test_it_is_multi_stage_with_a_builder_and_a_slim_python_311_final_stage(instructions: list[Instruction]) -> None:
    froms = [i.args for i in instructions if i.command == "FROM"]
    assert len(froms) == 2 and froms[0].endswith(" AS builder")
    base = _arg_default(instructions, "PYTHON_IMAGE")
    assert base == "python:3.11-slim" and froms[1] == "${PYTHON_IMAGE}"


BUILD_COMMAND = "pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ."
LOCK_COMMAND = "pip wheel --require-hashes --no-deps --wheel-dir /wheels -r requirements/runtime.txt"


def test_the_builder_makes_the_pure_project_wheel_with_pip_wheel(instructions: list[Instruction]) -> None:
    runs = [i.args for i in instructions if i.stage == 0 and i.command == "RUN"]
    assert BUILD_COMMAND in runs
    assert runs.index(BUILD_COMMAND) > 0, "the build backend is installed from the lock before the wheel is built"
    assert not any("gcc" in run for run in runs), "the package is pure Python: the builder needs no compiler"


def test_the_builder_takes_every_dependency_from_the_hash_checked_lock(instructions: list[Instruction]) -> None:
    (locked,) = [i.args for i in instructions if i.stage == 0 and i.command == "RUN" and "requirements/" in i.args]
    assert " ".join(locked.split()).startswith(LOCK_COMMAND + " && ")
    # The backend that builds the project's wheel is the locked one, from those wheels, offline.
    assert "pip install --no-index --find-links=/wheels setuptools wheel" in locked
    assert not [i for i in instructions if i.command == "RUN" and "pip install" in i.args and "--no-index" not in i.args]


def test_the_final_stage_installs_only_wheels_from_the_builder_and_copies_no_source(instructions: list[Instruction]) -> None:
    final = _final(instructions)
    (install,) = [i.args for i in final if i.command == "RUN" and "pip install" in i.args]
    assert "from=builder" in install and "--no-index" in install and "--find-links=/wheels" in install
    assert not [i for i in final if i.command in {"COPY", "ADD"} and "--from=builder" not in i.args]


def test_it_runs_as_the_fixed_non_root_uid_the_chart_expects(instructions: list[Instruction]) -> None:
    (user,) = [i.args for i in _final(instructions) if i.command == "USER"]
    uid, _, gid = user.partition(":")
    values = yaml.safe_load(VALUES.read_text())
    assert (int(uid), int(gid)) == (65532, 65532)
    assert values["podSecurityContext"]["runAsUser"] == int(uid)


def test_the_entrypoint_is_exec_form_placement_webhook_serve(instructions: list[Instruction]) -> None:
    (entrypoint,) = [i.args for i in instructions if i.command == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["placement-webhook", "serve"]
    assert not [i for i in instructions if i.command in {"CMD", "HEALTHCHECK"}]


def test_it_exposes_the_ports_the_chart_uses(instructions: list[Instruction]) -> None:
    (expose,) = [i.args for i in instructions if i.command == "EXPOSE"]
    server = yaml.safe_load(VALUES.read_text())["server"]
    assert expose.split() == [str(server["port"]), str(server["metricsPort"])]


def test_nothing_needs_writing_at_run_time_and_defaults_point_at_the_mounted_files(instructions: list[Instruction]) -> None:
    env = _env(instructions)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PLACEMENT_WEBHOOK_TLS_CERT"] == "/etc/placement-webhook/tls/tls.crt"
    assert env["PLACEMENT_WEBHOOK_TLS_KEY"] == "/etc/placement-webhook/tls/tls.key"
    assert env["PLACEMENT_WEBHOOK_POLICIES"] == "/etc/placement-webhook/policies"


def _copy_sources(instructions: list[Instruction]) -> list[str]:
    sources: list[str] = []
    for ins in instructions:
        if ins.stage == 0 and ins.command == "COPY":
            sources.extend(ins.args.split()[:-1])
    return sources


def test_the_build_context_allows_exactly_what_the_builder_copies(instructions: list[Instruction]) -> None:
    allowed = [line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    assert sorted(allowed) == sorted(_copy_sources(instructions))
    assert all((ROOT / source).exists() for source in allowed)


# --- the wheel, built as the builder stage builds it -------------------------------------------


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def _builder_context(instructions: list[Instruction], dest: Path) -> None:
    """Copy what the builder stage's COPY lines copy, as .dockerignore filters it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for source in _copy_sources(instructions):
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(src, dest / source, ignore=ignore)
        else:
            (dest / source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / source)


@pytest.fixture(scope="module")
def wheel(instructions: list[Instruction], tmp_path_factory: pytest.TempPathFactory) -> Path:
    context = tmp_path_factory.mktemp("context")
    wheels = tmp_path_factory.mktemp("wheels")
    _builder_context(instructions, context)
    # As the builder runs it: no build isolation, in a context holding only what the Dockerfile
    # copies; setuptools and wheel are the locked ones, which CI installs into this environment
    # from the same lock the image's builder takes them from.
    command = [sys.executable, "-m", *shlex.split(BUILD_COMMAND)[:-2], str(wheels), "."]
    done = _run(command, cwd=context, env=_isolated_env())
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = wheels.glob("placement_webhook-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new virtual environment holding only the wheel; its dependencies are borrowed, read-only,
    from the test environment's site-packages (no index needed, nothing downloaded)."""
    venv = tmp_path_factory.mktemp("venv")
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv).returncode == 0
    python = venv / "bin" / "python"
    # Isolated from PYTHONPATH: a checkout on it holds the project's own metadata, and pip
    # would take the wheel as installed already.
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
                cwd=venv, env=_isolated_env())
    assert done.returncode == 0, done.stdout + done.stderr
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=venv,
                     env=_isolated_env()).stdout.strip())
    # A plain path line: the test environment's own .pth files (the editable install) stay inactive.
    (site / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield venv


def _isolated_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PLACEMENT_WEBHOOK_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return env


@pytest.mark.slow
def test_the_wheel_installs_and_its_code_is_imported_from_the_wheel(fresh_venv: Path, tmp_path: Path) -> None:
    done = _run([str(fresh_venv / "bin" / "python"), "-c", "import webhook; print(webhook.__file__)"], cwd=tmp_path, env=_isolated_env())
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(fresh_venv)
    assert (Path(done.stdout.strip()).parent / "py.typed").exists()
    assert (fresh_venv / "bin" / "placement-webhook").exists()


@pytest.mark.slow
def test_the_installed_command_prints_its_help(fresh_venv: Path, tmp_path: Path) -> None:
    done = _run([str(fresh_venv / "bin" / "placement-webhook"), "--help"], cwd=tmp_path, env=_isolated_env())
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "lint" in done.stdout


@pytest.mark.slow
def test_the_installed_command_lints_the_shipped_policies(fresh_venv: Path, tmp_path: Path) -> None:
    policies = ROOT / "policies"
    done = _run([str(fresh_venv / "bin" / "placement-webhook"), "lint", str(policies)], cwd=tmp_path, env=_isolated_env())
    assert done.returncode == 0, done.stdout + done.stderr



@pytest.mark.slow
def test_the_installed_engine_mutates_like_the_checkout(fresh_venv: Path, tmp_path: Path) -> None:
    examples = sorted((ROOT / "examples").glob("*.yaml"))  # Deployments, StatefulSets, VMs, Wukong
    assert examples
    argv = ["mutate", "-f", *map(str, examples), "--policies", str(ROOT / "policies"), "-o", "json"]
    installed = _run([str(fresh_venv / "bin" / "placement-webhook"), *argv], cwd=tmp_path, env=_isolated_env())
    source = _run([sys.executable, "-m", "webhook", *argv], cwd=ROOT)
    assert installed.returncode == source.returncode == 0, installed.stderr + source.stderr
    assert json.loads(installed.stdout) == json.loads(source.stdout)
