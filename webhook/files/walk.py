"""Files named on a command line or in a configuration: files as given, folders walked.

One walk for every command: a folder is searched recursively, following symlinks (a
ConfigMap volume is made of them) without looping; hidden entries are skipped (a ConfigMap
volume's ``..data`` and ``..2024_...`` folders hold the same files again, and ``.git`` or
``.venv`` hold nobody's manifests); files come sorted by their path below the folder; a file
reached twice (through two arguments, or a link) is listed once. A file named directly is
taken whatever its name.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["MissingPath", "find", "find_each"]


class MissingPath(FileNotFoundError):
    """A path given by the user does not exist."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: no such file or directory")
        self.path = path


def find(
    paths: Iterable[str | Path],
    *,
    accept: Callable[[str], bool],
    on_missing: Callable[[MissingPath], None] | None = None,
) -> list[Path]:
    """The files ``paths`` name; in folders, those whose name ``accept`` takes; each once.

    A path that does not exist goes to ``on_missing``, or raises ``MissingPath``.
    """
    files: list[Path] = []
    seen: set[str] = set()
    for _, found in find_each(paths, accept=accept, on_missing=on_missing):
        for file in found:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files


def find_each(
    paths: Iterable[str | Path],
    *,
    accept: Callable[[str], bool],
    on_missing: Callable[[MissingPath], None] | None = None,
) -> list[tuple[Path, list[Path]]]:
    """Each path that exists with the files it names (as ``find`` names them), so that a command
    can tell which of its inputs holds nothing; a file two paths reach is under both."""
    found: list[tuple[Path, list[Path]]] = []
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            found.append((path, _walk(path, accept)))
        elif path.exists():
            found.append((path, [path]))
        else:
            missing = MissingPath(path)
            if on_missing is None:
                raise missing
            on_missing(missing)
    return found


def _walk(root: Path, accept: Callable[[str], bool]) -> list[Path]:
    found: list[Path] = []
    visited: set[str] = set()
    for folder, dirs, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in visited:  # a symlink loop would otherwise walk forever
            dirs[:] = []
            continue
        visited.add(real)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(Path(folder, name) for name in names if not name.startswith(".") and accept(name))
    return sorted(found, key=lambda p: p.relative_to(root).parts)
