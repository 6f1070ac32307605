"""YAML (and JSON) loading that remembers the line of every node.

Policy errors must name the file and line of the offending field, and plain
``yaml.safe_load`` forgets where things came from. Here PyYAML composes the node graph
(with libyaml's C parser when available, which is several times faster) and we build
plain data from the nodes ourselves, recording the 1-based line of each path on the way.

Files come from users and, through the server's reload, from ConfigMaps, so a document
is bounded as the Kubernetes API server's YAML decoder bounds it: alias expansion by
go-yaml's budget ("billion laughs", CVE-2019-11253) and nesting at 10,000 levels, or at the
installed YAML parser's own limit where that is lower (libyaml 0.2.5 and later refuse more than
1,000 levels, and PyYAML 6.0.4's wheels bundle such a libyaml).
"""
from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Document", "YamlError", "load_file", "load_text", "max_depth"]

Key = str | int
PathT = tuple[Key, ...]

# libyaml is optional in PyYAML builds; the pure-Python loader gives the same nodes and marks.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# go-yaml's limits, which the API server's decoder inherits: scannerc.go's max_flow_level and
# max_indents (nesting), and decode.go's alias budget (see _allowed_alias_ratio).
MAX_DEPTH = 10_000
_ALIAS_MIN_ALIASED = 100  # budget checked only past 100 aliased nodes ...
_ALIAS_MIN_DECODED = 1_000  # ... and 1,000 nodes in all: small documents are never refused
_ALIAS_RATIO_LOW = 400_000  # decoded nodes up to which 99% may come from aliases
_ALIAS_RATIO_HIGH = 4_000_000  # decoded nodes from which only 10% may
# A path is a tuple, so recording the line of every level of a 10,000-level document would
# take memory quadratic in its depth. Kubernetes objects nest a few dozen levels at most;
# below this, ``line_of`` answers with the deepest recorded ancestor's line.
_LINES_DEPTH = 256
# Each level of nesting needs one of these indicators (a flow collection's bracket, a block
# sequence's dash, a mapping's colon or question mark); a text with fewer cannot be too deep.
_NESTING_INDICATORS = "[{-:?"
# How libyaml (0.2.5 and later) words its own nesting limit.
_PARSER_LIMIT_PROBLEM = "exceeded maximum nesting depth"


class YamlError(ValueError):
    """A file that is not valid YAML or JSON; ``str()`` is ``file:line: message``, or
    ``file: message`` for a file that cannot be read at all (``line`` 0: no line is to blame)."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}" if line > 0 else f"{file}: {message}")
        self.file = file
        self.line = line
        self.message = message


class _OverLimit(YamlError):
    """Valid YAML over the decoder's limits (aliasing, nesting): final, not retried as JSON."""


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


def _allowed_alias_ratio(decoded: int) -> float:
    """The share of decoded nodes that may come from alias expansion: go-yaml's
    ``allowedAliasRatio`` (decode.go, the CVE-2019-11253 fix): 99% up to 400,000 nodes,
    10% from 4,000,000, scaled linearly between."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


# One child of a collection, in document order: its key, its path step, its node, its line,
# and the line an alias there would be written on (see _Builder._enter).
_Child = tuple[Any, Key, yaml.Node, int, int]
# One entry of a mapping once merge keys are resolved: the mapping that writes it, its key and
# value nodes, and the line an alias there would be written on (the ``<<`` line when merged).
_Entry = tuple[yaml.MappingNode, yaml.Node, yaml.Node, int]
# What a mapping's plan holds: a mapping it merges (with the ``<<`` line), or one of its entries.
_Step = tuple[yaml.MappingNode, int] | _Entry
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
_STR_TAG = "tag:yaml.org,2002:str"


@dataclass(slots=True)
class _Frame:
    """A collection being built: where it is and the children still to build."""

    node: yaml.Node
    path: PathT | None  # None below _LINES_DEPTH, where no line is recorded
    depth: int
    out: list[Any] | dict[Any, Any]
    children: Iterator[_Child]
    alias_line: int  # line of the alias being expanded; 0 outside any expansion


class _Builder:
    """Turns a composed node graph into plain data plus a path -> line map.

    PyYAML's composer shares the node an alias names instead of copying it, so an alias is
    expanded here: a node reached a second time is an alias. Expansion is counted as go-yaml's
    decoder counts it, and stops where go-yaml's would (``_allowed_alias_ratio``). The build is
    iterative, so 10,000 levels cannot exhaust Python's stack.
    """

    def __init__(self, loader: Any, file: str, *, strict: bool) -> None:
        self.loader = loader
        self.file = file
        self.strict = strict
        self.lines: dict[PathT, int] = {}
        self._active: set[int] = set()  # node ids on the current branch, to stop alias cycles
        self._seen: set[int] = set()  # node ids built so far: a node met again is an alias
        self._decoded = 0  # go-yaml's decodeCount
        self._aliased = 0  # go-yaml's aliasCount: nodes decoded inside an alias expansion

    def build(self, node: yaml.Node, line: int) -> Any:
        """The plain data of a document's root ``node``, which starts on ``line``."""
        stack: list[_Frame] = []
        result = self._enter(node, (), 0, line, line, 0, stack)
        while stack:
            frame = stack[-1]
            child = next(frame.children, None)
            if child is None:
                stack.pop()
                self._active.discard(id(frame.node))
                continue
            key, step, item, item_line, site = child
            path = frame.path + (step,) if frame.path is not None and frame.depth < _LINES_DEPTH else None
            value = self._enter(item, path, frame.depth + 1, item_line, site, frame.alias_line, stack)
            if isinstance(frame.out, list):
                frame.out.append(value)
            else:
                frame.out[key] = value
        return result

    def _enter(
        self, node: yaml.Node, path: PathT | None, depth: int, line: int, site: int, alias_line: int, stack: list[_Frame]
    ) -> Any:
        """A scalar's value, or a new collection whose children the caller's loop builds.

        ``site`` is where an alias here would be written: the key's line in a mapping; in a
        sequence the sequence's own (the composer keeps no mark of an alias, only of its anchor).
        """
        if path is not None:
            self.lines[path] = line
        alias_line = self._count(node, site, alias_line)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if id(node) in self._active:
            raise YamlError(self.file, _line(node), "recursive alias")
        if depth >= MAX_DEPTH:
            raise _OverLimit(self.file, _line(node), f"document nests deeper than {MAX_DEPTH} levels")
        self._active.add(id(node))
        out: list[Any] | dict[Any, Any]
        children: Iterator[_Child]
        if isinstance(node, yaml.SequenceNode):
            here = _line(node)
            out, children = [], ((i, i, item, _line(item), here) for i, item in enumerate(node.value))
        else:
            assert isinstance(node, yaml.MappingNode)  # the composer makes no other node kind
            out, children = {}, self._pairs(node, alias_line)
        stack.append(_Frame(node, path, depth, out, children, alias_line))
        return out

    def _count(self, node: yaml.Node, site: int, alias_line: int) -> int:
        """Count ``node`` as decoded, as go-yaml's ``decoder.unmarshal`` does; returns the line
        of the alias expansion it is part of (0 for none)."""
        if id(node) in self._seen:  # an alias: go-yaml decodes the alias node, then its target
            self._decoded += 1
            self._aliased += 1 if alias_line else 0
            alias_line = alias_line or site
        else:
            self._seen.add(id(node))
        self._decoded += 1
        if alias_line:
            self._aliased += 1
            self._check_aliasing(alias_line)
        return alias_line

    def _check_aliasing(self, alias_line: int) -> None:
        decoded, aliased = self._decoded, self._aliased
        if aliased > _ALIAS_MIN_ALIASED and decoded > _ALIAS_MIN_DECODED and aliased / decoded > _allowed_alias_ratio(decoded):
            raise _OverLimit(self.file, alias_line, "document contains excessive aliasing")

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        value = self.loader.construct_object(node, deep=True)
        # Kubernetes' YAML decoder keeps timestamps and binary as the text that was written.
        if isinstance(value, (datetime.date, bytes)):
            return node.value
        return value

    def _pairs(self, node: yaml.MappingNode, alias_line: int) -> Iterator[_Child]:
        """The mapping's entries, merge keys resolved (``_entries``), each key checked when its
        turn comes (errors in document order)."""
        first: dict[tuple[int, Any], tuple[int, int]] = {}  # (mapping, key) -> (key node, line)
        for owner, key_node, value_node, site in self._entries(node):
            key_line = _line(key_node)
            self._count(key_node, site, alias_line)
            key = self._scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or isinstance(key, (list, dict, float)):
                raise YamlError(self.file, key_line, "mapping keys must be strings")
            seen = first.setdefault((id(owner), key), (id(key_node), key_line))
            if self.strict and seen[0] != id(key_node):
                # Strict decoding (kubectl --validate=strict) rejects duplicate fields; for
                # policies, silently keeping the last one would hide an author's mistake. Only
                # keys one mapping writes itself can be duplicates: a merged key is overridden.
                raise YamlError(self.file, key_line, f"duplicate key {key!r} (first at line {seen[1]})")
            step = key if isinstance(key, (str, int)) and not isinstance(key, bool) else str(key)
            yield key, step, value_node, key_line, site

    def _entries(self, node: yaml.MappingNode) -> Iterator[_Entry]:
        """The mapping's entries with YAML merge keys (``<<: *base``) resolved, in an order in
        which the last of equal keys is the one that counts: the merged mappings' entries, then
        the mapping's own. The YAML 1.1 merge key rule: a key the mapping writes itself wins over
        a merged one, wherever the ``<<`` stands, and of several merged mappings
        (``<<: [*a, *b]``) the first wins, so a list is merged last to first.

        What PyYAML's ``SafeConstructor.flatten_mapping`` does, but lazily, so that the alias
        budget stops a merge bomb while it expands, and without rewriting the composed nodes,
        which a mapping's aliases share. (PyYAML 6.0.4's own drops a merged entry only when it has
        merged that very key string object before, so ``<<: [*a, *b]`` takes b's value of most
        keys a and b share, and a merged mapping's own override can be lost.)
        """
        stack: list[tuple[yaml.MappingNode, Iterator[_Step]]] = [(node, self._plan(node, None))]
        expanding = {id(node)}
        while stack:
            owner, plan = stack[-1]
            step = next(plan, None)
            if step is None:
                stack.pop()
                expanding.discard(id(owner))
            elif len(step) == 2:  # a mapping to merge
                merged, site = step
                if id(merged) in expanding:
                    raise YamlError(self.file, _line(merged), "recursive alias")
                expanding.add(id(merged))
                stack.append((merged, self._plan(merged, site)))
            else:
                yield step

    def _plan(self, node: yaml.MappingNode, site: int | None) -> Iterator[_Step]:
        """The mappings ``node`` merges, each with the line of the ``<<`` that brings it in, then
        its own entries. ``site``: the line of the outermost ``<<`` when ``node`` is merged
        (where an alias budget error is reported), None for the mapping being built."""
        own: list[_Entry] = []
        merge_line = 0
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                line = _line(key_node)
                if merge_line and self.strict:
                    raise YamlError(self.file, line, f"duplicate key '<<' (first at line {merge_line})")
                merge_line = merge_line or line
                yield from ((merged, line if site is None else site) for merged in self._merged(value_node))
                continue
            if key_node.tag == _VALUE_TAG:
                key_node.tag = _STR_TAG  # "=" as a key is the string "=", as PyYAML reads it
            own.append((node, key_node, value_node, _line(key_node) if site is None else site))
        yield from own

    def _merged(self, value: yaml.Node) -> list[yaml.MappingNode]:
        """The mappings a ``<<`` merges, last to first, so that the first wins."""
        if isinstance(value, yaml.MappingNode):
            return [value]
        if not isinstance(value, yaml.SequenceNode):
            raise YamlError(self.file, _line(value), "invalid YAML: while constructing a mapping: expected a mapping "
                            f"or list of mappings for merging, but found {_kind(value)}")
        for item in value.value:
            if not isinstance(item, yaml.MappingNode):
                raise YamlError(self.file, _line(item), "invalid YAML: while constructing a mapping: expected a "
                                f"mapping for merging, but found {_kind(item)}")
        return list(reversed(value.value))


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _kind(node: yaml.Node) -> str:
    """"scalar", "sequence" or "mapping", as PyYAML names its nodes in errors."""
    return type(node).__name__.removesuffix("Node").lower()


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
        _check_depth(text, file)
        while loader.check_node():
            node = loader.get_node()
            builder = _Builder(loader, file, strict=strict)
            line = _line(node)
            data = builder.build(node, line)
            if data is not None:
                docs.append(Document(data=data, file=file, line=line, lines=builder.lines))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file) from None
    except RecursionError:  # the pure-Python composer recurses, and gives up well before MAX_DEPTH
        raise YamlError(file, 1, "document nests too deeply for the pure-Python YAML parser") from None
    finally:
        loader.dispose()
    return docs


@functools.cache
def max_depth() -> int:
    """The deepest nesting a document may have here: MAX_DEPTH, or less where the installed
    parser stops earlier. libyaml 0.2.5 added a nesting limit (1,000 levels by default) that it
    reports as a plain scanner error; found once, by parsing nested flow sequences, so that a
    document over it is refused with the same message and line as one over MAX_DEPTH."""
    if _Loader is yaml.SafeLoader:
        return MAX_DEPTH  # the pure-Python parser has no limit of its own (its composer recurses)

    def parses(depth: int) -> bool:
        try:
            for _ in yaml.parse("[" * depth + "]" * depth, Loader=_Loader):
                pass
        except yaml.YAMLError:
            return False
        return True

    if parses(MAX_DEPTH):
        return MAX_DEPTH
    low, high = 1, MAX_DEPTH  # parses(low), not parses(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if parses(middle) else (low, middle)
    return low


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than max_depth() before anything is composed: libyaml's composer
    recurses in C, and a deep enough document (a few bytes a level) overflows the stack."""
    limit = max_depth()
    if sum(map(text.count, _NESTING_INDICATORS)) <= limit:
        return  # the common case, decided without parsing twice
    depth = 0
    events = yaml.parse(text, Loader=_Loader)
    while True:
        try:
            event = next(events)
        except StopIteration:
            return
        except yaml.MarkedYAMLError as exc:
            # libyaml's scanner reads ahead of the events, so its limit is recognised by its
            # own words (scanner.c, yaml_maximum_level_reached), not by our count of depth.
            if _PARSER_LIMIT_PROBLEM not in str(exc.problem):
                raise  # an ordinary syntax error, reported as such by the caller
            mark = exc.problem_mark or exc.context_mark
            raise _OverLimit(file, int(mark.line) + 1 if mark else 1, f"document nests deeper than {limit} levels") from None
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                line = int(event.start_mark.line) + 1 if event.start_mark else 1
                raise _OverLimit(file, line, f"document nests deeper than {limit} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_file(path: str | Path, *, strict: bool = False, locate: bool = True) -> list[Document]:
    """Documents of a ``.yaml``/``.yml``/``.json`` file (UTF-8, with or without a BOM).

    ``locate=False`` is for bulk data whose fields no error names (a cluster dump): a JSON
    text is then decoded by the json module, some hundred times faster than composing YAML
    nodes, and its documents keep only their own line.
    """
    path = Path(path)
    name = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        # In the words of a missing path's error (files.walk): "no such file or directory".
        reason = exc.strerror or str(exc)
        raise YamlError(name, 0, reason[:1].lower() + reason[1:]) from None
    except UnicodeDecodeError as exc:
        raise YamlError(name, 1, f"not UTF-8 text: {exc.reason}") from None
    if not locate and text.lstrip().startswith(("{", "[")):
        return _load_json(text, name)
    if path.suffix.lower() != ".json":
        return load_text(text, file=name, strict=strict)
    try:
        return load_text(text, file=name, strict=strict)
    except _OverLimit:
        raise  # the text was read as YAML: as JSON it would hit the same limit, or lose the reason
    except YamlError:
        # JSON that YAML 1.1 cannot read (tabs, "\/" escapes): decode it as JSON, which
        # loses per-field lines but keeps the document.
        return _load_json(text, name)


def _load_json(text: str, file: str) -> list[Document]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise YamlError(file, exc.lineno, f"invalid JSON: {exc.msg}") from None
    except RecursionError:  # the json module recurses too, and stops at Python's recursion limit
        raise YamlError(file, 1, "invalid JSON: nests too deeply") from None
    return [] if data is None else [Document(data=data, file=file, line=1, lines={(): 1})]
