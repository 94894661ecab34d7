"""The rollout record: what a world-model objective keeps of a generation for its loss.

TRL's GRPO generation returns one dict of per-row columns, which it shuffles and splits into
gradient-accumulation micro-batches (``shuffle_sequence_dict``, ``split_tensor_dict``). A world-model
objective adds its own columns to that dict at rollout time (:meth:`WorldModelObjective.collect`), so
they travel with their rows through TRL's split, and reads them back per micro-batch as a
:class:`RolloutRecord` in ``compute_loss``:

* ``lfo_wm_examples``: per row, the world-model examples (text, target span) of that row's predicted calls,
  a prompt's examples all on its first row (:func:`gather_by_prompt`);
* ``lfo_reply_mask``: (B, C) the reply tokens inside each rollout's completion (the tool replies TRL
  masks out of the policy loss with ``tool_mask``);
* ``lfo_turns``: (B, C) for an entropy gate: the agent's k-th turn's tokens hold k + 1, the tokens of the
  reply to it -(k + 1), the rest 0;
* ``lfo_wm_units``: a 0-d total, over the generation and all processes, of the units the objective's
  normaliser averages over (examples or reply tokens). TRL hands a 0-d tensor to every micro-batch whole,
  as it does ``num_items_in_batch``.

With ``wm.targets: world`` the examples come from each rollout's environment (``trainer.environments``, one per
row, in row order), whose transition log holds the state, the action and the reply of every call; the world
formats them (:meth:`lfo_cli.worlds.World.world_model_example`). With ``wm.targets: tool_responses`` they come
from the rollout itself: the tool replies TRL appended as ``role: tool`` messages (:func:`tool_replies`), found
among the completion's tokens that ``tool_mask`` marks 0, each after the conversation that led to it
(:func:`examples_from_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from lfo_cli import run_record as rr

EXAMPLES = "lfo_wm_examples"
REPLY_MASK = "lfo_reply_mask"
UNITS = "lfo_wm_units"
TURNS = "lfo_turns"
COLUMNS = (EXAMPLES, REPLY_MASK, UNITS, TURNS)

Example = tuple[str, tuple[int, int]]  # input + target text, the target's character span


@dataclass
class RolloutRecord:
    """One micro-batch's world-model columns (absent columns are None)."""

    examples: list[list[Example]] | None = None
    reply_mask: torch.Tensor | None = None
    units: torch.Tensor | None = None
    turns: torch.Tensor | None = None

    @classmethod
    def pop(cls, inputs: dict) -> RolloutRecord:
        """Take the record's columns out of a micro-batch's inputs (TRL's loss must not see them)."""
        return cls(*(inputs.pop(key, None) for key in COLUMNS))


def turn_ids(tool_mask: list[int], completion_mask: list[int], reply_mask: list[int]) -> list[int]:
    """One rollout's :data:`TURNS` row: the agent's turns (runs of its own tokens, ``tool_mask`` 1) numbered
    1, 2, ...; each reply token gets minus the number of the turn before it."""
    out, turn, inside = [0] * len(tool_mask), 0, False
    for i, (own, real, reply) in enumerate(zip(tool_mask, completion_mask, reply_mask, strict=True)):
        if own and real:
            if not inside:
                turn, inside = turn + 1, True
            out[i] = turn
        else:
            inside = False
            if reply and turn:
                out[i] = -turn
    return out


def tool_of(transition) -> str | None:
    """The tool a logged transition called (transitions are objects or mappings)."""
    action = transition.get("action") if isinstance(transition, Mapping) else getattr(transition, "action", None)
    if isinstance(action, Mapping):
        return action.get("tool")
    return getattr(action, "tool", None)


def observation_of(transition) -> str:
    return transition["observation"] if isinstance(transition, Mapping) else transition.observation


def examples_from_environment(env, tools: Sequence[str], example_of: Callable[[object], Example]) -> list[Example]:
    """World-model examples (text, target span) for the calls to ``tools`` in one rollout's environment's
    transition log; ``example_of`` is the world's (:meth:`lfo_cli.worlds.World.world_model_example`)."""
    transitions = getattr(env, "transitions", None) or []
    return [example_of(t) for t in transitions if tool_of(t) in tools]


def tool_replies(messages: Sequence, learns: Callable[[str | None], bool]) -> list[tuple[str, bool]]:
    """The tool replies TRL appended to one rollout's completion, in order, as ``(text, learns(tool))``: its
    ``{"role": "tool", "name": ..., "content": str(result)}`` messages (multimodal replies, lists of parts, have
    no one text and are left out)."""
    return [(m["content"], learns(m.get("name"))) for m in messages
            if isinstance(m, Mapping) and m.get("role") == "tool" and isinstance(m.get("content"), str)]


def examples_from_tokens(tokenizer, prompt_ids: Sequence[int], completion_ids: Sequence[int],
                         mask: Sequence[int]) -> list[Example]:
    """World-model examples from a rollout's own tokens: one per run of ``mask`` (the learned replies' tokens in
    the completion), its input the prompt and the conversation before the reply, as TRL tokenised them, and the
    reply its target (text, target span; :func:`~lfo_cli.train.wm_batches.tokenize_example` tokenises both)."""
    ids, out, i = [*prompt_ids, *completion_ids], [], 0
    while i < len(mask):
        if not mask[i]:
            i += 1
            continue
        j = i
        while j < len(mask) and mask[j]:
            j += 1
        context = tokenizer.decode(ids[: len(prompt_ids) + i])
        target = tokenizer.decode(ids[len(prompt_ids) + i : len(prompt_ids) + j])
        out.append((context + target, (len(context), len(context) + len(target))))
        i = j
    return out


def gather_by_prompt(column: Sequence[list[Example]], keys: Sequence[object]) -> list[list[Example]]:
    """Every row's examples moved to the first row with the same key (its prompt); the other rows get none.

    TRL shuffles a generation batch's rows before splitting it into gradient-accumulation micro-batches,
    which scatters a prompt's group of rollouts. Their world-model examples share the task and usually
    the directory the search returned; on one row they stay in one micro-batch, where their common
    start runs once. The loss is normalised by the generation's total (``UNITS``), so which micro-batch
    computes an example does not change the step's loss.
    """
    first: dict[object, int] = {}
    out: list[list[Example]] = [[] for _ in column]
    for i, (key, examples) in enumerate(zip(keys, column, strict=True)):
        out[first.setdefault(key, i)].extend(examples)
    return out


@dataclass
class StepWMMetrics:
    """The world model's metrics of one optimizer step, summed over its micro-batches.

    With gradient accumulation a micro-batch holds whole prompt groups or none (``gather_by_prompt``),
    so per-micro-batch means would be lumpy: a mean of means, and a probe norm of one part of the
    step's gradient. Sums over the step give the step's own values: the loss over its normaliser's
    units (predicted calls, or reply tokens), token accuracy over its target tokens, and the norm of the
    whole step's d(lambda * wm_loss)/d(policy) (the micro-batches' terms add up to the step's).
    """

    loss_sum: float = 0.0  # the loss summed over units
    units: float = 0.0  # what ``losses/wm`` (LOSS_WM) is a mean over
    examples: float = 0.0  # world-model examples (0 for an objective without separate examples)
    targets: float = 0.0  # target tokens
    correct: float = 0.0  # target tokens predicted right (counted only where examples are)
    gate_kept: float = 0.0  # reply tokens an entropy gate let through, of
    gate_total: float = 0.0  # the reply tokens it saw
    probe: list[torch.Tensor] | None = None  # summed d(term)/d(policy adapter), when the step is probed

    def add(self, other: StepWMMetrics) -> None:
        self.loss_sum += other.loss_sum
        self.units += other.units
        self.examples += other.examples
        self.targets += other.targets
        self.correct += other.correct
        self.gate_kept += other.gate_kept
        self.gate_total += other.gate_total
        if other.probe is not None:
            self.probe = other.probe if self.probe is None else [a + b for a, b in zip(self.probe, other.probe, strict=True)]

    def emit(self, metrics: dict[str, list[float]]) -> None:
        """Append the step's values to TRL's metric lists (nothing for a step without world-model loss)."""
        if self.units:
            metrics[rr.LOSS_WM].append(self.loss_sum / self.units)
            metrics[rr.WM_TARGET_TOKENS].append(self.targets)
            if self.examples:
                metrics[rr.WM_TOKEN_ACC].append(self.correct / max(self.targets, 1.0))
                metrics[rr.WM_EXAMPLES].append(self.examples)
        if self.gate_total:
            metrics[rr.WM_GATE_OPEN].append(self.gate_kept / self.gate_total)
        if self.probe is not None:
            metrics[rr.GRAD_POLICY_FROM_WM].append(float(torch.nn.utils.get_total_norm(self.probe)))
