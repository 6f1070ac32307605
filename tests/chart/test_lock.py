"""The locks in requirements/: what CI and the image install, pinned and hash-checked.

setup.cfg keeps compatible ranges for people who install the package into their own environment;
the locks pin one tested set within them. hack/lock.sh refreshes both.
"""
from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def read_lock(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) for every pin of a pip-compile lock."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in path.read_text().splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            pins[current] = (match.group(2), [])
        elif line.strip().startswith("--hash=sha256:"):
            pins[current][1].append(line.strip().removeprefix("--hash=sha256:").rstrip(" \\"))
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"{path.name}: a line that is neither a pin, a hash nor a comment: {line!r}")
    return pins


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def _requirements(option: str, section: str = "options") -> list[Requirement]:
    return [Requirement(line) for line in _setup_cfg()[section][option].strip().splitlines()]


def _build_requirements() -> list[Requirement]:
    text = (ROOT / "pyproject.toml").read_text()
    requires = re.search(r"requires\s*=\s*\[(.*?)\]", text, re.S)
    assert requires is not None
    return [Requirement(item) for item in re.findall(r'"([^"]+)"', requires.group(1))]


@pytest.fixture(scope="module")
def runtime() -> dict[str, tuple[str, list[str]]]:
    return read_lock(LOCKS / "runtime.txt")


@pytest.fixture(scope="module")
def test_lock() -> dict[str, tuple[str, list[str]]]:
    return read_lock(LOCKS / "test.txt")


def test_every_pin_carries_sha256_hashes(runtime: dict[str, tuple[str, list[str]]], test_lock: dict[str, tuple[str, list[str]]]) -> None:
    for pins in (runtime, test_lock):
        assert pins
        unhashed = [name for name, (_, hashes) in pins.items() if not hashes]
        assert not unhashed, "pip --require-hashes refuses a lock with unhashed pins"
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for _, hashes in pins.values() for h in hashes)


@pytest.mark.parametrize("lock", ["runtime", "test"])
def test_each_declared_dependency_and_the_build_backend_is_pinned_within_its_range(
    lock: str, runtime: dict[str, tuple[str, list[str]]], test_lock: dict[str, tuple[str, list[str]]]
) -> None:
    pins = runtime if lock == "runtime" else test_lock
    wanted = _requirements("install_requires") + _build_requirements()
    if lock == "test":
        wanted += _requirements("test", "options.extras_require")
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in requirements/{lock}.txt: run hack/lock.sh"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), (
            f"requirements/{lock}.txt pins {name}=={pins[name][0]}, outside setup.cfg's {requirement}: run hack/lock.sh")


def test_the_image_runs_the_versions_the_tests_ran(runtime: dict[str, tuple[str, list[str]]], test_lock: dict[str, tuple[str, list[str]]]) -> None:
    differing = {name: (version, test_lock.get(name, ("missing",))[0]) for name, (version, _) in runtime.items()
                 if test_lock.get(name, ("",))[0] != version}
    assert not differing, f"runtime.txt and test.txt disagree: {differing}"


def test_the_reader_refuses_what_pip_would_not_install_as_locked(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text("aiohttp==3.9.0 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via x\n")
    assert read_lock(lock) == {"aiohttp": ("3.9.0", ["a" * 64])}
    lock.write_text("aiohttp>=3.9\n")
    with pytest.raises(AssertionError, match="neither a pin"):
        read_lock(lock)
