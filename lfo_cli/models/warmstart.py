"""Supervised warm start: teach a base model the tool-calling format from environment trajectories.

Why (issue #4): SmolLM2-135M-Instruct made 0 well-formed tool calls in 32 samples at temperature
1.0, and a from-scratch model knows nothing at all; GRPO then sees identical rewards in every group
and its gradient is exactly zero. So before RL the model imitates the environment's ``prior``
reference policy (industry priors + rep feedback, never the hidden requirements) with noise
(random wrong calls, dropped form fields), NOT the oracle: the warm-started agent can call tools
but still has much to learn.

The trajectories are rendered with the same chat template, system prompt and tool schema that GRPO
uses (:mod:`lfo_cli.models.prompts`), tokenized with TRL's generation-tagged twin of the template
and trained with TRL's ``SFTTrainer`` (loss on assistant turns only). ``micro`` is trained whole;
larger models get a LoRA that is merged into the base. Afterwards the model plays the val tasks at
temperature 1.0 and we record the rate of assistant turns that parse as valid tool calls (TRL's own
``parse_response``) and success by difficulty.

``lfo train --recipe warmstart_micro --out runs/ws`` runs it; :func:`ensure_warmstart` returns the
cached warm-started checkpoint (under ``$LFO_HOME/warmstart``), building it if missing.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.console import use_lfo_progress
from lfo_cli.errors import LfoError
from lfo_cli.io import append_jsonl, atomic_dir, atomic_write_json, atomic_write_jsonl, run_metadata
from lfo_cli.models import cache, shipped
from lfo_cli.models import prompts as P
from lfo_cli.models.agent_eval import evaluate_agent, stratified_tasks, summarize_eval
from lfo_cli.models.induction import induction_rows
from lfo_cli.models.registry import load_model
from lfo_cli.models.reply_loss import reply_loss_trainer
from lfo_cli.models.sft_data import collect_sft_trajectories, load_world_for, tokenize_trajectories
from lfo_cli.models.trajectories import collect_trajectories
from lfo_cli.models.warmstart_cache import (
    check_entry,
    register_in_cache,
    resolve_config,
    warmstart_cache_path,
)
from lfo_cli.models.warmstart_config import WarmStartConfig
from lfo_cli.models.warmstart_outputs import print_summary, write_eval_tables
from lfo_cli.progress import ProgressLog, episode_progress
from lfo_cli.recipes import config_to_dict


class TimeGuardTripped(LfoError):
    """The SFT ran past ``train.max_minutes``: the build fails and nothing is cached."""


def _metrics_callback(path: Path, deadline: float | None):
    """metrics.jsonl rows, and the time guard: past ``deadline`` the SFT stops (with a checkpoint for
    ``--resume``) and :func:`run_warmstart` fails instead of saving a model that is not the recipe's."""
    from transformers import TrainerCallback

    class _Cb(TrainerCallback):
        tripped = False

        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                row = {rr.STEP: state.global_step, "epoch": state.epoch}
                for k, v in logs.items():
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        key = k if "/" in k else (f"losses/{k}" if "loss" in k else f"charts/{k}")
                        row[key] = v
                append_jsonl(path, row)

        def on_step_end(self, args, state, control, **kw):
            if deadline is not None and time.time() > deadline and state.global_step < state.max_steps:
                self.tripped = True
                control.should_training_stop = True
                control.should_save = True
            return control

    return _Cb()


def _in_cache(out_dir: Path) -> bool:
    """Is ``out_dir`` a cache build's temporary dir (not a CLI run dir)?"""
    return (cache.lfo_home() / "warmstart").resolve() in Path(out_dir).resolve().parents


def _last_checkpoint(ckpt_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None


def _drop_rows_after(path: Path, step: int) -> None:
    if path.is_file():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        # also the stopped attempt's end-of-training row (train_runtime, ...): the whole build logs one, at its end
        atomic_write_jsonl(path, (r for r in rows if r.get("step", 0) <= step and "charts/train_runtime" not in r))


def run_warmstart(cfg: WarmStartConfig, out_dir: Path, *, resume: bool = False) -> dict:
    """SFT + evaluation. Writes ``model/`` (the base checkpoint RL starts from), ``metrics.jsonl``,
    ``summary.json``, ``eval_by_difficulty.{csv,png}``, ``samples.jsonl``, ``run_metadata.json``."""
    world = load_world_for(cfg)  # first: a missing world is reported before TRL and datasets load
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import set_seed
    from trl import SFTConfig, SFTTrainer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final_dir = out_dir / "model"
    # ---- seeding, in one place ----
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    set_seed(cfg.seed)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    t_start = time.time()
    atomic_write_json(out_dir / rr.RUN_METADATA_FILE, run_metadata(cfg.seed, config_to_dict(cfg)))

    model, tokenizer = load_model(cfg.model.name, dtype=cfg.model.dtype)
    tools = P.tool_schemas(world.tools)

    # ---- data ----
    with ProgressLog("warm start data", None, unit="rollout") as plog:  # the teacher's games: minutes on TextWorld
        trajectories = collect_sft_trajectories(cfg, world, progress=episode_progress(plog))
    weighted = [t for t in trajectories for _ in range(cfg.data.success_weight if t["reward"] >= 1.0 else 1)]
    reply_tools = tuple(cfg.train.reply_loss_tools) if cfg.train.reply_loss_weight > 0 else ()
    rows, dropped = tokenize_trajectories(tokenizer, weighted, tools, cfg.train.max_length, reply_tools=reply_tools)
    if not rows:
        raise LfoError(f"every trajectory is longer than train.max_length={cfg.train.max_length} tokens")
    atomic_write_jsonl(
        out_dir / "sft_trajectories.jsonl",
        ({k: t[k] for k in ("task_id", "difficulty", "policy", "reward", "messages")} for t in trajectories),
    )
    lengths = [len(r["input_ids"]) for r in rows]
    if cfg.data.induction_rows:
        rows += induction_rows(tokenizer, cfg.data.induction_rows, max_len=cfg.data.induction_max_len, seed=cfg.seed)
    if reply_tools:  # every row carries the column (induction rows: no reply)
        rows = [{"reply_masks": [0] * len(r["input_ids"]), **r} for r in rows]
    data_stats = {
        "data/trajectories": len(trajectories),
        "data/sequences": len(lengths),
        "data/induction_rows": cfg.data.induction_rows,
        "data/dropped_too_long": dropped,
        "data/slipped_turns": sum(len(t["info"].get("slipped_steps", ())) for t in trajectories),
        "data/random_turns": sum(len(t["info"].get("random_steps", ())) for t in trajectories),
        "data/untrained_turns": sum(m.get("weight", 1) == 0 for t in trajectories for m in t["messages"]
                                    if m["role"] == "assistant"),
        "data/teacher_success": sum(t["reward"] >= 1.0 for t in trajectories) / len(trajectories),
        "data/probe_share": sum(t["policy"].split("+")[0] == "probe" for t in trajectories) / len(trajectories),
        "data/mean_tokens": float(np.mean(lengths)),
        "data/max_tokens": int(max(lengths)),
        "data/prompt_tokens": len(tokenizer.apply_chat_template(  # a rollout's first prompt: the first train task's
            P.build_messages(world.episode(cfg.eval.max_turns).reset(world.tasks("train")[0]),
                             world.system_prompt or P.SYSTEM_PROMPT),
            tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False)),
    }
    dataset = Dataset.from_list(rows)

    # ---- model: whole (micro) or LoRA (pretrained) ----
    peft_config = None
    if not cfg.model.is_full:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha, lora_dropout=cfg.model.lora_dropout,
            target_modules=list(cfg.model.lora_target_modules), task_type="CAUSAL_LM",
        )

    ckpt_dir = out_dir / "checkpoints"
    deadline = t_start + 60 * cfg.train.max_minutes if cfg.train.max_minutes else None
    args = SFTConfig(
        output_dir=str(ckpt_dir),
        seed=cfg.seed,
        data_seed=cfg.seed,
        num_train_epochs=cfg.train.epochs,
        max_steps=cfg.train.max_steps,
        per_device_train_batch_size=cfg.train.batch_size,
        gradient_accumulation_steps=cfg.train.gradient_accumulation_steps,
        learning_rate=cfg.train.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.train.warmup_ratio,  # a float < 1 is a ratio of the total steps
        weight_decay=cfg.train.weight_decay,
        max_length=cfg.train.max_length,
        assistant_only_loss=False,  # the dataset already carries TRL's assistant_masks
        logging_steps=cfg.train.logging_steps,
        save_steps=cfg.train.save_steps,
        save_total_limit=2,
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=cfg.model.dtype == "bfloat16",
        dataloader_num_workers=0,
        activation_checkpointing=False,  # TRL's SFT default recomputes activations: ~1/3 more compute, no need here
        train_sampling_strategy="group_by_length",  # similar lengths per batch: far less padding on CPU
    )
    guard = _metrics_callback(out_dir / rr.METRICS_FILE, deadline)
    trainer_cls = SFTTrainer
    if reply_tools:  # a world-model warm start: + weight x the replies' cross-entropy (lfo_cli.models.reply_loss)
        trainer_cls = reply_loss_trainer(cfg.train.reply_loss_weight)
    trainer = trainer_cls(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config,
        callbacks=[guard],
    )
    use_lfo_progress(trainer, "warm start SFT")  # a bar on a terminal, plain lines with step/total and ETA in a log
    resume_from = _last_checkpoint(ckpt_dir) if resume else None
    if resume_from:  # rows the killed build logged after its last checkpoint are logged again from it
        _drop_rows_after(out_dir / rr.METRICS_FILE, int(Path(resume_from).name.split("-")[-1]))
    train_out = trainer.train(resume_from_checkpoint=resume_from)
    planned = trainer.state.max_steps
    if guard.tripped:
        raise TimeGuardTripped(
            f"the warm start's SFT passed its time guard train.max_minutes={cfg.train.max_minutes:g} after "
            f"{trainer.state.global_step} of its {planned} steps; nothing was cached (the recipe's steps define "
            f"its model): raise or drop train.max_minutes"
            + (f", or continue with `lfo train --resume {out_dir}`" if not _in_cache(out_dir)
               else f"; the next build continues from step {trainer.state.global_step}"))
    trained = trainer.model
    if peft_config is not None:
        trained = trained.merge_and_unload()
    trained.generation_config.pad_token_id = tokenizer.pad_token_id
    shutil.rmtree(final_dir, ignore_errors=True)
    with atomic_dir(final_dir) as tmp:
        trained.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
    train_stats = {
        rr.TRAIN_STEPS: trainer.state.global_step,
        rr.TRAIN_PLANNED_STEPS: planned,  # what the recipe defines: a cached model has trained all of them
        rr.TRAIN_THREADS: torch.get_num_threads(),
        rr.TRAIN_LOSS: float(train_out.training_loss),
        rr.TRAIN_SECONDS: round(time.time() - t_start, 1),
    }

    # ---- evaluation ----
    summary: dict[str, Any] = {**data_stats, **train_stats}
    if cfg.eval.num_tasks > 0:
        val = world.tasks("val")
        if not val:
            raise LfoError(f"{cfg.data.dir}: the world has no val tasks to evaluate on")
        val = stratified_tasks(val, cfg.eval.num_tasks)
        teacher = collect_trajectories(world, val, policy=cfg.data.policy, seed=cfg.seed + 1, noise=cfg.data.noise,
                                       settings=cfg.data,
                                       rollouts_per_task=cfg.eval.samples_per_task)
        val = [t for t in val for _ in range(cfg.eval.samples_per_task)]  # as `lfo transfer-eval --samples`
        t_eval = time.time()
        with ProgressLog("warm start evaluation", len(val), unit="episode") as plog:
            result = evaluate_agent(
                trained, tokenizer, world, val, temperature=cfg.eval.temperature, max_turns=cfg.eval.max_turns,
                max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size, seed=cfg.seed,
                progress=episode_progress(plog),
            )
        summary.update(summarize_eval(result, teacher, world.episode_categories))
        summary[rr.EVAL_TEMPERATURE] = cfg.eval.temperature
        summary["eval/samples_per_task"] = cfg.eval.samples_per_task
        summary["eval/seconds"] = round(time.time() - t_eval, 1)
        atomic_write_jsonl(out_dir / "eval_episodes.jsonl", result["episodes"])
        atomic_write_jsonl(out_dir / "samples.jsonl", result["samples"])
        write_eval_tables(out_dir, summary)
    summary["total_seconds"] = round(time.time() - t_start, 1)
    summary["model_dir"] = "model"  # relative to the run dir
    atomic_write_json(out_dir / rr.SUMMARY_FILE, summary)
    if not _in_cache(out_dir):
        summary["cache_dir"] = str(register_in_cache(cfg, out_dir) or warmstart_cache_path(cfg))
    print_summary(summary, world.episode_categories)
    if cfg.eval.min_valid_rate is not None and cfg.eval.num_tasks > 0:
        rate = summary[rr.EVAL_VALID_TOOL_CALL_RATE]
        if rate < cfg.eval.min_valid_rate:
            raise LfoError(f"valid tool-call rate {rate:.1%} is below eval.min_valid_rate={cfg.eval.min_valid_rate:.0%}")
    return summary



def ensure_warmstart(
    recipe_name_or_cfg: str | WarmStartConfig, *, data_dir: str | Path | None = None, overrides: list[str] | None = None,
    build: bool = True, force: bool = False,
) -> Path:
    """The warm-started base checkpoint for a recipe (``$LFO_HOME/warmstart/NAME-KEY/model``),
    trained now if not cached (``build=False``: an error instead; ``force``: rebuilt even if cached), or
    installed from the build lfo ships for that key (:mod:`lfo_cli.models.shipped`; not with ``force``).
    ``data_dir`` points the warm start at the trainer's world. A cached entry that is not the recipe's
    model (budget-stopped, foreign) is refused with one line saying how to rebuild it."""
    name, cfg = resolve_config(recipe_name_or_cfg, overrides)
    if data_dir is not None:
        cfg.data.dir = Path(data_dir)
    load_world_for(cfg)  # fail early with the gen-env hint
    path = warmstart_cache_path(cfg)
    recipe = recipe_name_or_cfg if isinstance(recipe_name_or_cfg, str) else None
    if not force:
        shipped.install(path)  # nothing when cached already or not shipped
    if cache.is_complete(path) and not force:
        check_entry(path, name, recipe, overrides)
        return path / "model"
    if not build and not cache.is_complete(path):
        raise LfoError(f"warm start '{name}' is not built yet ({path}); build it once in a plain process first: "
                       + cache.build_command(recipe or "<warm-start recipe>", data_dir=data_dir, overrides=overrides))
    cache.build_once(path, lambda tmp, resumed: {**run_warmstart(cfg, tmp, resume=resumed), "recipe": name,
                                                 "key": path.name}, force=force, resumable=True)
    return path / "model"

