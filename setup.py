"""The package is declared in setup.cfg; this file only adds the optional compiled build.

``PLACEMENT_WEBHOOK_COMPILE=1`` compiles the pure core of the review path (parsing,
matching, the engine, patching) to C extensions with mypyc, the compiler mypy and black
ship with. Same source, same behaviour, about twice as fast per review; the container
image is built this way. It needs a C compiler; the build backend (``_build_backend``)
adds mypy to the isolated build environment:

    PLACEMENT_WEBHOOK_COMPILE=1 pip wheel --no-deps --wheel-dir dist .
    PLACEMENT_WEBHOOK_COMPILE=1 python setup.py build_ext --inplace   # in a checkout

Only modules whose annotations hold at run time may be listed: compiled code checks them.
Without the variable the package is pure Python (development, the test suite's first run).
Calls between compiled modules are bound early; the ones tests replace (admission's
``apply_policy`` and ``selects``) go through module attributes, which stay replaceable.
"""
from __future__ import annotations

import os

from setuptools import setup

COMPILED = (
    "admission",
    "codec",
    "compile",
    "engine",
    "matching",
    "merge",
    "patching",
    "review",
    "rollout",
    "scheduling",
    "targets",
    "working",
    "wukong",
)


def ext_modules() -> list:
    if os.environ.get("PLACEMENT_WEBHOOK_COMPILE", "").lower() not in ("1", "true", "yes"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit("PLACEMENT_WEBHOOK_COMPILE=1 needs mypy (which ships mypyc) installed") from exc
    return mypycify([f"webhook/{name}.py" for name in COMPILED], opt_level="3")


setup(ext_modules=ext_modules())
