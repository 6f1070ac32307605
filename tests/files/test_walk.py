"""Finding the files a command line names, per path given, so an empty input can be named."""
from __future__ import annotations

from pathlib import Path

import pytest

from webhook.files import walk


def _yaml(name: str) -> bool:
    return name.endswith(".yaml")


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")
    return path


def test_each_path_comes_with_its_own_files_and_a_folder_without_any_with_none(tmp_path: Path) -> None:
    a = _touch(tmp_path / "full" / "a.yaml")
    (tmp_path / "empty").mkdir()
    found = walk.find_each([tmp_path / "full", tmp_path / "empty"], accept=_yaml)
    assert found == [(tmp_path / "full", [a]), (tmp_path / "empty", [])]


def test_a_file_two_paths_reach_is_under_both_but_found_once(tmp_path: Path) -> None:
    a = _touch(tmp_path / "full" / "a.yaml")
    assert walk.find_each([tmp_path / "full", a], accept=_yaml) == [(tmp_path / "full", [a]), (a, [a])]
    assert walk.find([tmp_path / "full", a], accept=_yaml) == [a]


def test_a_missing_path_goes_to_the_callback_or_raises(tmp_path: Path) -> None:
    missing: list[str] = []
    assert walk.find_each([tmp_path / "nope"], accept=_yaml, on_missing=lambda exc: missing.append(str(exc))) == []
    assert missing == [f"{tmp_path / 'nope'}: no such file or directory"]
    with pytest.raises(walk.MissingPath):
        walk.find_each([tmp_path / "nope"], accept=_yaml)
