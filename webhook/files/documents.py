"""YAML (and JSON) loading that remembers the line of every node.

Policy errors must name the file and line of the offending field, and plain
``yaml.safe_load`` forgets where things came from. Here PyYAML composes the node graph
(with libyaml's C parser when available, which is several times faster) and we build
plain data from the nodes ourselves, recording the 1-based line of each path on the way.
"""
from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Document", "YamlError", "load_file", "load_text"]

Key = str | int
PathT = tuple[Key, ...]

# libyaml is optional in PyYAML builds; the pure-Python loader gives the same nodes and marks.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlError(ValueError):
    """A file that is not valid YAML or JSON; ``str()`` is ``file:line: message``."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Document:
    """One YAML document as plain data, with the line of every path in it."""

    data: Any
    file: str
    line: int
    lines: Mapping[PathT, int] = field(default_factory=dict, repr=False, compare=False)

    def line_of(self, path: Sequence[Key]) -> int:
        """Line of ``path``, or of its deepest ancestor that exists (for missing fields)."""
        key = tuple(path)
        for end in range(len(key), -1, -1):
            line = self.lines.get(key[:end])
            if line is not None:
                return line
        return self.line


class _Builder:
    """Turns a composed node graph into plain data plus a path -> line map."""

    def __init__(self, loader: Any, file: str, *, strict: bool) -> None:
        self.loader = loader
        self.file = file
        self.strict = strict
        self.lines: dict[PathT, int] = {}
        self._active: set[int] = set()  # node ids on the current branch, to stop alias cycles

    def build(self, node: yaml.Node, path: PathT, line: int) -> Any:
        self.lines[path] = line
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if id(node) in self._active:
            raise YamlError(self.file, _line(node), "recursive alias")
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, path + (i,), _line(item)) for i, item in enumerate(node.value)]
            assert isinstance(node, yaml.MappingNode)  # the composer makes no other node kind
            return self._mapping(node, path)
        finally:
            self._active.discard(id(node))

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        value = self.loader.construct_object(node, deep=True)
        # Kubernetes' YAML decoder keeps timestamps and binary as the text that was written.
        if isinstance(value, (datetime.date, bytes)):
            return node.value
        return value

    def _mapping(self, node: yaml.MappingNode, path: PathT) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # resolves YAML merge keys ("<<: *defaults")
        out: dict[Any, Any] = {}
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = self._scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or isinstance(key, (list, dict, float)):
                raise YamlError(self.file, _line(key_node), "mapping keys must be strings")
            key_line = _line(key_node)
            if key in first_line and self.strict:
                # Strict decoding (kubectl --validate=strict) rejects duplicate fields; for
                # policies, silently keeping the last one would hide an author's mistake.
                raise YamlError(self.file, key_line, f"duplicate key {key!r} (first at line {first_line[key]})")
            first_line[key] = key_line
            step = key if isinstance(key, (str, int)) and not isinstance(key, bool) else str(key)
            out[key] = self.build(value_node, path + (step,), key_line)
        return out


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _yaml_error(exc: yaml.YAMLError, file: str) -> YamlError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = int(mark.line) + 1 if mark is not None else 1
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"{context}: {problem}" if context else str(problem)
    return YamlError(file, line, f"invalid YAML: {message}")


def load_text(text: str, *, file: str = "<stdin>", strict: bool = False) -> list[Document]:
    """Every non-empty document in ``text`` (a YAML stream, or JSON), with line maps.

    ``strict`` rejects duplicate mapping keys; otherwise the last one wins, as the API
    server's default (non-strict) decoding does for manifests people actually write.
    """
    text = text.removeprefix("\ufeff")
    loader = _Loader(text)
    docs: list[Document] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            builder = _Builder(loader, file, strict=strict)
            line = _line(node)
            data = builder.build(node, (), line)
            if data is not None:
                docs.append(Document(data=data, file=file, line=line, lines=builder.lines))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file) from None
    finally:
        loader.dispose()
    return docs


def load_file(path: str | Path, *, strict: bool = False) -> list[Document]:
    """Documents of a ``.yaml``/``.yml``/``.json`` file (UTF-8, with or without a BOM)."""
    path = Path(path)
    name = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise YamlError(name, 0, exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise YamlError(name, 1, f"not UTF-8 text: {exc.reason}") from None
    if path.suffix.lower() != ".json":
        return load_text(text, file=name, strict=strict)
    try:
        return load_text(text, file=name, strict=strict)
    except YamlError:
        # JSON that YAML 1.1 cannot read (tabs, "\/" escapes): decode it as JSON, which
        # loses per-field lines but keeps the document.
        return _load_json(text, name)


def _load_json(text: str, file: str) -> list[Document]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise YamlError(file, exc.lineno, f"invalid JSON: {exc.msg}") from None
    return [] if data is None else [Document(data=data, file=file, line=1, lines={(): 1})]
