"""setuptools' build backend, plus mypy when the compiled build is asked for.

``PLACEMENT_WEBHOOK_COMPILE=1`` makes ``setup.py`` compile the review path with mypyc, which
ships with mypy; only then does the isolated build environment need mypy, so a plain
(pure Python) build downloads nothing more than setuptools.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every hook not overridden below)

_SWITCH = "PLACEMENT_WEBHOOK_COMPILE"


def _on(name: str, default: str = "") -> bool:
    """A yes/no environment switch, read as setup.py reads it."""
    return os.environ.get(name, default).lower() in ("1", "true", "yes")


def _compiled() -> bool:
    return _on(_SWITCH)


@contextmanager
def _as_pure_build() -> Iterator[None]:
    """setuptools runs setup.py to list its requirements: before mypy is installed, so
    that run must not ask for the compiled build."""
    saved = os.environ.pop(_SWITCH, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[_SWITCH] = saved


# The profile-guided build's training run (setup.py) imports the review path, which loads
# policies (pydantic, PyYAML) and parses reviews (msgspec): those runtime requirements, as
# setup.cfg pins them, are build requirements of that build.
_TRAINING_NEEDS = ("msgspec", "pydantic", "PyYAML")


def _profile_guided() -> bool:
    return _compiled() and _on("PLACEMENT_WEBHOOK_PGO", "1")


def _training_requirements() -> list[str]:
    import configparser
    import re
    from pathlib import Path

    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    lines = [line.strip() for line in cfg["options"]["install_requires"].splitlines() if line.strip()]
    found = [line for line in lines if re.split(r"[\s<>=!~;\[]", line, maxsplit=1)[0] in _TRAINING_NEEDS]
    if len(found) != len(_TRAINING_NEEDS):
        raise RuntimeError(f"setup.cfg's install_requires must name {', '.join(_TRAINING_NEEDS)}")
    return found


def _requires(setuptools_hook: Callable[..., list[str]], config_settings: object) -> list[str]:
    extra = ["mypy>=1.8"] if _compiled() else []
    if _profile_guided():
        extra += _training_requirements()
    with _as_pure_build():
        return setuptools_hook(config_settings) + extra


def get_requires_for_build_wheel(config_settings=None):  # noqa: ANN001, ANN201 (PEP 517 signature)
    return _requires(_setuptools.get_requires_for_build_wheel, config_settings)


def get_requires_for_build_editable(config_settings=None):  # noqa: ANN001, ANN201
    return _requires(_setuptools.get_requires_for_build_editable, config_settings)
