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

The compiled build is profile-guided (GCC's ``-fprofile-generate``/``-fprofile-use``): it is
built instrumented, trained by ``_build_backend/pgo_training.py`` on the server's review path,
and built again with that profile. mypyc's C is mostly error checks around every operation;
the profile tells the compiler which side of each is taken, so the code a review runs is laid
out densely and the error paths move out of its way. In the server, where a review runs with
the CPU's caches cold from TLS and HTTP work, that was 2-5% less CPU per review (bench/).
``PLACEMENT_WEBHOOK_PGO=0`` builds without a profile.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
TRAINING = ROOT / "_build_backend" / "pgo_training.py"

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


def _switch(name: str, default: str) -> bool:
    return os.environ.get(name, default).lower() in ("1", "true", "yes")


def ext_modules() -> list:
    if not _switch("PLACEMENT_WEBHOOK_COMPILE", ""):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit("PLACEMENT_WEBHOOK_COMPILE=1 needs mypy (which ships mypyc) installed") from exc
    return mypycify([f"webhook/{name}.py" for name in COMPILED], opt_level="3")


class ProfileGuidedBuildExt(build_ext):
    """``build_ext`` twice: instrumented, then trained, then again with the profile."""

    def run(self) -> None:
        if not self.extensions or not _switch("PLACEMENT_WEBHOOK_PGO", "1"):
            super().run()
            return
        self._compiler_name = self.compiler
        temp = Path(self.build_temp)
        for stale in temp.rglob("*.gcda"):  # a profile of older C would not match
            stale.unlink()
        self._build(["-fprofile-generate", "-fprofile-update=single"], link=["-fprofile-generate"])
        self._train()
        self._build(["-fprofile-use", "-fprofile-correction", "-Wno-missing-profile"], link=[])

    def _build(self, flags: list[str], *, link: list[str]) -> None:
        for ext in self.extensions:
            ext.extra_compile_args = [a for a in ext.extra_compile_args if not a.startswith("-fprofile")] + flags
            ext.extra_link_args = [a for a in ext.extra_link_args if not a.startswith("-fprofile")] + link
        self.force = True  # the objects of the other stage are newer than the sources
        self.compiler = self._compiler_name  # run() replaces the name with the compiler it made
        super().run()

    def _train(self) -> None:
        # The freshly built modules: in place they sit in the checkout; otherwise in build_lib,
        # beside the sources build_py copied there.
        where = [str(ROOT)] if self.inplace else [str(Path(self.build_lib).resolve()), str(ROOT)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(where)}
        print(f"training the profile-guided build: {TRAINING.name}")
        subprocess.run([sys.executable, str(TRAINING)], check=True, env=env, cwd=str(ROOT))


setup(ext_modules=ext_modules(), cmdclass={"build_ext": ProfileGuidedBuildExt})
