"""The cache keys of the shipped warm-start recipes, pinned: a change to lfo that would rebuild every cached warm
start (a renamed option, a moved section, a new default) fails here first. Update a value only on purpose, and
say in the commit that cached warm starts of that recipe rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

from lfo_cli.models.warmstart_cache import warmstart_key
from lfo_cli.recipes import load_recipe

ROOT = Path(__file__).resolve().parents[2]

# Computed at 77a4a13 (before each world declared its own recipe settings), from the repo's data/ world.
KEYS = {
    "warmstart_demo": "5d2d6f910796", "warmstart_micro": "879174d9a941", "warmstart_micro_explore": "2c4bad9fd690",
    "warmstart_micro_long": "45ef3e2abef4", "warmstart_reading": "c0ea160d4c22",
    "warmstart_reading_clean": "61161f6fe301", "warmstart_reading_fresh": "d9f242bd3dcd",
    "warmstart_reading_probe": "5f91cb31e858", "warmstart_reading_qwen3": "979596a3e8c2",
    "warmstart_reading_qwen3_wm": "ba7d2b407893", "warmstart_reading_smollm2": "7acf6763ff1b",
    "warmstart_reading_smollm2_wm": "ed7ab4027e30", "warmstart_reading_wm": "12f437e097c0",
    "warmstart_smollm2": "6f1add44609c",
}
# TextWorld's, with no world files at data_tw (its games' manifest is part of the key)
TEXTWORLD_KEYS = {
    "warmstart_textworld": "e7e419d877b8", "warmstart_textworld_half": "355fe9903e10",
    "warmstart_textworld_smollm2": "04376d108c30", "warmstart_textworld_smollm2_half": "4127851ba61a",
    "warmstart_textworld_smollm2_wm": "1e5b388de9f9", "warmstart_textworld_wm": "1ca3846fb6e9",
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_a_shipped_warm_starts_cache_key_is_unchanged(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # data.dir is relative: the repo's data/ world
    assert warmstart_key(load_recipe(name).config) == KEYS[name]


@pytest.mark.parametrize("name", sorted(TEXTWORLD_KEYS))
def test_a_textworld_warm_starts_cache_key_is_unchanged(name, tmp_path, monkeypatch):
    pytest.importorskip("textworld")
    monkeypatch.chdir(tmp_path)  # no data_tw here
    assert warmstart_key(load_recipe(name).config) == TEXTWORLD_KEYS[name]
