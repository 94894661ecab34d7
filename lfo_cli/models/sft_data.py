"""Supervised warm-start data: the world's tasks played by a noisy reference policy, tokenized for SFT.

The trajectories are rendered with the chat template, system prompt and tool schema that GRPO uses and
tokenized with TRL's generation-tagged twin of the template (loss on assistant turns only; turns a
trajectory marks with weight 0, such as copy slips, stay in context without loss).
"""

from __future__ import annotations

import random
from pathlib import Path

from lfo_cli.env.generate import generate_world
from lfo_cli.env.tasks import fresh_training_tasks
from lfo_cli.env.world import sub_seed
from lfo_cli.env.world_files import MANIFEST_FILE, load_world
from lfo_cli.errors import LfoError
from lfo_cli.models.reply_loss import REPLY_MASKS, reply_masks
from lfo_cli.models.trajectories import collect_trajectories
from lfo_cli.models.warmstart_config import WarmStartConfig


def load_world_for(cfg: WarmStartConfig):
    if not (Path(cfg.data.dir) / MANIFEST_FILE).is_file():
        raise LfoError(
            f"{cfg.data.dir}: no environment data; create it with `lfo gen-env --seed 0 --output-dir {cfg.data.dir}` "
            "(or set data.dir)"
        )
    return load_world(cfg.data.dir)


def sft_world(cfg: WarmStartConfig, world):
    """The world the SFT tasks are played in: ``world``, or with ``data.fresh_companies`` one of that many
    companies generated afresh (the generator's own catalogue and exception rate, nothing held out)."""
    if not cfg.data.fresh_companies:
        return world
    return generate_world(num_companies=cfg.data.fresh_companies, num_train_tasks=0, num_val_tasks=0,
                          heldout_fraction=0.0, seed=sub_seed("sft-companies", world.seed, cfg.seed),
                          exception_rate=world.config.get("exception_rate", 0.3))


def collect_sft_trajectories(cfg: WarmStartConfig, world) -> list[dict]:
    world = sft_world(cfg, world)
    if cfg.data.fresh_tasks:
        tasks = fresh_training_tasks(world, cfg.data.fresh_tasks, seed=sub_seed("sft", world.seed, cfg.seed))
    else:
        tasks = list(world.tasks.get("train", []))
    if cfg.data.max_tasks is not None:
        tasks = random.Random(cfg.seed).sample(tasks, min(cfg.data.max_tasks, len(tasks)))
    if not tasks:
        raise LfoError(f"{cfg.data.dir}: the world has no train tasks")
    return collect_trajectories(
        world, tasks, policy=cfg.data.policy, noise=cfg.data.noise, seed=cfg.seed,
        rollouts_per_task=cfg.data.rollouts_per_task, imitate_random=cfg.data.imitate_random,
        probe_rate=cfg.data.probe_rate, probe_noise=cfg.data.probe_noise,
    )


def tokenize_trajectories(tokenizer, trajectories: list[dict], tools: list[dict], max_length: int,
                          reply_tools: tuple[str, ...] = ()):
    """``input_ids`` + ``assistant_masks`` with TRL's generation-tagged training template (and, with
    ``reply_tools``, ``reply_masks``: the replies of those tools, for a world-model warm start).

    We tokenize here (exactly as SFTTrainer's own ``tokenize_fn`` would) rather than hand SFTTrainer
    the raw messages because a ``datasets`` column of tool-call arguments with different keys per
    tool is unified into one struct, and the missing keys would render as ``null`` arguments.
    """
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer)
    rows, dropped = [], 0
    for traj in trajectories:
        out = tokenizer.apply_chat_template(
            traj["messages"], tools=tools, chat_template=template, tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True,
        )
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        if len(ids) > max_length:
            dropped += 1
            continue
        if 1 not in mask:
            raise LfoError("the chat template produced no assistant tokens (generation markers missing)")
        row: dict = {"input_ids": ids}
        if reply_tools:
            row[REPLY_MASKS] = reply_masks(tokenizer, ids, mask, traj["messages"], reply_tools)
        weights = [m.get("weight", 1) for m in traj["messages"] if m["role"] == "assistant"]
        if 0 in weights:
            mask = _zero_assistant_turns(mask, weights)
        rows.append({**row, "assistant_masks": mask})
    return rows, dropped


def assistant_spans(mask: list[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of assistant tokens in an assistant mask: one per assistant turn."""
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _zero_assistant_turns(mask: list[int], weights: list) -> list[int]:
    """``mask`` with the k-th run of assistant tokens zeroed wherever ``weights[k] == 0``."""
    runs = assistant_spans(mask)
    if len(runs) != len(weights):
        raise LfoError(f"the chat template marked {len(runs)} assistant spans for {len(weights)} assistant "
                       "messages; cannot drop the loss of single turns")
    out = list(mask)
    for (a, b), w in zip(runs, weights, strict=True):
        if w == 0:
            out[a:b] = [0] * (b - a)
    return out

