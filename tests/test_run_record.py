"""The run record (lfo_cli/run_record.py) spells every run-dir name and metric key once: `lfo report` reads
keys only through it, and the runs lfo writes hold every key the report reads."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lfo_cli import run_record as rr

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "lfo_cli" / "report"
sys.path.insert(0, str(ROOT / "tests" / "train"))

# A key of one of the run record's families, spelled as a literal: `val/success`, `grad_norm/wm`, `heldout/` ...
METRIC_LIKE = re.compile(r"(?<![\w./-])(?:val|heldout|wm|losses|grad_norm|warnings|charts|eval|train|reward|teacher)/[\w/]*")
RUN_FILE_LIKE = re.compile(r"metrics\.jsonl|run\.json|recipe\.yaml|config\.json|run_metadata\.json|transfer_eval|"
                           r"heldout_step|checkpoint-|\.complete\b|world_model/|validation/")
NOT_KEYS = {"wm/rl"}  # calibration's column header "median wm/rl" (world model over RL), not a key


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings, f-string parts included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_report_spells_no_metric_key_or_run_dir_name_itself():
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in sorted(REPORT.glob("*.py"))
             for line, text in _strings(path)
             if set(METRIC_LIKE.findall(text)) - NOT_KEYS or RUN_FILE_LIKE.search(text)]
    assert not found, "the report reads keys and run-dir names through lfo_cli.run_record:\n" + "\n".join(found)


def report_reads() -> dict[str, object]:
    """The run_record names the report's modules use (``rr.NAME`` or imported by name), with their values."""
    names: set[str] = set()
    for path in sorted(REPORT.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "lfo_cli":
                aliases |= {a.asname or a.name for a in node.names if a.name == "run_record"}
            elif isinstance(node, ast.ImportFrom) and node.module == "lfo_cli.run_record":
                names |= {a.name for a in node.names}
        names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id in aliases}
    return {name: getattr(rr, name) for name in sorted(names)}


def world_reads() -> dict[str, object]:
    """The run_record names of the keys the report reads because a built-in world names them
    (``World.study_words.columns``)."""
    from lfo_cli.worlds import kinds, world_class

    keys = {key for kind in kinds() for key, _ in world_class(kind).study_words.columns}
    return {name: value for name, value in vars(rr).items() if name.isupper() and value in keys}


def test_the_report_reads_through_the_run_record():
    reads = report_reads()
    assert {"METRICS_FILE", "SUMMARY_FILE", "VAL_SUCCESS", "VAL_SUCCESS_D2", "WM_TOKEN_ACC", "GRAD_WM_OVER_RL",
            "WMIL_SUCCESS"} <= set(reads)
    assert all(isinstance(v, (str, tuple)) or callable(v) for v in reads.values())


def test_transfer_eval_files_match_the_glob_the_report_reads():
    from lfo_cli.eval.transfer import eval_file_name, eval_parameters

    params = eval_parameters(("transfer", "val"), samples=1, max_tasks=None, temperature=1.0, seed=0,
                             backend="transformers", data_dir=None, difficulties=None, against_base=False)
    assert fnmatch.fnmatch(eval_file_name(params), rr.TRANSFER_EVAL_GLOB)


def test_each_name_spells_its_own_key():
    values = [v for k, v in vars(rr).items() if k.isupper() and isinstance(v, str)]
    assert len(values) == len(set(values)), sorted(v for v in values if values.count(v) > 1)


# ---- every key the report reads is written by a run ------------------------------------------------------------

@dataclass
class Written:
    """What one run (or one writer) wrote: its keys (metrics rows, summary, recipe, run.json, validation files)
    and its dir."""

    what: str
    keys: set[str]
    path: Path | None = None
    summary: dict = field(default_factory=dict)

    def names(self) -> set[str]:
        return {p.name for p in self.path.iterdir()} if self.path else set()


def _run_dir(what: str, path: Path) -> Written:
    import yaml

    from lfo_cli.report.load import flatten

    keys = {k for line in (path / rr.METRICS_FILE).read_text().splitlines() if line for k in json.loads(line)}
    summary = json.loads((path / rr.SUMMARY_FILE).read_text())
    keys |= set(summary)
    for file in [path / rr.RUN_FILE, path / rr.WMIL_CONFIG_FILE, *(path / rr.VALIDATION_DIR).glob("*.json")]:
        if file.is_file():
            keys |= set(json.loads(file.read_text()))
    if (path / rr.RECIPE_FILE).is_file():
        keys |= set(flatten(yaml.safe_load((path / rr.RECIPE_FILE).read_text())))
    return Written(what, keys, path, summary)


# Names the report reads that are not a key or a file of the run itself.
SPECIAL = {
    "STATUS_COMPLETE": lambda w: w.summary.get(rr.STATUS) == rr.STATUS_COMPLETE,
    "HELDOUT": lambda w: any(k.startswith(f"{rr.HELDOUT}/") for k in w.keys),
    "VAL": lambda w: any(k.startswith(f"{rr.VAL}/") for k in w.keys),
    "validation_file": lambda w: w.path is not None
    and (w.path / rr.VALIDATION_DIR / rr.validation_file(0, rr.HELDOUT)).is_file(),
    # the parts of a run-against-its-start key (lfo_cli/report/gain.py): success's and a world's skill's
    "vs_start_key": lambda w: rr.vs_start_key(rr.VAL, rr.MEAN_DIFF, skill=rr.FIRST_CALL_RIGHT) in w.keys,
    "START_SUCCESS": lambda w: rr.vs_start_key(rr.VAL, rr.START_SUCCESS) in w.keys,
    "FINAL_SUCCESS": lambda w: rr.vs_start_key(rr.VAL, rr.FINAL_SUCCESS) in w.keys,
    "MEAN_DIFF": lambda w: rr.vs_start_key(rr.VAL, rr.MEAN_DIFF) in w.keys,
    "SUCCESS": lambda w: rr.VAL_SUCCESS in w.keys,
    "metric": lambda w: rr.metric(rr.VAL, rr.FIRST_CALL_RIGHT) in w.keys,  # a skill's curve: val/SKILL
}
# Read by the report, written by something other than a run.
NOT_WRITTEN_BY_A_RUN = {
    "EVALS_DIR": "`lfo transfer-eval` writes RUN/evals/transfer_eval-<parameters>.json after training "
                 "(tests/eval/test_transfer.py runs it)",
    "TRANSFER_EVAL_GLOB": "as above; test_transfer_eval_files_match_the_glob_the_report_reads",
    "TRANSFER_EVAL_STEM": "as above",
    "COMPLETE_MARKER": "a marker a person leaves to count a run without summary.json as complete",
}
# Read by the report, not written by the tiny `lfo train` run below; each is written by another writer here.
NOT_IN_THE_TINY_RUN = {
    "WM_TOKEN_ACC": "world-model examples are phone calls, which a random tiny model rarely makes: the trainer "
                    "on the probe policy's rollouts writes it",
    "GRAD_POLICY_FROM_WM": "logged on probed steps with a world-model loss (phone calls), as above",
    "GRAD_POLICY_FROM_RL": "as above, where some group had reward variance",
    "GRAD_WM_OVER_RL": "as above",
    "WARN_POLICY_DOMINATES": "needs a world-model gradient (phone calls), as above",
    "WARN_WM_DOMINATES": "as above",
    "VAL_FORM_SIZE": "needs a submitted form: validation of the probe policy's episodes writes it",
    "VAL_VS_START_WILCOXON_P": "undefined (left out) without an episode that changed between step 0 and the end",
    "WMIL_CONFIG_FILE": "`lfo wmil train` runs",
    "RUN_METADATA_FILE": "`lfo wmil train` runs (and the warm start)",
    "WMIL_SUCCESS": "`lfo wmil train` runs",
    "WMIL_ENV_STEPS": "`lfo wmil train` runs",
    "WMIL_EVAL": "`lfo wmil train` runs",
    "EVAL_SUCCESS_RATE": "a warm start's own evaluation (its summary.json), read by the report's warm-start "
                         "covariate: summarize_eval writes it",
}


def holds(name: str, value, w: Written) -> bool:
    if name in SPECIAL:
        return SPECIAL[name](w)
    if isinstance(value, tuple):
        return all(holds(name, v, w) for v in value)
    if name.endswith(("_FILE", "_DIR", "_MARKER")):
        return w.path is not None and (w.path / value).exists()
    if name.endswith(("_PREFIX", "_AT")):
        return any(k.startswith(value) for k in w.keys | w.names())
    return value in w.keys


def _train_cmd(root: Path, out: Path) -> list[str]:
    """3 steps of dual_lora_micro on the tiny model: validation at 0, 2 and 3, held-out companies at 0 and 3, the
    world model's gradient probed every step."""
    sets = {"model.name": str(root / "model"), "model.warmstart": "null", "data.dir": str(root / "data"),
            "data.companies": "3", "data.fresh_tasks": "30", "lora.r": "4", "lora.alpha": "8", "wm.coef": "0.5",
            "wm.grad_probe_every": "1", "eval.every": "2", "eval.num_tasks": "2", "eval.samples_per_task": "2",
            "eval.difficulties": "[1,2]", "eval.heldout_tasks": "2", "eval.fresh_tasks": "30",
            "trainer.max_steps": "3", "trainer.save_steps": "1", "trainer.max_completion_length": "24",
            "trainer.per_device_train_batch_size": "4", "trainer.num_generations": "2", "trainer.logging_steps": "1"}
    cmd = [sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro", "--out", str(out)]
    return cmd + [arg for k, v in sets.items() for arg in ("--set", f"{k}={v}")]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Written]:
    """The tiny training run first, then the writers of what it cannot write."""
    from golden_runs import run_case
    from tiny import lfo_here, tiny_world_and_model

    from lfo_cli.env import generate_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.models.agent_eval import summarize_eval
    from lfo_cli.models.trajectories import collect_trajectories
    from lfo_cli.train.run_metrics import validation_metrics, vs_start
    from lfo_cli.wmil.config import WMILConfig
    from lfo_cli.wmil.trainer import train as wmil_train

    root = tiny_world_and_model(tmp_path_factory.mktemp("run_record"))
    world = generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5)  # its data/
    done = lfo_here(_train_cmd(root, root / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    out = [_run_dir("lfo train (tiny model)", root / "run")]

    # The trainer itself on the probe policy's rollouts (phone calls, so world-model examples): what it logs.
    rows = run_case("stacked", "joint", root / "stacked")
    out.append(Written("the trainer on the probe policy's rollouts", {k for row in rows for k in row}))

    # Validation of episodes with forms, at exception departments: the probe policy's.
    trajectories = collect_trajectories(CustomerServiceWorld(world), world.tasks["val"], policy="probe", seed=0)
    episodes = [{"task_id": t["task_id"], "difficulty": t["difficulty"], "success": bool(t["info"]["success"]),
                 "turns": t["info"]["turns"], **{k: t["info"][k] for k in CustomerServiceWorld.episode_fields if k in t["info"]}}
                for t in trajectories]
    out.append(Written("validation of the probe policy's episodes",
                       set(validation_metrics({"episodes": episodes, "turns": []}, world=CustomerServiceWorld(world)))))
    # A warm start's own evaluation of those episodes: what its summary.json holds.
    out.append(Written("a warm start's evaluation (summarize_eval)",
                       set(summarize_eval({"episodes": episodes, "turns": []}))))

    # Final vs step 0 where some episodes changed.
    run = root / "vs_start"
    (run / rr.VALIDATION_DIR).mkdir(parents=True)
    for step, outcomes in ((0, [0, 1, 0, 0]), (2, [1, 1, 1, 0])):
        (run / rr.VALIDATION_DIR / rr.validation_file(step)).write_text(json.dumps(
            {rr.VALIDATION_OUTCOMES: [[f"t{i}", o] for i, o in enumerate(outcomes)]}))
    out.append(Written("vs_start with changed episodes", set(vs_start(run, 2))))

    wmil_train(WMILConfig(steps=4, log_every=2, save_every=4, num_envs=8, eval_episodes=8), root / "wmil",
               progress=False, quiet=True)
    out.append(_run_dir("lfo wmil train", root / "wmil"))
    return out


@pytest.mark.slow
def test_every_key_the_report_reads_is_one_a_run_writes(written):
    tiny, *others = written
    reads = {k: v for k, v in {**report_reads(), **world_reads()}.items() if k not in NOT_WRITTEN_BY_A_RUN}
    missing = {k: v for k, v in reads.items() if not holds(k, v, tiny)}
    unlisted = sorted(set(missing) - set(NOT_IN_THE_TINY_RUN))
    assert not unlisted, f"the report reads these, the tiny training run did not write them: {unlisted}"
    nowhere = sorted(k for k, v in missing.items() if not any(holds(k, v, w) for w in others))
    assert not nowhere, f"the report reads these, and nothing here writes them: {nowhere}"
    assert set(NOT_IN_THE_TINY_RUN) | set(NOT_WRITTEN_BY_A_RUN) <= set(report_reads()) | set(world_reads())  # none stale


def test_run_seconds_counts_each_step_and_evaluation_once():
    from lfo_cli.run_record import run_seconds

    rows = [{"step": 0, "eval_seconds": 10.0},
            {"step": 1, "step_time": 2.0}, {"step": 2, "step_time": 3.0},
            {"step": 2, "step_time": 4.0},  # logged again after a resume from checkpoint-1: the last value counts
            {"step": 4, "step_time": 1.5},  # logging_steps 2: the mean of steps 3 and 4, for both
            {"step": 4, "eval_seconds": 5.0, "val/success": 0.5}, {"step": 5, "loss": 0.1}]
    assert run_seconds(rows) == 2.0 + 4.0 + 2 * 1.5 + 10.0 + 5.0
    assert run_seconds([]) == 0.0 and run_seconds([{"step": 3, "step_time": float("nan")}]) == 0.0
