"""World-model objectives: one class per coupling, owning every decision the coupling makes.

``DualLoRAGRPOTrainer`` adds ``lambda * world_model_loss`` to TRL's policy loss and delegates the
world-model side to the run's :class:`WorldModelObjective` (``wm.coupling`` names it in
:data:`OBJECTIVES`):

* which adapters it attaches (:attr:`~WorldModelObjective.has_adapter`: a ``world_model`` LoRA or none)
  and which are active when it predicts a reply (:attr:`~WorldModelObjective.predict_adapters`; the
  in-training semantic probe and the surprise bonus predict the same way);
* what it keeps of a generation's rollouts (:meth:`~WorldModelObjective.collect`, into the
  :mod:`rollout record <lfo_cli.train.rollout_record>`);
* its loss on a micro-batch (:meth:`~WorldModelObjective.loss`), normalised by the run's
  :class:`~lfo_cli.train.normalise.Normaliser`, and the step metrics it fills;
* whether it reads the policy's own forward (:meth:`~WorldModelObjective.observe_policy_forward`: the
  per-token log-probs and entropies TRL computes inside its private ``_compute_loss``, handed over by the
  trainer's one override of ``_get_per_token_logps_and_entropies``).

A new coupling is a new subclass plus its tests (docs/training.md shows one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import ClassVar

import torch

from lfo_cli.errors import LfoError
from lfo_cli.models.reply_mask import reply_token_mask
from lfo_cli.train.adapters import POLICY, WORLD_MODEL, active
from lfo_cli.train.normalise import LEGACY, NORMALISERS, Normaliser, ObsTokens, TokenMean
from lfo_cli.train.rollout_record import (
    EXAMPLES,
    REPLY_MASK,
    TURNS,
    UNITS,
    Example,
    RolloutRecord,
    StepWMMetrics,
    examples_from_environment,
    examples_from_tokens,
    gather_by_prompt,
    observation_of,
    tool_of,
    tool_replies,
    turn_ids,
)
from lfo_cli.train.wm_batches import build_wm_batches
from lfo_cli.train.wm_loss import can_share_prefix, world_model_sums
from lfo_cli.worlds import World

TOOL_RESPONSES = "tool_responses"  # wm.targets: the tool replies TRL inserted into the completions
NO_WORLD = ("wm.targets=world builds the world model's examples from an lfo World's transition log, and the trainer "
            "got no world: pass world= (a lfo_cli.worlds.World) to DualLoRAGRPOTrainer, or set "
            "wm.targets=tool_responses to learn the tool replies TRL inserts into the rollouts")

OBJECTIVES: dict[str, type[WorldModelObjective]] = {}  # wm.coupling -> its objective, filled as classes are defined


class WorldModelObjective:
    """The world-model side of the loss. Subclasses set the class attributes and :meth:`collect` / :meth:`loss`;
    a subclass with a ``name`` registers itself as that ``wm.coupling``."""

    name: ClassVar[str]
    has_adapter: ClassVar[bool]  # attaches a `world_model` adapter
    predict_adapters: ClassVar[tuple[str, ...]]  # active while it predicts a reply
    default_normaliser: ClassVar[type[Normaliser]]  # what `wm.normalize: legacy` uses
    normalisers: ClassVar[tuple[type[Normaliser], ...]]  # the normalisers it can count units for at rollout time
    own_forward: ClassVar[bool]  # its loss comes from a forward of its own (not the policy's rollout forward)
    gates: ClassVar[bool] = False  # can weigh its loss by the policy's action entropy (wm.gate_quantile)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if cls.name in OBJECTIVES:
                raise ValueError(f"a world-model objective named {cls.name!r} exists already: {OBJECTIVES[cls.name]}")
            OBJECTIVES[cls.name] = cls

    def __init__(self, wm, tokenizer, *, total: Callable[[float | torch.Tensor], torch.Tensor],
                 device: torch.device | str = "cpu", world: type[World] | None = None):
        # world: whose rollouts (its tools, its example format); wm.targets=tool_responses needs none
        self.wm, self.tokenizer, self.world, self.total, self.device = wm, tokenizer, world, total, device
        self.normaliser = self.normaliser_class(wm.normalize)()
        # TRL's messages of each rollout's completion (one list per row, its tool replies the `role: tool` ones),
        # set by the trainer before :meth:`collect` (wm.targets=tool_responses reads them).
        self.conversations: Sequence[Sequence] | None = None
        self.tools: tuple[str, ...] | None  # the tools whose replies the world model predicts (None: every tool)
        if wm.targets == TOOL_RESPONSES:
            self.tools = None if wm.tools is None else tuple(wm.tools)
        elif world is None:
            if wm.coef > 0:
                raise LfoError(NO_WORLD)
            self.tools = ()
        else:
            predict = wm.predict or next(iter(world.predict_tools))  # null: the world's default
            if predict not in world.predict_tools:
                raise ValueError(f"wm.predict={predict} is not one of the {world.kind} world's: "
                                 f"{', '.join(world.predict_tools)}")
            self.tools = world.predict_tools[predict]

    def check_tools(self, available: Sequence[str]) -> None:
        """wm.targets=tool_responses: the trainer has tools, and ``wm.tools`` names only tools it has."""
        if self.wm.targets != TOOL_RESPONSES:
            return
        if not available:
            raise LfoError("wm.targets=tool_responses learns the replies of the tools TRL calls, and this trainer has "
                           "none: pass environment_factory= or tools= to it")
        unknown = [t for t in self.tools or () if t not in available]
        if unknown:
            raise LfoError(f"wm.tools names {', '.join(unknown)}, which this trainer has no tool of (its tools: "
                           f"{', '.join(available)}): name those, or set wm.tools=null for every tool")

    def learns(self, tool: str | None) -> bool:
        """Whether the world model learns the replies of ``tool``."""
        return self.tools is None or tool in self.tools

    def replies(self, row: int, environments: Sequence) -> list[tuple[str, bool]]:
        """Every tool reply of one rollout, in order, as ``(text, learned)``: from TRL's messages
        (wm.targets=tool_responses) or the rollout's environment's transition log (wm.targets=world)."""
        if self.wm.targets == TOOL_RESPONSES:
            return tool_replies(self.conversations[row] if self.conversations else (), self.learns)
        env = environments[row] if environments else None
        return [(observation_of(t), self.learns(tool_of(t))) for t in getattr(env, "transitions", None) or []]

    def reply_masks(self, output: dict, environments: Sequence) -> torch.Tensor:
        """(B, C) mask of the learned tools' reply tokens inside each rollout's completion (TRL's ``tool_mask``
        is 0 on them and the chat template's tokens around them)."""
        completion_ids, width = output["completion_ids"], output["completion_ids"].size(1)
        tool_mask = output.get("tool_mask")
        masks = torch.zeros_like(completion_ids)
        if tool_mask is None or not (environments or self.conversations):
            return masks
        for i in range(completion_ids.size(0)):
            row = reply_token_mask(self.tokenizer, completion_ids[i].tolist(), tool_mask[i].tolist(),
                                   self.replies(i, environments))
            masks[i, :width] = torch.tensor(row[:width], dtype=masks.dtype)
        return masks * output["completion_mask"]

    def no_targets(self, steps: int) -> str:
        """The error that stops a run after ``steps`` optimizer steps in a row without a target token."""
        head = f"no world-model target token in {steps} optimizer steps in a row: "
        tail = (", or set wm.coef=0 for a run without the term (wm.stop_without_targets=0 lets a run go on "
                "without targets)")
        if self.wm.targets == TOOL_RESPONSES:
            which = "any tool" if self.tools is None else f"the tools wm.tools names ({', '.join(self.tools)})"
            return (head + f"the rollouts hold no reply of {which}. Set wm.tools to tools the agent calls (null: "
                    "every tool) or leave max_completion_length room for a tool call" + tail)
        return (head + f"the rollouts hold no reply of the tools wm.predict={self.wm.predict} names "
                f"({', '.join(self.tools or ())}). Set wm.predict to tools the agent calls (the {self.world.kind} "
                f"world's: {', '.join(self.world.predict_tools)}) or wm.targets=tool_responses" + tail)

    # Tests replace how a rollout's environment becomes world-model examples: (env, tools) -> examples.
    examples_fn: Callable[[object, Sequence[str]], list[Example]] | None = None

    def examples(self, env) -> list[Example]:
        """World-model examples (text, target span) of the predicted tools' calls in one rollout's environment."""
        if self.examples_fn is not None:
            return self.examples_fn(env, self.tools)
        return examples_from_environment(env, self.tools, self.world.world_model_example)

    @classmethod
    def normaliser_class(cls, normalize: str) -> type[Normaliser]:
        """The normaliser ``wm.normalize`` names for this objective (``legacy``: its own default)."""
        chosen = cls.default_normaliser if normalize == LEGACY else NORMALISERS[normalize]
        if chosen not in cls.normalisers:
            raise ValueError(f"wm.normalize={normalize} does not go with wm.coupling={cls.name} (it supports "
                             f"{', '.join(n.name for n in cls.normalisers)})")
        return chosen

    # ---- rollout time ----
    def collect(self, output: dict, environments: Sequence) -> None:
        """Add this objective's columns to TRL's generation output (``output``), from its rollouts'
        environments (one per row)."""
        raise NotImplementedError

    # ---- loss time ----
    def loss(self, model, record: RolloutRecord, part: StepWMMetrics) -> tuple[torch.Tensor | None, float]:
        """``(mean loss over the micro-batch's units, or None without any; their number)``; adds the
        micro-batch's sums to ``part``."""
        raise NotImplementedError

    def observe_policy_forward(self, logps: torch.Tensor, entropies: torch.Tensor | None) -> None:
        """The policy forward's per-token log-probs and entropies of this micro-batch (inside TRL's
        ``_compute_loss``). Only objectives that read them keep them."""

    @property
    def reads_policy_forward(self) -> bool:
        return type(self).observe_policy_forward is not WorldModelObjective.observe_policy_forward


class _ExampleObjective(WorldModelObjective):
    """A world model with its own forward on formatted examples: (state, action) -> the world's reply."""

    has_adapter = True
    default_normaliser = ObsTokens
    # Each example is one sequence with its reply: the generation's total is its number of examples. A
    # token mean would need the replies' token counts at rollout time.
    normalisers = (ObsTokens,)
    own_forward = True
    def collect(self, output: dict, environments: Sequence) -> None:
        n = output["completion_ids"].size(0)
        if self.wm.targets == TOOL_RESPONSES:  # each reply after the conversation that led to it, as TRL tokenised it
            masks = self.reply_masks(output, environments).tolist()
            column = [examples_from_tokens(self.tokenizer, [t for t, m in zip(p, pm, strict=True) if m], c, r)
                      for p, pm, c, r in zip(output["prompt_ids"].tolist(), output["prompt_mask"].tolist(),
                                             output["completion_ids"].tolist(), masks, strict=True)]
        else:
            column = [self.examples(env) for env in environments] if environments else [[] for _ in range(n)]
        if len(column) != n:
            raise RuntimeError(f"{len(column)} environments for {n} rollouts")
        prompts = [tuple(t for t, m in zip(ids, mask, strict=True) if m)
                   for ids, mask in zip(output["prompt_ids"].tolist(), output["prompt_mask"].tolist(), strict=True)]
        output[EXAMPLES] = gather_by_prompt(column, prompts)
        output[UNITS] = self.total(sum(len(c) for c in column))

    def loss(self, model, record: RolloutRecord, part: StepWMMetrics) -> tuple[torch.Tensor | None, float]:
        flat = [ex for row in (record.examples or []) for ex in row]
        if not flat:
            return None, 0.0
        units = float(len(flat))
        if len(flat) > self.wm.max_examples:  # evenly spaced subsample, deterministic
            stride = len(flat) / self.wm.max_examples
            flat = [flat[math.floor(i * stride)] for i in range(self.wm.max_examples)]
        batches, _ = self.batches(model, flat)
        with active(model, list(self.predict_adapters)):
            sums, correct, counts = world_model_sums(model, [b.to(self.device) for b in batches])
        wm_loss = self.normaliser.reduce(sums, counts)
        n = self.normaliser.units(counts)
        part.loss_sum += float(wm_loss.detach()) * n
        part.units += n
        part.examples += float(len(flat))
        part.targets += float(counts.sum())
        part.correct += float(correct.sum())
        return wm_loss, units

    def batches(self, model, examples: list[Example]):
        share = self.wm.share_prefix and can_share_prefix(model)
        return build_wm_batches(self.tokenizer, examples, self.wm.max_length, self.wm.batch_tokens,
                                share_prefix=share)


class Separate(_ExampleObjective):
    """The design: the world-model forward runs with only its own adapter. With a frozen base no gradient
    of its loss reaches the policy adapter (measured every probe step, not assumed)."""

    name = "separate"
    predict_adapters = (WORLD_MODEL,)


class Stacked(_ExampleObjective):
    """Both adapters active in the world-model forward, so its gradient also trains the policy adapter."""

    name = "stacked"
    predict_adapters = (POLICY, WORLD_MODEL)


class Shared(WorldModelObjective):
    """ECHO-style: one adapter. The cross-entropy on the reply tokens already inside the policy's rollout
    forward (TRL masks them out of the policy loss via ``tool_mask``) is the world-model loss: no extra
    forward at all."""

    name = "shared"
    has_adapter = False
    predict_adapters = (POLICY,)
    default_normaliser = TokenMean
    normalisers = (ObsTokens, TokenMean)
    own_forward = False
    gates = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._logps: torch.Tensor | None = None
        self._entropies: torch.Tensor | None = None
        self.gate = self.wm.gate_quantile

    def collect(self, output: dict, environments: Sequence) -> None:
        output[REPLY_MASK] = masks = self.reply_masks(output, environments)
        output[UNITS] = self.total(self.normaliser.units(masks.sum(-1)))
        if self.gate is not None:
            tool = output.get("tool_mask", torch.ones_like(masks))
            output[TURNS] = torch.tensor([turn_ids(t, c, r) for t, c, r in zip(
                tool.tolist(), output["completion_mask"].tolist(), masks.tolist(), strict=True)], dtype=torch.long)

    def gate_mask(self, entropies: torch.Tensor, turns: torch.Tensor, reply_mask: torch.Tensor) -> torch.Tensor:
        """PaW's gate: the reply tokens of turns whose mean action entropy is at or above the ``gate``
        quantile of the micro-batch's turns (the replies the policy was unsure what to do before)."""
        rows, means = [], []
        for b in range(turns.size(0)):
            for k in range(1, int(turns[b].max().clamp(min=0)) + 1):
                own = turns[b] == k
                if own.any():
                    rows.append((b, k))
                    means.append(entropies[b][own].mean())
        keep = torch.zeros_like(reply_mask)
        if not means:
            return keep
        values = torch.stack(means).detach().float()
        threshold = torch.quantile(values, self.gate)
        for (b, k), value in zip(rows, values.tolist(), strict=True):
            if value >= float(threshold):
                keep[b] |= (turns[b] == -k).to(keep.dtype)
        return keep * reply_mask

    def observe_policy_forward(self, logps: torch.Tensor, entropies: torch.Tensor | None) -> None:
        self._logps, self._entropies = logps, entropies

    def loss(self, model, record: RolloutRecord, part: StepWMMetrics) -> tuple[torch.Tensor | None, float]:
        logps, self._logps = self._logps, None
        entropies, self._entropies = self._entropies, None
        mask = record.reply_mask
        if mask is not None and self.gate is not None and record.turns is not None and entropies is not None:
            total = float(mask.sum())
            mask = self.gate_mask(entropies, record.turns, mask)
            part.gate_kept += float(mask.sum())
            part.gate_total += total
        count = float(mask.sum()) if mask is not None else 0.0
        if logps is None or count == 0:
            return None, 0.0
        mask = mask.to(logps.dtype)
        sums, counts = -(logps * mask).sum(-1), mask.sum(-1)  # one sequence per rollout
        wm_loss = self.normaliser.reduce(sums, counts)
        n = self.normaliser.units(counts)
        part.loss_sum += float(wm_loss.detach()) * n
        part.units += n
        part.targets += count
        return wm_loss, n


COUPLINGS = tuple(OBJECTIVES)  # the built-in couplings: the objectives defined in this module
ENTRY_POINTS = "lfo.objectives"  # a package's own couplings: `[project.entry-points."lfo.objectives"] NAME = "mod:Cls"`


def couplings() -> list[str]:
    """Every ``wm.coupling`` a recipe can name here: the objectives defined so far (lfo's and any subclass a
    user's module defined with a ``name``) and those registered under the ``lfo.objectives`` entry points."""
    return [*OBJECTIVES, *sorted({ep.name for ep in entry_points(group=ENTRY_POINTS)} - set(OBJECTIVES))]


def objective_class(coupling: str) -> type[WorldModelObjective]:
    """The objective ``wm.coupling`` names: a defined subclass of :class:`WorldModelObjective` with that
    ``name``, else the class an ``lfo.objectives`` entry point of that name loads."""
    if coupling in OBJECTIVES:
        return OBJECTIVES[coupling]
    found = [ep for ep in entry_points(group=ENTRY_POINTS) if ep.name == coupling]
    if not found:
        raise ValueError(f"unknown wm.coupling {coupling!r} (known: {', '.join(couplings())}); a coupling of your "
                         f"own is a subclass of lfo_cli.train.objectives.WorldModelObjective with name = {coupling!r}, "
                         f"defined in a module imported before the run or registered under the "
                         f"{ENTRY_POINTS!r} entry points")
    try:
        cls = found[0].load()
    except Exception as exc:  # a broken plugin: say which
        raise ValueError(f"wm.coupling {coupling!r}: its entry point {found[0].value} does not load: "
                         f"{type(exc).__name__}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, WorldModelObjective)) or getattr(cls, "name", None) != coupling:
        raise ValueError(f"wm.coupling {coupling!r}: its entry point {found[0].value} is not a WorldModelObjective "
                         f"subclass with name = {coupling!r}")
    return cls
