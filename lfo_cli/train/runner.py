"""`lfo train` for `kind: grpo`: world + base model + two adapters + DualLoRAGRPOTrainer, in a run dir.

Run dir layout::

    recipe.yaml  run.json            resolved recipe, metadata (written by the CLI before we start)
    metrics.jsonl                    one row per log line: step, tasks_seen, losses/..., grad_norm/..., val/...
    checkpoint-N/                    Trainer checkpoints (both adapters, optimizer, scheduler, RNG) for --resume
    adapter_config.json, adapter_model.safetensors   final policy adapter (PeftModel.from_pretrained(base, RUN))
    world_model/                     final world-model adapter (PeftModel.from_pretrained(base, RUN/world_model))
    trajectories/step_N.jsonl        sample validation trajectories
    summary.json                     status, final metrics
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from lfo_cli.errors import LfoError
from lfo_cli.io import append_jsonl, atomic_write_json, atomic_write_jsonl, iter_jsonl
from lfo_cli.train.recipe_config import TrainConfig


def prompts_per_step(args, num_processes: int) -> int:
    """Tasks (prompts) consumed by one optimizer step: the x-axis unit of the sample-efficiency claim."""
    completions = args.per_device_train_batch_size * args.gradient_accumulation_steps * num_processes
    return completions // args.num_generations


class RunLog(TrainerCallback):
    """Append every Trainer log line to metrics.jsonl with `step` and `tasks_seen` (main process only)."""

    def __init__(self, run_dir: Path, tasks_per_step: int):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tasks_per_step = tasks_per_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            row = {"step": state.global_step, "tasks_seen": state.global_step * self.tasks_per_step}
            row.update({k: v for k, v in logs.items() if isinstance(v, (int, float)) and v == v})
            append_jsonl(self.path, row)


class Validation(TrainerCallback):
    """Validation success on the same val tasks and sampling seeds every `every` steps (and at step 0)."""

    def __init__(self, run_dir: Path, world, tasks: list, tokenizer, every: int, temperature: float,
                 seed: int, tasks_per_step: int, save_every: int, max_turns: int):
        self.run_dir, self.world, self.tasks, self.tokenizer = Path(run_dir), world, tasks, tokenizer
        self.every, self.temperature, self.seed = every, temperature, seed
        self.tasks_per_step, self.save_every, self.max_turns = tasks_per_step, save_every, max_turns
        self.last: dict[str, float] = {}

    def evaluate(self, model, step: int) -> dict[str, float]:
        from lfo_cli.models.warmstart import evaluate_agent
        from lfo_cli.train.adapters import POLICY, activate

        activate(model, POLICY)
        was_training = model.training
        result = evaluate_agent(model, self.tokenizer, self.world, self.tasks, temperature=self.temperature,
                                max_turns=self.max_turns, seed=self.seed)
        if was_training:
            model.train()
        row = validation_metrics(result)
        self.last = row
        append_jsonl(self.run_dir / "metrics.jsonl", {"step": step, "tasks_seen": step * self.tasks_per_step, **row})
        if self.save_every and step % self.save_every == 0:
            atomic_write_jsonl(self.run_dir / "trajectories" / f"step_{step}.jsonl", result["samples"])
        return row

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.every and state.is_world_process_zero and state.global_step == 0:
            self.evaluate(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every and state.is_world_process_zero and state.global_step % self.every == 0:
            self.evaluate(model, state.global_step)


def validation_metrics(result: dict[str, Any]) -> dict[str, float]:
    """`val/...` metrics from an evaluate_agent result (success overall and by difficulty, behaviour)."""
    episodes, turns = result["episodes"], result["turns"]
    row: dict[str, float] = {}
    if episodes:
        row["val/success"] = sum(e["success"] for e in episodes) / len(episodes)
        row["val/turns"] = sum(e["turns"] for e in episodes) / len(episodes)
        for d in sorted({e["difficulty"] for e in episodes}):
            sub = [e for e in episodes if e["difficulty"] == d]
            row[f"val/success/d{d}"] = sum(e["success"] for e in sub) / len(sub)
    from lfo_cli.models.warmstart import summarize_eval

    summary = summarize_eval(result)  # the warm start's definitions, so both evaluations read alike
    if any(not t.get("final_reply") for t in turns):  # "Done." is not a call
        row["val/valid_tool_call_rate"] = summary["eval/valid_tool_call_rate"]
    if "eval/first_call/right_department" in summary:  # the department decision, apart from copying
        row["val/first_call_right"] = summary["eval/first_call/right_department"]
    for key, name in (("auth_before_first_call", "val/auth_before_call"), ("department_order_correct", "val/order_correct"),
                      ("phone_calls", "val/calls_per_task"), ("forms_submitted", "val/forms"),
                      ("invalid_tool_calls", "val/invalid_calls")):
        values = [float(e[key]) for e in episodes if key in e]
        if values:
            row[name] = sum(values) / len(values)
    return row


def _truncate_metrics_after(run_dir: Path, step: int) -> None:
    """On resume from checkpoint-N, drop rows logged after N so the resumed log has no duplicates."""
    path = Path(run_dir) / "metrics.jsonl"
    if path.is_file():
        atomic_write_jsonl(path, [r for r in iter_jsonl(path) if int(r.get("step", 0)) <= step])


def save_adapters(model, run_dir: Path) -> None:
    """Policy adapter at the run-dir root, world model in world_model/ (each loads with PeftModel.from_pretrained)."""
    from lfo_cli.io import atomic_dir
    from lfo_cli.train.adapters import POLICY, WORLD_MODEL

    run_dir = Path(run_dir)
    with atomic_dir(run_dir / ".adapters") as tmp:
        model.save_pretrained(tmp)  # PEFT writes tmp/policy/ and tmp/world_model/ (non-default names)
    staged = run_dir / ".adapters"
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (staged / POLICY / name).replace(run_dir / name)
    if (staged / WORLD_MODEL).is_dir():
        if (run_dir / WORLD_MODEL).exists():
            shutil.rmtree(run_dir / WORLD_MODEL)
        (staged / WORLD_MODEL).replace(run_dir / WORLD_MODEL)
    shutil.rmtree(staged)


def training_tasks(world, data, seed: int) -> list:
    """The RL training tasks: the world's train split, or ``data.fresh_tasks`` newly drawn ones (then
    registered in ``world`` so the environment resolves their ids), filtered by difficulty, capped."""
    from lfo_cli.env.world import fresh_training_tasks

    pool = world.tasks["train"]
    if data.fresh_tasks:
        # New tasks on the training companies: the warm start never saw them, so train reward measures
        # the skill (reading the directory, copying values), not recall of imitated episodes.
        pool = fresh_training_tasks(world, data.fresh_tasks, seed=seed, split="rl")
        world.register_tasks(pool)
    tasks = [t for t in pool if data.min_difficulty <= t.difficulty <= data.max_difficulty]
    if not tasks:
        raise LfoError(f"no training tasks at difficulty {data.min_difficulty}..{data.max_difficulty}")
    return tasks[: data.max_tasks] if data.max_tasks else tasks


def run_training(cfg: TrainConfig, out_dir: Path, *, resume: bool = False) -> dict:
    import torch
    from datasets import Dataset
    from transformers import set_seed
    from transformers.trainer_utils import get_last_checkpoint

    from lfo_cli.env import load_world, make_env_factory
    from lfo_cli.models.prompts import dataset_row
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.warmstart import stratified_tasks
    from lfo_cli.train.adapters import attach_dual_lora
    from lfo_cli.train.trainer import DualLoRAGRPOTrainer

    out_dir = Path(out_dir)
    set_seed(cfg.seed)
    torch.set_num_threads(max(torch.get_num_threads(), 1))

    args = cfg.grpo_args(str(out_dir))  # hardware-dependent checks (bf16 on CPU, ...) before any expensive work
    world = load_world(cfg.data.dir)
    tasks = training_tasks(world, cfg.data, cfg.seed)
    base = cfg.model.name
    if cfg.model.warmstart:
        from lfo_cli.models.warmstart import ensure_warmstart

        base = str(ensure_warmstart(cfg.model.warmstart, data_dir=cfg.data.dir))
    model, tokenizer = load_model(base, dtype=cfg.model.dtype)
    model = attach_dual_lora(model, cfg.lora, with_world_model=cfg.wm.coupling != "shared")

    dataset = Dataset.from_list([dataset_row(t.task_id, difficulty=t.difficulty) for t in tasks])
    val_tasks = stratified_tasks(world.tasks["val"], cfg.eval.num_tasks)
    callbacks = [
        RunLog(out_dir, 0),
        Validation(out_dir, world, val_tasks, tokenizer, cfg.eval.every, cfg.eval.temperature, cfg.seed,
                   0, cfg.eval.save_trajectories_every, args.max_tool_calling_iterations),
    ]
    trainer = DualLoRAGRPOTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
        environment_factory=make_env_factory(world, seed=cfg.seed, max_turns=args.max_tool_calling_iterations,
                                             **dataclasses.asdict(cfg.env)),
        callbacks=callbacks,
    )
    per_step = prompts_per_step(args, trainer.accelerator.num_processes)
    for callback in callbacks:
        callback.tasks_per_step = per_step
    checkpoint = get_last_checkpoint(str(out_dir)) if resume else None
    if resume and trainer.is_world_process_zero():
        # Continue from checkpoint-N: drop rows logged after N. No checkpoint yet: the run starts over.
        _truncate_metrics_after(out_dir, int(Path(checkpoint).name.split("-")[-1]) if checkpoint else -1)
    started = time.time()
    trainer.train(resume_from_checkpoint=checkpoint)
    if not trainer.is_world_process_zero():  # other ranks: the main process writes the run's outputs
        return {"status": "complete", "rank": trainer.args.process_index}
    save_adapters(trainer.model, out_dir)
    summary = {
        "status": "complete",
        "steps": trainer.state.global_step,
        "tasks_seen": trainer.state.global_step * per_step,
        "base_model": base,
        "seconds": round(time.time() - started, 1),
        "resumed_from": checkpoint,
        **{k: v for k, v in callbacks[1].last.items()},
    }
    summary["figures"] = write_run_figures(out_dir)
    atomic_write_json(out_dir / "summary.json", summary)
    return summary


FIGURE_METRICS = (
    ("val/success", "validation success"),
    ("losses/policy", "policy loss"),
    ("losses/wm", "world-model loss"),
    ("wm/token_acc", "world-model token accuracy"),
    ("grad_norm/policy", "grad norm: policy adapter"),
    ("grad_norm/wm", "grad norm: world-model adapter"),
)


def write_run_figures(run_dir: Path) -> list[str]:
    """The run's own curves vs tasks seen: `curves.csv` (the data) and `curves.png`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    df = pd.DataFrame(list(iter_jsonl(path)))
    present = [(k, t) for k, t in FIGURE_METRICS if k in df.columns and df[k].notna().any()]
    if not present:
        return []
    cols = ["step", "tasks_seen"] + [k for k, _ in present]
    table = df[cols].groupby(["step", "tasks_seen"], as_index=False).last().sort_values("step")
    from lfo_cli.io import atomic_write_text

    atomic_write_text(Path(run_dir) / "curves.csv", table.to_csv(index=False, float_format="%.6g"))
    fig, axes = plt.subplots(1, len(present), figsize=(3.2 * len(present), 2.8), squeeze=False)
    for ax, (key, title) in zip(axes[0], present, strict=True):
        sub = table[["tasks_seen", key]].dropna()
        ax.plot(sub["tasks_seen"], sub[key], marker="." if len(sub) < 30 else None)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("tasks seen", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    tmp = Path(run_dir) / ".curves.png.tmp"
    fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    tmp.replace(Path(run_dir) / "curves.png")
    return ["curves.csv", "curves.png"]
