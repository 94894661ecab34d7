"""TrainerRun's refusals, without training: a dir that holds another kind of run, a changed config named by its own
(dotted) key, and keys that TrainingArguments derives from the environment left out of the comparison."""

from __future__ import annotations

import json

import pytest

from lfo_cli.api import DualLoRAConfig, TrainerRun, WorldModelSettings
from lfo_cli.errors import LfoError


def _args(out, **kw) -> DualLoRAConfig:
    return DualLoRAConfig(output_dir=str(out), use_cpu=True, report_to=[], max_steps=3, **kw)


def _record(out, config: dict, kind: str = "trainer") -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps({"kind": kind, "config": config}))


def test_a_dir_of_another_kind_of_run_is_refused(tmp_path):
    _record(tmp_path / "run", {}, kind="grpo")
    with pytest.raises(LfoError, match=r"holds a grpo run, not one of TrainerRun's: set another output_dir"):
        TrainerRun(_args(tmp_path / "run"))


def test_a_changed_value_is_named_by_its_dotted_key_and_derived_keys_are_not_compared(tmp_path):
    before = TrainerRun(_args(tmp_path / "run", wm=WorldModelSettings(coef=0.5))).config
    _record(tmp_path / "run", {**before, "disable_tqdm": not before["disable_tqdm"], "local_rank": 3,
                               "report_to": ["tensorboard"], "output_dir": "/elsewhere"})
    assert TrainerRun(_args(tmp_path / "run", wm=WorldModelSettings(coef=0.5))).resume  # the same run: resumes
    with pytest.raises(LfoError, match=r"holds a run with wm\.coef=0\.5, this config has 0\.25: a resume keeps"):
        TrainerRun(_args(tmp_path / "run", wm=WorldModelSettings(coef=0.25)))
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"status": "complete"}))
    with pytest.raises(LfoError, match="holds a complete run; a finished run is never modified"):
        TrainerRun(_args(tmp_path / "run", wm=WorldModelSettings(coef=0.5)))
