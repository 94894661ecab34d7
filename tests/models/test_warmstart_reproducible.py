"""A recipe defines its warm start: the same bytes however loaded the machine and with 1 or 2 threads; a time
limit is a guard that fails the build and caches nothing; a cache entry that is not the recipe's model
(budget-stopped, foreign) is refused with one line, and `lfo models build RECIPE --force` rebuilds it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lfo_cli.errors import LfoError
from lfo_cli.models import cache

pytestmark = pytest.mark.slow
TQDM = re.compile(r"it/s\]|\d+%\|")


@pytest.fixture()
def tiny_recipe(tmp_path, tiny_model_dir, small_world_dir) -> Path:
    """A warm-start recipe (a YAML delta over warmstart_micro) on the tiny model and world: ~8 SFT steps."""
    path = tmp_path / "warmstart_tiny.yaml"
    path.write_text(yaml.safe_dump({
        "base": "warmstart_micro",
        "model": {"name": str(tiny_model_dir)},
        "data": {"dir": str(small_world_dir), "fresh_tasks": 0, "max_tasks": 16, "rollouts_per_task": 1,
                 "success_weight": 1, "induction_rows": 4},
        "train": {"epochs": 2, "batch_size": 4, "logging_steps": 2, "save_steps": 4},
        "eval": {"num_tasks": 0},
    }))
    return path


@pytest.fixture(autouse=True)
def _restore_threads():
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _build(recipe: Path, home: Path, monkeypatch, *overrides: str) -> Path:
    from lfo_cli.models.warmstart import ensure_warmstart

    monkeypatch.setenv("LFO_HOME", str(home))
    return ensure_warmstart(str(recipe), overrides=list(overrides))


@pytest.mark.long
def test_the_same_recipe_gives_the_same_bytes_beside_a_cpu_hog_and_with_another_thread_count(
        tiny_recipe, tmp_path, monkeypatch):
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = _build(tiny_recipe, tmp_path / "home_loaded", monkeypatch, "train.threads=1")
    finally:
        hog.kill()
        hog.wait()
    quiet = _build(tiny_recipe, tmp_path / "home_quiet", monkeypatch, "train.threads=2")
    assert loaded.parent.name == quiet.parent.name  # the thread count is not part of the key...
    a, b = (p / "model.safetensors" for p in (loaded, quiet))
    assert a.read_bytes() == b.read_bytes()  # ...because it does not change a byte
    info = cache.entry_info(loaded.parent)
    assert info["train/steps"] == info["train/planned_steps"] > 4 and info["train/threads"] == 1
    assert cache.entry_info(quiet.parent)["train/threads"] == 2


def test_a_tripped_time_guard_caches_nothing_and_the_next_build_continues_to_the_same_bytes(
        tiny_recipe, tmp_path, monkeypatch):
    from lfo_cli.models.warmstart_cache import resolve_config, warmstart_cache_path

    with pytest.raises(LfoError, match=r"time guard train.max_minutes=1e-05 after 1 of its \d+ steps; nothing was "
                                       r"cached .* the next build continues from step 1"):
        _build(tiny_recipe, tmp_path / "home", monkeypatch, "train.max_minutes=0.00001")
    root = tmp_path / "home" / "warmstart"
    (kept,) = [p for p in root.iterdir() if not p.name.endswith(".lock")]  # no entry: the build's temporary dir
    assert kept.name.endswith(".tmp") and (kept / "checkpoints" / "checkpoint-1").is_dir()
    resumed = _build(tiny_recipe, tmp_path / "home", monkeypatch)  # adopts the stopped build's dir
    assert not kept.exists() and cache.entry_info(resumed.parent)["resumed_build"] is True
    whole = _build(tiny_recipe, tmp_path / "home_whole", monkeypatch)
    assert (resumed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    def steps(entry: Path) -> list[int]:
        return [json.loads(line)["step"] for line in (entry / "metrics.jsonl").read_text().splitlines()]

    assert steps(resumed.parent) == steps(whole.parent)  # the rows the whole build logs, none twice
    # the guard is no part of the key: a complete build with any guard is the same cache entry
    keys = {warmstart_cache_path(resolve_config(str(tiny_recipe), [f"train.max_minutes={m}"])[1]).name
            for m in ("null", "30", "0.5")}
    assert len(keys) == 1


def _lfo_here(*args: str, home: Path):
    """`lfo ARGS` in this process, with ``home`` as $LFO_HOME."""
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    return CliRunner(env={"LFO_HOME": str(home)}).invoke(app, list(args))


def test_budget_stopped_and_foreign_entries_are_refused_and_rebuilt_on_request(tiny_recipe, tmp_path):
    home = tmp_path / "home"
    built = _lfo_here("models", "build", str(tiny_recipe), home=home)
    assert built.exit_code == 0, built.output[-2000:]
    # a log, not a terminal: plain progress lines with step/total and ETA, no tqdm bar
    assert re.search(r"^trained \d+ steps in \d+ s$", built.stdout, re.M) and not TQDM.search(built.stdout + built.stderr)
    entry = next(p for p in (home / "warmstart").iterdir() if not p.name.startswith("."))
    marker = entry / cache.MARKER
    good = json.loads(marker.read_text())
    original = (entry / "model" / "model.safetensors").read_bytes()

    for name, info, says in (
            ("budget-stopped", {**good, "train/steps": 3, "train/stopped_by_budget": True},
             "stopped at its time budget after 3 SFT steps"),
            ("foreign", {**good, "key": "micro-0123456789ab"}, "is foreign: its marker records key 'micro-0123456789ab'")):
        marker.write_text(json.dumps(info))
        refused = _lfo_here("models", "build", str(tiny_recipe), home=home)
        assert refused.exit_code == 2 and refused.stdout == ""
        assert len(refused.stderr.strip().splitlines()) == 1 and refused.stderr.startswith("error: warm start")
        assert says in refused.stderr
        assert f"lfo models build {tiny_recipe} --force" in refused.stderr
        listed = json.loads(_lfo_here("models", "list", "--json", home=home).stdout)["warmstarts"]
        assert [r["state"] for r in listed] == [name]
    rebuilt = _lfo_here("models", "build", str(tiny_recipe), "--force", home=home)
    assert rebuilt.exit_code == 0, rebuilt.output[-2000:]
    assert (entry / "model" / "model.safetensors").read_bytes() == original  # the recipe's model, again
    (row,) = json.loads(_lfo_here("models", "list", "--json", home=home).stdout)["warmstarts"]
    assert row["state"] == "complete" and row["steps"] == row["planned_steps"] == good["train/planned_steps"]
    assert row["recipe"] == tiny_recipe.stem
