"""A doc is a promise: every ``placement-webhook`` command README.md and docs/*.md show in a
``sh`` or ``console`` block parses, and the ones that are offline and safe run here, exit with
the code the doc states and print what the doc shows.

How a doc states an exit code: a ``console`` block shows ``$ echo $?`` and the number after the
command; a ``sh`` line says ``exit N`` (or ``exits N``) in its comment; otherwise the command
succeeds (0). Output is compared line by line, standard error and output as a terminal shows
them; ``...`` in a line stands for any text, a line of only ``...`` for any lines, and the
repository's own path is left out, as the docs never show it.

Commands run in process (``cli.main``) from the repository root; one that writes files
(``certs --out``) writes them into a temporary folder instead.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from webhook import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"sh", "console"}
FENCE = re.compile(r"^\s*```(\S*)\s*$")
# Offline verbs that read files of the repository and change nothing outside a tmp folder.
OFFLINE = {"mutate", "lint", "test", "explain", "audit", "schema", "certs"}
SHELL = {"|", ">", ">>", "<", "2>", "2>&1", ";", "&&", "||"}


@dataclass(frozen=True)
class Shown:
    """One command a doc shows: where, its words after ``placement-webhook``, the exit code the
    doc states, and the output lines it shows (None: it shows none)."""

    where: str
    argv: tuple[str, ...]
    exit: int
    output: tuple[str, ...] | None

    def __str__(self) -> str:
        return self.where


def _blocks(path: Path) -> Iterator[tuple[str, int, list[str]]]:
    """Each fenced block: its language, the line number of its first line, its lines."""
    lang: str | None = None
    start, lines = 0, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence and lang is None:
            lang, start, lines = fence.group(1), number + 1, []
        elif fence:
            yield lang, start, lines
            lang = None
        elif lang is not None:
            lines.append(line)


def _joined(lines: list[str], first: int) -> Iterator[tuple[int, str]]:
    """Lines with their ``\\`` continuations joined, each with its first line's number."""
    pending, at = "", first
    for number, line in enumerate(lines, first):
        if not pending:
            at = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield at, pending + line
        pending = ""
    if pending:
        yield at, pending


def _words(command: str) -> list[str] | None:
    """The words of a ``placement-webhook`` command (comment and a trailing ``&`` left out),
    or None when the line runs something else."""
    if not command.startswith("placement-webhook"):
        return None
    words = shlex.split(command, comments=True)
    if words and words[-1] == "&":
        words = words[:-1]
    return words[1:] if words and words[0] == "placement-webhook" else None


def _stated_exit(command: str) -> int:
    comment = command.partition(" #")[2]
    found = re.search(r"\bexits? (\d+)\b", comment)
    return int(found.group(1)) if found else 0


def _from_sh(where: str, lines: list[str], first: int) -> Iterator[Shown]:
    for number, command in _joined(lines, first):
        words = _words(command.strip())
        if words is not None:
            yield Shown(f"{where}:{number}", tuple(words), _stated_exit(command), None)


def _from_console(where: str, lines: list[str], first: int) -> Iterator[Shown]:
    """``$ command`` lines, each followed by its output; ``$ echo $?`` states the exit code."""
    entries: list[tuple[int, str, list[str]]] = []
    for number, line in _joined(lines, first):
        if line.startswith("$ "):
            entries.append((number, line[2:].strip(), []))
        elif entries:
            entries[-1][2].extend(line.splitlines() or [""])
    for i, (number, command, output) in enumerate(entries):
        words = _words(command)
        if words is None:
            continue
        after = entries[i + 1] if i + 1 < len(entries) else None
        code = int(after[2][0]) if after is not None and after[1] == "echo $?" and after[2] else _stated_exit(command)
        yield Shown(f"{where}:{number}", tuple(words), code, tuple(output) if output else None)


def shown_commands() -> list[Shown]:
    found: list[Shown] = []
    for path in DOCS:
        where = str(path.relative_to(ROOT))
        for lang, first, lines in _blocks(path):
            if lang == "sh":
                found.extend(_from_sh(where, lines, first))
            elif lang == "console":
                found.extend(_from_console(where, lines, first))
    return found


def why_not_run(shown: Shown) -> str | None:
    """Why a shown command is not run here, or None when it runs. A path that does not exist
    is no reason: the command must then fail as the doc says."""
    verb = shown.argv[0] if shown.argv else ""
    if verb == "extender" and "--print-scheduler-config" in shown.argv:
        return None  # prints the scheduler's configuration entry and exits
    if verb not in OFFLINE:
        return f"{verb} serves or talks to a cluster"
    if verb in ("explain", "audit") and "--cluster-state" not in shown.argv:
        return f"{verb} reads a live cluster"
    if "--kubeconfig" in shown.argv or any("cluster" in a for a in _values_of(shown.argv, "--policies-from")):
        return "it reads a live cluster"
    if "--update" in shown.argv or "--junit" in shown.argv:
        return "it writes into the repository"
    if SHELL.intersection(shown.argv):
        return "a shell pipeline or redirection"
    return None


def _values_of(argv: tuple[str, ...], flag: str) -> list[str]:
    """Every value ``flag`` is given in ``argv`` (``--flag VALUE`` or ``--flag=VALUE``)."""
    found = [a.partition("=")[2] for a in argv if a.startswith(f"{flag}=")]
    return found + [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


SHOWN = shown_commands()
RUN = [s for s in SHOWN if why_not_run(s) is None]


def _run(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """``placement-webhook ARGV`` in process from the repository root: its exit code, and its
    standard error and output interleaved as a terminal shows them."""
    monkeypatch.chdir(ROOT)
    both = io.StringIO()
    with contextlib.redirect_stdout(both), contextlib.redirect_stderr(both):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse: --help, or a usage error
            code = exc.code if isinstance(exc.code, int) else 2
    return code, both.getvalue()


def _pattern(shown: tuple[str, ...]) -> re.Pattern[str]:
    parts = []
    for line in shown:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(piece) for piece in line.rstrip().split("...")) + r"[ \t]*\n")
    return re.compile("".join(parts))


def _matches(shown: tuple[str, ...], real: str) -> bool:
    text = "\n".join(line.rstrip() for line in real.splitlines()) + "\n"
    return _pattern(shown).fullmatch(text) is not None


# --- the extraction itself --------------------------------------------------------------------


def test_the_docs_show_commands_that_this_check_runs() -> None:
    run = {(s.where.split(":")[0], s.argv[0]) for s in RUN}
    assert {("README.md", "mutate"), ("README.md", "lint"), ("README.md", "test"), ("README.md", "explain"),
            ("docs/explain.md", "explain"), ("docs/testing-policies.md", "test"), ("docs/install.md", "certs"),
            ("docs/extender.md", "extender"), ("docs/audit.md", "audit")} <= run


@pytest.mark.parametrize("argv", [("lint", "--policies-from", "cluster"), ("test", "p/", "--policies-from=files,cluster"),
                                  ("mutate", "-f", "d.yaml", "--kubeconfig", "k")])
def test_commands_that_read_a_live_cluster_are_parsed_not_run(argv: tuple[str, ...]) -> None:
    assert why_not_run(Shown("doc.md:1", argv, 0, None)) == "it reads a live cluster"
    assert why_not_run(Shown("doc.md:1", ("lint", "--policies-from", "files"), 0, None)) is None


def test_output_patterns_take_ellipses_for_any_text_and_any_lines() -> None:
    assert _matches(("a ... c", "..."), "a b c\nmore\nlines\n")
    assert _matches(("first", "...", "last"), "first\nlast\n")
    assert not _matches(("first", "last"), "first\nmiddle\nlast\n")


# --- every command shown -------------------------------------------------------------------


@pytest.mark.parametrize("shown", SHOWN, ids=str)
def test_every_command_shown_parses(shown: Shown) -> None:
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.build_parser().parse_args(list(shown.argv))
        except SystemExit as exc:
            assert exc.code == 0, f"{shown.where}: placement-webhook {shlex.join(shown.argv)}: {errors.getvalue()}"


@pytest.mark.parametrize("shown", RUN, ids=str)
def test_every_offline_command_shown_exits_as_stated_and_prints_what_is_shown(
    shown: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = list(shown.argv)
    renamed: dict[str, str] = {}
    if "--out" in argv:  # certs writes here, not into the checkout
        at = argv.index("--out") + 1
        renamed[str(tmp_path / "out")] = argv[at]
        argv[at] = str(tmp_path / "out")
    code, output = _run(argv, monkeypatch)
    for real, shown_as in renamed.items():
        output = output.replace(real, shown_as)
    output = output.replace(f"{ROOT}/", "")
    assert code == shown.exit, f"{shown.where}: exit {code}, the doc says {shown.exit}:\n{output}"
    if shown.output is not None:
        assert _matches(shown.output, output), (
            f"{shown.where}: the doc shows\n" + "\n".join(shown.output) + f"\nbut it prints\n{output}")
