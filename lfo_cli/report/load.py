"""Find run dirs, read them, and group them into conditions.

Two kinds of run dir are read (the formats are owned by their writers; see docs/report.md):

- **training** (``lfo train``, kind ``grpo``): ``run.json`` + ``recipe.yaml`` (resolved recipe) +
  ``metrics.jsonl`` (rows with ``step``, ``tasks_seen`` and prefixed metrics) + ``summary.json``
  (``status``) and optionally ``transfer_eval*.json``; where none covers the world's held-out split, the run's
  own last held-out evaluation (``heldout/success``, ``eval.heldout_tasks``) stands for transfer;
- **WMIL** (``lfo wmil train``, or ``lfo train`` with a ``kind: wmil`` recipe): ``config.json`` (with ``task``) +
  ``metrics.jsonl`` (``step``, ``charts/success``, ``charts/env_steps``, ...) + ``summary.json``.

A run's *condition* is its resolved config minus its RNG seed and pure bookkeeping keys (logging and
checkpoint intervals). Runs with equal conditions are seeds of one condition; a condition is named
by the keys that vary across the runs being reported (``wm.coef=0.5, lora.r=32``). For training runs
``wm.coef == 0`` is the baseline, and the world-model-only keys (predict, coupling, lr, lengths) are
blanked for it, so baselines from different grids pool.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import iter_jsonl, read_json
from lfo_cli.recipes import KINDS
from lfo_cli.worlds import DEFAULT_KIND

# keys that never define a condition (bookkeeping), per kind
IGNORED = {
    "grpo": {"seed", "wm.grad_probe_every", "trainer.logging_steps", "trainer.save_steps", "trainer.save_total_limit",
             "trainer.dataloader_num_workers", "eval.save_trajectories_every", "kind",
             "wm.stop_without_targets"},  # a guard that stops a run, never a setting of its result
    "wmil": {"seed", "log_every", "save_every", "threads", "parent_timeout", "parent_max_retries"},
}
# Options added after runs were recorded, with the value those runs had (the recipe kinds' table): a run without
# the key counts as having this value, so it pools with new runs of the same condition.
LATER_DEFAULTS = {"env.kind": DEFAULT_KIND, **KINDS["grpo"].added_later}
# world-model keys that mean nothing when wm.coef == 0 (blanked so baselines pool)
WM_ONLY = ("wm.predict", "wm.coupling", "wm.normalize", "wm.learning_rate", "wm.max_length", "wm.max_examples",
           "wm.targets", "wm.tools")
BLANK = "-"


@dataclass
class Run:
    path: Path
    kind: str  # grpo | wmil | other kinds (kept in the tidy table only)
    seed: int | None
    config: dict[str, Any]  # flattened, dotted keys
    status: str  # complete | incomplete (no summary.json with status complete)
    rows: list[dict]  # metrics.jsonl rows (deduplicated: last row per step and key wins)
    summary: dict = field(default_factory=dict)
    transfer: dict[str, dict] = field(default_factory=dict)  # split -> {"success": x, "n": n}
    commit: str | None = None  # run.json's git_commit: the code the run trained with
    condition: str = ""  # assigned by assign_conditions
    role: str = ""  # grpo: baseline | dual
    arm: str | None = None  # a declared plan's arm (plan.yaml beside the runs): then the condition's name
    reference: bool = False  # the plan's reference arm: listed first, the baseline every arm is compared with

    @property
    def name(self) -> str:
        return str(self.path)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, (list, tuple)):
        out[prefix] = json.dumps(list(obj), sort_keys=True)
    else:
        out[prefix] = obj
    return out


def _is_run_dir(p: Path) -> bool:
    return (p / rr.METRICS_FILE).is_file() and any((p / f).is_file()
                                                   for f in (rr.RUN_FILE, rr.WMIL_CONFIG_FILE, rr.RECIPE_FILE))


def discover(paths: list[Path]) -> list[Path]:
    """Run dirs among ``paths`` (each a run dir or a parent scanned recursively), sorted, unique."""
    found: set[Path] = set()
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise LfoError(f"{p}: no such file or directory")
        if not p.is_dir():
            raise LfoError(f"{p}: not a directory (give run dirs or folders that contain them)")
        if _is_run_dir(p):
            found.add(p)
            continue
        for m in p.rglob(rr.METRICS_FILE):
            d = m.parent
            rel = d.relative_to(p).parts
            if any(part.startswith(".") or part.startswith(rr.CHECKPOINT_PREFIX) for part in rel):
                continue
            if _is_run_dir(d):
                found.add(d)
    return sorted(found, key=lambda q: str(q))


def _dedupe(rows: list[dict]) -> list[dict]:
    """Merge rows per step in file order (later values win): a resumed run's re-logged steps count once."""
    by_step: dict[Any, dict] = {}
    out_rows: list[dict] = []
    for row in rows:
        if rr.STEP not in row:
            continue
        step = row[rr.STEP]
        if step not in by_step:
            by_step[step] = {}
            out_rows.append(by_step[step])
        by_step[step].update({k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                              and math.isfinite(v)})
    return sorted(out_rows, key=lambda r: r[rr.STEP])


def _transfer_files(path: Path) -> dict[str, dict]:
    """``transfer_eval*.json`` in the run dir or its ``evals/`` (`lfo transfer-eval` names each file by its
    parameters): ``{"splits": {name: {"success", "n"}}}`` or ``{"split", "success"|"overall"}``. Per split, the
    evaluation with the most episodes is used (ties: the last file by name)."""
    out: dict[str, dict] = {}
    for f in sorted([*path.glob(rr.TRANSFER_EVAL_GLOB), *(path / rr.EVALS_DIR).glob(rr.TRANSFER_EVAL_GLOB)],
                    key=lambda p: p.name):
        data = read_json(f)
        entries = []
        if isinstance(data, dict) and isinstance(data.get("splits"), dict):
            entries = list(data["splits"].items())
        elif isinstance(data, dict) and "split" in data:
            entries = [(data["split"], data)]
        for split, body in entries:
            if not isinstance(body, dict):
                continue
            src = body.get("overall") if isinstance(body.get("overall"), dict) else body
            if isinstance(src.get("success"), (int, float)):
                n = src.get("n") if isinstance(src.get("n"), int) else None
                if (n or 0) >= (out.get(str(split), {}).get("n") or 0):
                    out[str(split)] = {"success": float(src["success"]), "n": n, "file": f.name}
    return out


def validation_episodes(path: Path, step: int, prefix: str = rr.VAL) -> list[dict] | None:
    """The per-episode records of one evaluation, ``validation/[heldout_]step_N.json`` or its ``.gz`` (a
    snapshot's, ``scripts/snapshot_runs.py``); None when missing or unreadable."""
    import gzip

    plain = rr.validation_file(step, prefix)
    for name in (f"{plain}.gz", plain):
        f = Path(path) / rr.VALIDATION_DIR / name
        if f.is_file():
            try:
                with (gzip.open if name.endswith(".gz") else open)(f, "rt", encoding="utf-8") as fh:
                    data = json.load(fh)
            except (OSError, ValueError, EOFError):
                return None
            episodes = data.get(rr.VALIDATION_EPISODES) if isinstance(data, dict) else None
            return episodes if isinstance(episodes, list) and all(isinstance(e, dict) for e in episodes) else None
    return None


def _inrun_heldout(path: Path, rows: list[dict]) -> dict[str, dict]:
    """The run's last evaluation on the world's held-out tasks (``heldout/...`` rows; the callback plays them at
    step 0 and at the end) as the ``transfer`` split, and ``transfer/dK`` per difficulty: tasks training
    never drew from, so it is transfer, measured inside the run. Episodes are counted from
    ``validation/heldout_step_N.json[.gz]`` (provenance only: an unreadable file leaves them unknown)."""
    held = [r for r in rows if isinstance(r.get(rr.HELDOUT_SUCCESS), (int, float))]
    if not held:
        return {}
    last = held[-1]
    step = int(last[rr.STEP])
    episodes = validation_episodes(path, step, rr.HELDOUT)
    source = f"{rr.METRICS_FILE} step {step} (in-run held-out)"
    out = {"transfer": {"success": float(last[rr.HELDOUT_SUCCESS]), "source": "in-run", "file": source,
                        "n": len(episodes) if episodes is not None else None}}
    for key, value in last.items():
        if key.startswith(rr.HELDOUT_SUCCESS_AT) and isinstance(value, (int, float)):
            d = key.rsplit("/", 1)[-1]
            n = sum(1 for e in episodes if f"d{e.get('difficulty')}" == d) if episodes is not None else None
            out[f"transfer/{d}"] = {"success": float(value), "source": "in-run", "file": source, "n": n}
    return out


def read_run(path: Path) -> Run:
    path = Path(path)
    rows = _dedupe(list(iter_jsonl(path / rr.METRICS_FILE)))
    summary = read_json(path / rr.SUMMARY_FILE) if (path / rr.SUMMARY_FILE).is_file() else {}
    if not isinstance(summary, dict):
        summary = {}
    meta = read_json(path / rr.RUN_FILE) if (path / rr.RUN_FILE).is_file() else {}
    if not isinstance(meta, dict):
        raise LfoError(f"{path}/{rr.RUN_FILE}: corrupt (not a JSON object)")
    # a WMIL run: `lfo wmil train`'s (no run.json), or `lfo train --recipe wmil/...`'s (run.json says its kind)
    if (path / rr.WMIL_CONFIG_FILE).is_file() and (not meta or meta.get("kind") == "wmil"):
        cfg = read_json(path / rr.WMIL_CONFIG_FILE)
        if not isinstance(cfg, dict) or "task" not in cfg:
            raise LfoError(f"{path}/{rr.WMIL_CONFIG_FILE}: not a WMIL config (no 'task')")
        status = "complete" if summary else "incomplete"
        wmil_meta = read_json(path / rr.RUN_METADATA_FILE) if (path / rr.RUN_METADATA_FILE).is_file() else {}
        return Run(path, "wmil", cfg.get("seed"), flatten(cfg), status, rows, summary, commit=_commit(wmil_meta))
    cfg: Any = None
    if (path / rr.RECIPE_FILE).is_file():
        try:
            cfg = yaml.safe_load((path / rr.RECIPE_FILE).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise LfoError(f"{path}/{rr.RECIPE_FILE}: corrupt ({exc})") from None
    if not isinstance(cfg, dict):
        cfg = meta.get(rr.RUN_CONFIG) if isinstance(meta.get(rr.RUN_CONFIG), dict) else {}
    kind = str(cfg.get("kind") or meta.get("kind") or "unknown")
    complete = summary.get(rr.STATUS) == rr.STATUS_COMPLETE or (path / rr.COMPLETE_MARKER).exists()
    status = "complete" if complete else "incomplete"
    seed = cfg.get("seed", meta.get("seed"))
    transfer = _transfer_files(path)
    if "transfer" not in transfer:
        transfer.update(_inrun_heldout(path, rows))
    return Run(path, kind, seed, flatten(cfg), status, rows, summary, transfer, _commit(meta))


def _commit(meta: Any) -> str | None:
    """The git commit a run's metadata records (run.json for training, run_metadata.json for WMIL)."""
    value = meta.get(rr.GIT_COMMIT) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def load_runs(paths: list[Path]) -> tuple[list[Run], list[tuple[str, str]]]:
    """(runs, skipped) — a run dir that cannot be read is skipped with its reason, not fatal."""
    runs, skipped = [], []
    for d in discover(paths):
        try:
            runs.append(read_run(d))
        except LfoError as exc:
            skipped.append((str(d), str(exc)))
    return runs, skipped


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 1e15 else str(v)
    return str(v)


def _sort_value(v: Any):
    return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))


def _distinct(cfgs: list[dict], key: str, kind: str) -> int:
    vals = {json.dumps(c.get(key, LATER_DEFAULTS.get(key)), sort_keys=True, default=str) for c in cfgs}
    if kind == "grpo" and key in WM_ONLY:  # blanked for baselines: varies only if the duals differ
        vals.discard(json.dumps(BLANK))
    return len(vals)


def assign_conditions(runs: list[Run], plan: Any = None) -> dict[str, list[str]]:
    """Set ``run.condition``/``run.role``; return {kind: varying keys} (the keys that name conditions).

    With a declared ``plan`` (:class:`lfo_cli.report.plan.Plan`), a training run of one of its arms is named by
    the arm (``positive-control``, not the config values that tell it apart) and the reference arm is listed
    first; roles stay as the world-model weight says (baseline: wm.coef 0)."""
    varying: dict[str, list[str]] = {}
    for kind in sorted({r.kind for r in runs}):
        group = [r for r in runs if r.kind == kind]
        ignored = IGNORED.get(kind, {"seed"})
        cfgs = []
        for r in group:
            c = {k: v for k, v in r.config.items() if k not in ignored}
            if kind == "grpo" and float(c.get(rr.WM_COEF, 0.5) or 0) == 0.0:
                c.update({k: BLANK for k in WM_ONLY if k in c})
            cfgs.append(c)
        keys = sorted({k for c in cfgs for k in c})
        vary = [k for k in keys if _distinct(cfgs, k, kind) > 1]
        if kind == "grpo" and rr.WM_COEF in vary:  # the lambda axis first: it decides the role
            vary = [rr.WM_COEF] + [k for k in vary if k != rr.WM_COEF]
        varying[kind] = vary
        for r, c in zip(group, cfgs, strict=True):
            label = ", ".join(f"{k}={_fmt(c.get(k, LATER_DEFAULTS.get(k)))}" for k in vary)
            if kind == "grpo":
                r.role = "baseline" if float(c.get(rr.WM_COEF, 0.5) or 0) == 0.0 else "dual"
                r.condition = f"{r.role} ({label})" if label else r.role
            else:
                r.condition = label or kind
            r._cond_cfg = c  # type: ignore[attr-defined]
            if plan is not None and kind == "grpo" and (arm := plan.arm_of(r)) is not None:
                r.arm, r.condition, r.reference = arm, arm, arm == plan.reference
    _refuse_copies(runs)
    return varying


def _refuse_copies(runs: list[Run]) -> None:
    """Two runs of one condition with the same seed saw the same tasks in the same order: copies (or a re-run)
    of one run, not two seeds. Counting them as two would shrink every interval; the report refuses."""
    seen: dict[tuple, Run] = {}
    for r in runs:
        if r.seed is None:
            continue
        key = (r.kind, r.condition, json.dumps(r.seed, default=str))
        if key in seen:
            raise LfoError(f"{seen[key].path} and {r.path} are one run twice (condition '{r.condition}', seed {r.seed}): "
                           "copies of one run are not separate seeds; pass one of them")
        seen[key] = r


def condition_order(runs: list[Run], kind: str, varying: list[str]) -> list[str]:
    """Conditions of ``kind`` sorted: a plan's reference arm first, then baselines, then by the varying keys'
    values (numbers numerically)."""
    seen: dict[str, tuple] = {}
    for r in runs:
        if r.kind != kind or r.condition in seen:
            continue
        c = r._cond_cfg  # type: ignore[attr-defined]
        seen[r.condition] = (0 if r.reference else 1, 0 if r.role == "baseline" else 1,
                             *[_sort_value(c.get(k)) for k in varying])
    return sorted(seen, key=lambda name: (seen[name], name))


def condition_values(runs: list[Run], condition: str) -> dict[str, Any]:
    for r in runs:
        if r.condition == condition:
            return dict(r._cond_cfg)  # type: ignore[attr-defined]
    return {}
