"""Atomic writes and corrupt-data reporting."""

from __future__ import annotations

import os
import stat

import pytest

from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, atomic_write_text, read_jsonl, run_metadata


def test_atomic_write_leaves_no_temp_and_normal_permissions(tmp_path):
    path = atomic_write_text(tmp_path / "sub" / "a.txt", "hello")
    assert path.read_text() == "hello"
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"]
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_failed_write_keeps_the_old_file(tmp_path):
    path = atomic_write_json(tmp_path / "x.json", {"a": 1})
    with pytest.raises(ValueError):
        atomic_write_json(path, {"a": float("nan")})  # NaN is refused before anything is replaced
    assert path.read_text().strip().startswith("{")
    assert len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize(
    "content, message",
    [('{"a": 1}\n{"b": ', "truncated"), ('{"a": 1}\nnot json\n', ":2: corrupt JSONL"), ("[1, 2]\n", "expected a JSON object")],
)
def test_corrupt_jsonl_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "rows.jsonl"
    path.write_text(content)
    with pytest.raises(LfoError) as info:
        read_jsonl(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_run_metadata_records_versions_and_seed():
    meta = run_metadata(seed=3, config={"k": 1})
    assert meta["seed"] == 3 and meta["config"] == {"k": 1}
    assert "torch" in meta["versions"] and "lfo" in meta["versions"]
