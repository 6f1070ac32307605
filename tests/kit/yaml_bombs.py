"""Hostile YAML the loaders must refuse: CVE-2019-11253's "billion laughs"."""
from __future__ import annotations

_LEVELS = "abcdefghi"


def billion_laughs(indent: str = "") -> str:
    """Nine levels of nine aliases (9**9 strings once expanded), one line per level, each
    line prefixed with ``indent`` so it can sit inside any mapping."""
    lol = ",".join(['"lol"'] * 9)
    lines = [f"{indent}a: &a [{lol}]"]
    for prev, level in zip(_LEVELS, _LEVELS[1:], strict=False):
        aliases = ",".join([f"*{prev}"] * 9)
        lines.append(f"{indent}{level}: &{level} [{aliases}]")
    return "\n".join(lines) + "\n"
