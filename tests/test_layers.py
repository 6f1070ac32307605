"""The import-layer contract: each room of ``webhook/`` imports only the rooms below it.

docs/architecture.md draws the same table. A room missing from ``ALLOWED`` fails the test, so a
new room is placed in the layers on purpose; modules form no import cycle; the pure rooms take
plain data (no aiohttp); and only one module speaks to the official ``kubernetes`` client.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "webhook"

# room -> the rooms it may import (the bottom first; ``commands`` may import every room).
ALLOWED: dict[str, frozenset[str]] = {
    "kube": frozenset(),
    "files": frozenset(),
    "scheduler": frozenset({"kube"}),
    "cluster": frozenset({"kube"}),
    "runtime": frozenset({"cluster", "kube"}),
    "policy": frozenset({"kube", "files"}),
    "engine": frozenset({"kube", "cluster", "policy", "scheduler"}),
    "server": frozenset({"audit", "engine", "policy", "runtime", "cluster", "kube", "files"}),
    "explain": frozenset({"engine", "scheduler", "policy", "cluster", "kube", "files"}),
    "labeler": frozenset({"runtime", "cluster", "scheduler", "kube"}),
    "spot": frozenset({"runtime", "cluster", "policy", "kube", "files"}),
    "extender": frozenset({"spot", "runtime", "cluster", "kube"}),
    "suites": frozenset({"engine", "explain", "scheduler", "policy", "cluster", "kube", "files"}),
    "audit": frozenset({"engine", "explain", "scheduler", "policy", "runtime", "cluster", "kube", "files"}),
    "rebalance": frozenset({"spot", "explain", "scheduler", "policy", "runtime", "cluster", "kube", "files"}),
}
EVERY_ROOM = "commands"
PURE = ("kube", "scheduler", "policy", "engine")
KUBERNETES_CLIENT_MODULE = "webhook.cluster.config"


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every module name ``path`` imports, functions' local imports included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _room(module: str) -> str | None:
    """The folder of ``webhook/`` a module lives in; None for the package's top-level modules
    (names, exit codes, the JSON codec: shared by every room) and for anything outside it."""
    parts = module.split(".")
    return parts[1] if parts[0] == "webhook" and len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


MODULES = dict(_modules())
ROOMS = sorted({room for module in MODULES if (room := _room(module))})


def test_every_room_has_its_place_in_the_layers() -> None:
    assert set(ROOMS) == set(ALLOWED) | {EVERY_ROOM}


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    crossings = sorted(
        f"{module} imports {name}"
        for module, path in MODULES.items() if _room(module) == room
        for name in _imports(module, path)
        if name.startswith("webhook.") and (other := _room(name)) and other != room and other not in ALLOWED[room]
    )
    assert not crossings, f"{room}/ may import only {sorted(ALLOWED[room])}:\n" + "\n".join(crossings)


def test_only_the_entry_points_import_the_command_line() -> None:
    importers = {module for module, path in MODULES.items() for name in _imports(module, path)
                 if name == "webhook.cli" or name.startswith(("webhook.cli.", "webhook.commands"))}
    assert {_room(m) or m for m in importers} <= {"commands", "webhook.cli", "webhook.__main__"}


def test_the_layers_themselves_have_no_cycle() -> None:
    seen: dict[str, int] = {}

    def depth(room: str, path: tuple[str, ...] = ()) -> int:
        assert room not in path, f"layer cycle: {' -> '.join((*path, room))}"
        if room not in seen:
            seen[room] = 1 + max((depth(r, (*path, room)) for r in ALLOWED[room]), default=0)
        return seen[room]

    assert all(depth(room) >= 1 for room in ALLOWED)


def test_modules_form_no_import_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
        for name in _imports(module, path):
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                graph[module].add(name)
    state: dict[str, str] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycle = stack[stack.index(target):] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*stack, target])
        state[module] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("room", PURE)
def test_the_pure_rooms_do_no_network_io(room: str) -> None:
    loud = sorted(f"{module} imports {name}" for module, path in MODULES.items() if _room(module) == room
                  for name in _imports(module, path) if name.split(".")[0] in {"aiohttp", "socket", "kubernetes"})
    assert not loud


def test_only_one_module_speaks_to_the_official_kubernetes_client() -> None:
    users = {module for module, path in MODULES.items() for name in _imports(module, path) if name.split(".")[0] == "kubernetes"}
    assert users == {KUBERNETES_CLIENT_MODULE}


def test_the_import_reader_resolves_relative_and_local_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("from . import sibling\nfrom ..kube import nodes\ndef f():\n    import aiohttp\n")
    names = set(_imports("webhook.engine.mod", source))
    assert {"webhook.engine.sibling", "webhook.kube.nodes", "aiohttp"} <= names
