"""Your own :class:`~lfo_cli.train.trainer.DualLoRAGRPOTrainer` (your model, dataset, reward functions and
environment factory) in an lfo run dir: the config recorded once, a row per log in ``metrics.jsonl``, a resume
from the last complete checkpoint after a kill, and a finished run never modified. ``args.output_dir`` is the
run dir::

    from lfo_cli.api import DualLoRAConfig, TrainerRun

    run = TrainerRun(DualLoRAConfig(output_dir="runs/mine", max_steps=50, save_steps=10, wm=settings))
    trainer = run.trainer(model=model, processing_class=tokenizer, reward_funcs=reward,
                          train_dataset=dataset, environment_factory=MyEnv)
    summary = run.train(trainer)   # run the same script again after a kill: it resumes

The run dir (names in :mod:`lfo_cli.run_record`)::

    run.json                 the config (DualLoRAConfig.to_dict, the wm section included), seed, versions, commit
    metrics.jsonl            one row per log: step, losses/..., wm/..., grad_norm/...
    checkpoint-N/            the Trainer's checkpoints (both adapters, optimizer, scheduler, RNG)
    adapter_model.safetensors, world_model/   the final adapters, as `lfo train` writes them
    summary.json             status, steps, where it resumed from, the run's seconds: written last

A second invocation on the same dir resumes it only with the same config (a changed value is one error naming
it); a complete run, and a dir that holds another kind of run, are refused. Unlike a recipe's
:class:`~lfo_cli.train.run.Run`, nothing here knows a world, a warm start or a validation set: those are your
script's. Every process decides to resume from what it sees in the run dir: on several machines, it must be a
shared filesystem (as for `lfo train`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, iter_jsonl, read_json, run_metadata
from lfo_cli.train.adapters import POLICY, save_adapters
from lfo_cli.train.callbacks import RunLog, TasksSeen
from lfo_cli.train.checkpoints import resume_point
from lfo_cli.train.config import DualLoRAConfig
from lfo_cli.train.run_metrics import trends
from lfo_cli.train.trainer import DualLoRAGRPOTrainer

KIND = "trainer"  # run.json's kind for these runs (a recipe's run records its recipe kind)
# Config keys a resume does not compare: where this invocation writes, and what TrainingArguments derives from the
# environment (logger level, installed trackers, the launcher's rank) or from the number of processes.
NOT_COMPARED = frozenset({"output_dir", "logging_dir", "disable_tqdm", "report_to", "local_rank",
                          "generation_batch_size", "steps_per_generation"})


def _recorded(args: DualLoRAConfig) -> dict[str, Any]:
    """The config as run.json records it (JSON's types: what a later invocation compares against)."""
    import json

    return json.loads(json.dumps(args.to_dict(), default=str))


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested sections as dotted keys (``wm.coef``), so a changed value is named by its own key."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class TrainerRun:
    """A run dir for a :class:`DualLoRAGRPOTrainer` you build (``args.output_dir`` is the dir)."""

    def __init__(self, args: DualLoRAConfig):
        if not isinstance(args, DualLoRAConfig):
            raise LfoError(f"TrainerRun needs a DualLoRAConfig, got {type(args).__name__}")
        self.args = args
        self.run_dir = Path(args.output_dir)
        self.config = _recorded(args)
        self.resume = (self.run_dir / rr.RUN_FILE).is_file()
        if rr.is_complete(self.run_dir):
            raise LfoError(f"{self.run_dir} holds a complete run; a finished run is never modified: "
                           "set another output_dir")
        if self.resume:
            recorded = read_json(self.run_dir / rr.RUN_FILE)
            if recorded.get("kind") != KIND:
                raise LfoError(f"{self.run_dir} holds a {recorded.get('kind') or 'another'} run, not one of TrainerRun's: "
                               "set another output_dir")
            self._check_same_config(recorded.get(rr.RUN_CONFIG) or {})

    def _check_same_config(self, before: dict) -> None:
        before, now = _flat(before), _flat(self.config)
        keys = sorted(k for k in set(before) | set(now) if k.split(".")[0] not in NOT_COMPARED)
        changed = [k for k in keys if before.get(k) != now.get(k)]
        if changed:
            k = changed[0]
            raise LfoError(f"{self.run_dir} holds a run with {k}={before.get(k)!r}, this config has "
                           f"{now.get(k)!r}{f' (and {len(changed) - 1} more)' if len(changed) > 1 else ''}: "
                           "a resume keeps the run's config; set another output_dir for a new run")

    def trainer(self, **kwargs) -> Any:
        """``DualLoRAGRPOTrainer(args=self.args, **kwargs)`` with the run's metrics log among its callbacks."""
        log = RunLog(self.run_dir)
        trainer = DualLoRAGRPOTrainer(args=self.args, callbacks=[log, *(kwargs.pop("callbacks", None) or [])], **kwargs)
        log.tasks_seen = TasksSeen(trainer.args, trainer.accelerator.num_processes)
        return trainer

    def train(self, trainer) -> dict:
        """Train to ``args.max_steps`` (from the last complete checkpoint when the dir holds the run), save both
        adapters and write ``summary.json`` last; the summary (on the main process; other ranks get their status)."""
        if trainer.args is not self.args or not any(isinstance(c, RunLog) for c in trainer.callback_handler.callbacks):
            raise LfoError("train() takes the trainer built by this run's trainer() (its args and its metrics log)")
        if rr.is_complete(self.run_dir):
            raise LfoError(f"{self.run_dir} holds a complete run; a finished run is never modified: "
                           "set another output_dir")
        main = trainer.is_world_process_zero()
        checkpoint = resume_point(self.run_dir, main) if self.resume else None
        if not self.resume and main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.run_dir / rr.RUN_FILE, {**run_metadata(seed=self.args.seed, config=self.config),
                                                           "kind": KIND})
        self.resume = True  # from here on the dir holds this run
        started = time.time()
        trainer.train(resume_from_checkpoint=checkpoint)
        if not main:
            return {rr.STATUS: rr.STATUS_COMPLETE, "rank": trainer.args.process_index}
        if hasattr(trainer.model, "peft_config") and POLICY in trainer.model.peft_config:
            save_adapters(trainer.model, self.run_dir)
        summary = {
            rr.STATUS: rr.STATUS_COMPLETE,
            "steps": trainer.state.global_step,
            "seconds": round(time.time() - started, 1),  # this invocation's; run_seconds: the whole run's
            "resumed_from": checkpoint,
            rr.RUN_SECONDS: rr.run_seconds(list(iter_jsonl(self.run_dir / rr.METRICS_FILE))),
            **trends(self.run_dir),
        }
        atomic_write_json(self.run_dir / rr.SUMMARY_FILE, summary)  # last: a run with summary.json is complete
        return summary
