"""Curriculum: mastery over a full window advances one level and clears the window; logged in a run."""

from __future__ import annotations

import json

from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.curriculum import CurriculumManager
from lfo_cli.wmil.trainer import train


def test_mastery_window_and_advance():
    cm = CurriculumManager(0, 2, mastery_threshold=0.8, window_size=10)
    assert not cm.update([1] * 9)  # window not full yet
    assert cm.update([1])  # 10/10 >= 0.8
    assert cm.level == 1 and len(cm.window) == 0
    assert not cm.update([0] * 3 + [1] * 7)  # 0.7 < 0.8
    assert cm.update([1])  # window slides: the oldest 0 drops out -> 0.8
    assert cm.level == 2
    assert not cm.update([1] * 20)  # max level
    state = cm.state_dict()
    other = CurriculumManager(0, 2, 0.8, 10)
    other.load_state_dict(state)
    assert other.level == 2 and other.history == cm.history


def test_training_run_advances_levels(tmp_path):
    cfg = WMILConfig(task="pattern_echo", curriculum=True, steps=400, num_envs=64, log_every=10, save_every=400,
                     curriculum_window=128, mastery_threshold=0.9, eval_episodes=64)
    summary = train(cfg, tmp_path / "run", progress=False, quiet=True)
    levels = [json.loads(line)["curriculum/level"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert levels[0] == 0 and levels[-1] == 2 and levels == sorted(levels)
    assert [h["level"] for h in summary["curriculum_history"]] == [1, 2]
