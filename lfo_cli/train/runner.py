"""`lfo train` for `kind: grpo`: world + base model + two adapters + DualLoRAGRPOTrainer, in a run dir.

Run dir layout::

    recipe.yaml  run.json            resolved recipe, metadata (written by the CLI before we start)
    metrics.jsonl                    one row per log line: step, tasks_seen, losses/..., grad_norm/..., val/...
    checkpoint-N/                    Trainer checkpoints (both adapters, optimizer, scheduler, RNG) for --resume
    adapter_config.json, adapter_model.safetensors   final policy adapter (PeftModel.from_pretrained(base, RUN))
    world_model/                     final world-model adapter (PeftModel.from_pretrained(base, RUN/world_model))
    trajectories/step_N.jsonl        sample validation trajectories
    validation/step_N.json           per-episode validation outcomes ([task_id, 0|1], same order every time)
    summary.json                     status, final metrics, final vs step-0 validation (paired), trends

The names of these files and of the metrics are in :mod:`lfo_cli.run_record`.
"""

from __future__ import annotations

import time
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.console import use_lfo_progress
from lfo_cli.io import atomic_write_json, iter_jsonl, read_json
from lfo_cli.models.base_ref import portable_ref
from lfo_cli.models.prompts import SYSTEM_PROMPT, dataset_row
from lfo_cli.models.registry import load_model
from lfo_cli.train.adapters import attach_dual_lora, save_adapters
from lfo_cli.train.callbacks import RunLog, TasksSeen, Validation
from lfo_cli.train.checkpoints import resume_point
from lfo_cli.train.config import DualLoRAConfig
from lfo_cli.train.model_card import model_card, write_model_card
from lfo_cli.train.recipe_config import TrainConfig
from lfo_cli.train.run_figures import write_run_figures
from lfo_cli.train.run_metrics import trends, vs_start
from lfo_cli.train.trainer import DualLoRAGRPOTrainer
from lfo_cli.worlds import load_world


def evaluation_episodes(pools, evaluation) -> tuple[list, list]:
    """The validation and held-out episodes of every evaluation: each task ``samples_per_task`` times (held-out
    ones ``heldout_samples_per_task`` times when set), in order, so an episode's sampling seed is its index."""
    held = evaluation.heldout_samples_per_task or evaluation.samples_per_task
    return ([t for t in pools.validation for _ in range(evaluation.samples_per_task)],
            [t for t in pools.heldout for _ in range(held)])


def run_training(cfg: TrainConfig, out_dir: Path, *, args: DualLoRAConfig, base: str, resume: bool = False) -> dict:
    """Train ``cfg`` into ``out_dir`` with the run's resolved trainer arguments ``args``
    (``cfg.training_args(out_dir)``, built once by the caller) on the base model ``base`` (the
    model's name or path, or its warm start, which the caller builds first). The world-model settings are read
    from ``args.wm``, as the trainer reads them (the recipe's ``wm`` section, the same object)."""
    import torch
    from datasets import Dataset
    from transformers import set_seed

    out_dir = Path(out_dir)
    set_seed(cfg.seed)
    torch.set_num_threads(max(torch.get_num_threads(), 1))

    world = load_world(cfg.env.kind, cfg.data.dir)
    pools = world.task_pools(cfg.data, cfg.eval, cfg.seed)
    tasks = pools.train
    model, tokenizer = load_model(base, dtype=cfg.model.dtype)
    objective = args.wm.objective  # which adapters the run trains
    model = attach_dual_lora(model, cfg.lora, with_world_model=objective.has_adapter)

    # row_seed: each episode's reply RNG depends on its row and generation only, so a resumed run replays
    # exactly what the uninterrupted one would have (CustomerServiceEnv.reset).
    system = world.system_prompt or SYSTEM_PROMPT
    dataset = Dataset.from_list([dataset_row(t.task_id, system, difficulty=t.difficulty, row_seed=i)
                                 for i, t in enumerate(tasks)])
    val_tasks, heldout_tasks = evaluation_episodes(pools, cfg.eval)
    # The world model's semantic accuracy (val/wm_semantic_acc) on the world's probe (World.semantic_probe), for
    # runs that train one. It asks in the world's template, the format of wm.targets=world only.
    wm_probe = world.semantic_probe(pools.validation, seed=cfg.seed) if args.wm.coef > 0 and args.wm.targets == "world" \
        else None
    callbacks = [
        RunLog(out_dir),
        Validation(out_dir, world, val_tasks, tokenizer, cfg.eval.every, cfg.eval.temperature, cfg.seed,
                   cfg.eval.save_trajectories_every, args.max_tool_calling_iterations,
                   heldout=heldout_tasks, heldout_every=cfg.eval.heldout_every,
                   wm_probe=wm_probe, wm_adapters=list(objective.predict_adapters), sampler=args.sampler),
    ]
    trainer = DualLoRAGRPOTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, world=world,
        environment_factory=world.env_factory(seed=cfg.seed, max_turns=args.max_tool_calling_iterations,
                                              options=cfg.env.options()),
        callbacks=callbacks,
    )
    use_lfo_progress(trainer, "GRPO")  # the bar or plain log lines with step/total and ETA; compact metric lines
    tasks_seen = TasksSeen(trainer.args, trainer.accelerator.num_processes)
    for callback in callbacks:
        callback.tasks_seen = tasks_seen
    callbacks[1].handler = trainer.callback_handler
    checkpoint = resume_point(out_dir, main=trainer.is_world_process_zero()) if resume else None
    started = time.time()
    trainer.train(resume_from_checkpoint=checkpoint)
    if not trainer.is_world_process_zero():  # other ranks: the main process writes the run's outputs
        return {rr.STATUS: rr.STATUS_COMPLETE, "rank": trainer.args.process_index}
    save_adapters(trainer.model, out_dir)
    tokenizer.save_pretrained(out_dir)  # the run dir loads without the base's files: AutoTokenizer(RUN)
    base_ref = portable_ref(base, cfg.model.warmstart, cfg.warmstart_overrides())
    summary = {
        rr.STATUS: rr.STATUS_COMPLETE,
        "steps": trainer.state.global_step,
        rr.TASKS_SEEN: tasks_seen(trainer.state.global_step),
        "base_model": base,
        rr.BASE_MODEL_REF: base_ref,  # resolved on the machine that loads the run (models/base_ref.py)
        "seconds": round(time.time() - started, 1),  # this invocation's training; run_seconds: the whole run's
        "resumed_from": checkpoint,
        **{k: v for k, v in callbacks[1].last.items() if k != rr.EVAL_SECONDS},
        rr.RUN_SECONDS: rr.run_seconds(list(iter_jsonl(out_dir / rr.METRICS_FILE))),
        **vs_start(out_dir, trainer.state.global_step, cfg.seed, world=world),
        **vs_start(out_dir, trainer.state.global_step, cfg.seed, prefix=rr.HELDOUT, world=world),
        **trends(out_dir),
    }
    summary["figures"] = write_run_figures(out_dir)
    write_model_card(out_dir, model_card(out_dir.name, _recipe_name(out_dir), cfg.seed, args.wm.coupling, base_ref,
                                         summary, has_world_model=objective.has_adapter))
    atomic_write_json(out_dir / rr.SUMMARY_FILE, summary)  # last: a run with summary.json is complete
    return summary


def _recipe_name(run_dir: Path) -> str | None:
    try:
        return read_json(run_dir / rr.RUN_FILE).get(rr.RUN_RECIPE)
    except Exception:  # noqa: BLE001 - the card is written without it
        return None
