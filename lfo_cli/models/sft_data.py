"""Supervised warm-start data: the world's tasks played by its teacher (a noisy reference policy), tokenized for SFT.

The trajectories are rendered with the chat template, system prompt and tool schema that GRPO uses and
tokenized with TRL's generation-tagged twin of the template (loss on assistant turns only; turns a
trajectory marks with weight 0, such as copy slips, stay in context without loss).
"""

from __future__ import annotations

from lfo_cli.errors import LfoError
from lfo_cli.models.reply_loss import REPLY_MASKS, reply_masks
from lfo_cli.models.trajectories import collect_trajectories
from lfo_cli.models.warmstart_config import WarmStartConfig
from lfo_cli.worlds import World, load_world


def load_world_for(cfg: WarmStartConfig) -> World:
    """The warm start's world (``env.kind``, files in ``data.dir``; one error line naming the fix)."""
    return load_world(cfg.env.kind, cfg.data.dir)


def collect_sft_trajectories(cfg: WarmStartConfig, world: World, progress=None) -> list[dict]:
    """The teacher's rollouts of the SFT tasks the recipe's data section names (:meth:`World.sft_tasks`);
    ``progress(done, total)`` as :func:`collect_trajectories` calls it."""
    played, tasks = world.sft_tasks(cfg.data, cfg.seed)
    return collect_trajectories(
        played, tasks, policy=cfg.data.policy, noise=cfg.data.noise, seed=cfg.seed,
        rollouts_per_task=cfg.data.rollouts_per_task, imitate_random=cfg.data.imitate_random,
        settings=cfg.data, progress=progress,
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

