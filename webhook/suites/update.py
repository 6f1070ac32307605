"""``test --update``: rewrite expected objects from what admission produces now.

Only the text of each rewritten ``expect.object`` value is replaced; the rest of the suite
file (other cases, comments, key order, quoting) stays byte for byte as it was, so the change
reads well in ``git diff``. Comments inside a rewritten inline object are lost, as is an
alias target (``object: *expected`` is replaced by the object itself). ``expect.objectFile``
files are rewritten whole (YAML, or JSON for ``.json`` files).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.suites.checks import dump, same

Key = str | int


class UpdateError(RuntimeError):
    """The suite file could not be rewritten safely (it is left as it was)."""


@dataclass
class Edits:
    """Pending rewrites for one suite file, applied together at the end of its run."""

    file: Path
    _inline: list[tuple[tuple[Key, ...], int, Any]] = field(default_factory=list)
    _files: dict[Path, Any] = field(default_factory=dict)

    def inline(self, path: tuple[Key, ...], key_line: int, value: Any) -> None:
        """Replace the value at ``path`` (whose key sits on 1-based ``key_line``) with ``value``."""
        self._inline.append((path, key_line, value))

    def object_file(self, path: Path, value: Any) -> None:
        if path in self._files and not same(self._files[path], value):
            raise UpdateError(f"{path}: cases sharing this expected objectFile produce different objects")
        self._files[path] = value

    def apply(self) -> None:
        if self._inline:
            text = self.file.read_bytes().decode("utf-8-sig")
            self.file.write_bytes(rewrite(text, self._inline).encode("utf-8"))
        for path, value in self._files.items():
            write_object(path, value)


def write_object(path: Path, value: Any) -> None:
    """Write one object as YAML, or as JSON when the file name says so."""
    text = json.dumps(value, indent=2) + "\n" if path.suffix.lower() == ".json" else dump(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def rewrite(text: str, edits: list[tuple[tuple[Key, ...], int, Any]]) -> str:
    """``text`` with each edit's value replaced; checked by parsing the result back."""
    documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    spans = [_span(text, documents, path, line, value) for path, line, value in edits]
    for start, end, replacement in sorted(spans, reverse=True):
        text = text[:start] + replacement + text[end:]
    _verify(text, edits)
    return text


def _span(text: str, documents: list[yaml.Node], path: tuple[Key, ...], line: int, value: Any) -> tuple[int, int, str]:
    """(start, end, replacement) for the value at ``path`` in the document whose key is on ``line``."""
    for root in documents:
        found = _find(root, path)
        if found is not None and found[1].start_mark.line + 1 == line:
            parent, key_node, value_node = found
            return _replacement(text, parent, key_node, value_node, value)
    raise UpdateError(f"cannot find {'.'.join(map(str, path))} at line {line} to rewrite")


def _find(node: yaml.Node, path: tuple[Key, ...]) -> tuple[yaml.Node, yaml.Node, yaml.Node] | None:
    """(parent mapping, key node, value node) of the last step of ``path``."""
    parent: yaml.Node | None = None
    key_node: yaml.Node | None = None
    for step in path:
        parent = node
        if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            key_node, node = None, node.value[step]
        elif isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == step), None)
            if pair is None:
                return None
            key_node, node = pair
        else:
            return None
    if parent is None or key_node is None:
        return None
    return parent, key_node, node


_ANCHOR = re.compile(r"[ \t]*(&[^\s,{}\[\]]+)?")
_ALIAS = re.compile(r"[ \t]*\*[^\s,{}\[\]]+")


def _replacement(text: str, parent: yaml.Node, key: yaml.Node, value_node: yaml.Node, value: Any) -> tuple[int, int, str]:
    colon = text.index(":", key.end_mark.index) + 1
    newline = "\r\n" if "\r\n" in text else "\n"
    if getattr(parent, "flow_style", False):
        rendered = " " + json.dumps(value)
    elif isinstance(value, dict) and value:
        indent = " " * (key.start_mark.column + 2)
        rendered = "".join(newline + indent + line for line in dump(value).splitlines())
    else:
        rendered = " " + json.dumps(value)
    alias = _ALIAS.match(text, colon)
    if alias is not None:
        return colon, alias.end(), rendered
    anchor = _ANCHOR.match(text, colon)
    # Keep an anchor on the value (``object: &expected``): other cases may alias it.
    start = anchor.end() if anchor is not None and anchor.group(1) else colon
    return start, _end_of(text, value_node), rendered


def _end_of(text: str, node: yaml.Node) -> int:
    """Index just past the last character of ``node``'s own text (not the comments after it)."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        end = _end_of(text, last[1] if isinstance(last, tuple) else last)
    else:
        end = node.end_mark.index
    while end > 0 and text[end - 1] in " \t\r\n":
        end -= 1
    return end


def _verify(text: str, edits: list[tuple[tuple[Key, ...], int, Any]]) -> None:
    from webhook.files import documents as yamlsrc

    documents = yamlsrc.load_text(text)
    for path, _line, value in edits:
        if not any(same(_value_at(d.data, path), value) for d in documents):
            raise UpdateError(f"rewriting {'.'.join(map(str, path))} did not round-trip; file left unchanged")


def _value_at(data: Any, path: tuple[Key, ...]) -> Any:
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data
