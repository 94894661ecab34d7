"""What lfo needs from a world: the :class:`World` interface.

A world is a plugin. Its class (a subclass of :class:`World`) says what holds for every instance of it, by role
(:class:`Trainable`, the minimum; :class:`Teacher`, :class:`Inspectable`, :class:`Described`, :class:`Generated`,
each optional):
the TRL environment class whose public methods are the agent's tools, how one logged transition becomes a
world-model example, which tools' replies ``wm.predict`` names. An instance is one generated world (the
files ``lfo gen-env`` wrote, or a game set): its task splits, the TRL ``environment_factory``, episodes
for evaluation, the world model's semantic probe and the world's own evaluation measures.

``lfo_cli.train``, ``lfo_cli.models`` and ``lfo_cli.report`` talk to worlds only through this interface
(an import-linter contract keeps each world's package out of them); :mod:`lfo_cli.worlds.registry`
finds a world class by its ``kind`` (a recipe's ``env.kind``).

Every world keeps, on each TRL environment instance and on each :meth:`World.episode`, a ``transitions``
list: one entry per tool call, with ``action`` (a mapping with ``tool`` and ``args``), ``observation``
(the reply the agent read) and whatever the world's :meth:`World.world_model_example` needs (its state).
The world-model objectives read the replies from it.

Standard library only: worlds must not import an ML library.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from lfo_cli.errors import LfoError

Example = tuple[str, tuple[int, int]]  # a world-model example: input + target text, the target's character span


class Task(Protocol):
    """What lfo reads of a world's task: an id the environment resolves, and a difficulty level."""

    task_id: str
    difficulty: int


class EpisodeRunner(Protocol):
    """One task at a time, as an agent plays it: ``reset`` then ``step`` until ``done``."""

    transitions: list
    success: bool

    def reset(self, task: Any, rollout_seed: int = 0) -> str: ...
    def step(self, tool_name: Any, args: Any = None) -> str: ...
    @property
    def done(self) -> bool: ...
    def info(self) -> dict: ...


@dataclass(frozen=True)
class TaskPools:
    """A run's tasks: what RL trains on, what validation measures (the same every evaluation), and the
    held-out tasks of the transfer test (empty when the recipe asks for none)."""

    train: list
    validation: list
    heldout: list


@dataclass(frozen=True)
class SemanticProbe:
    """A fixed set of world-model inputs with the replies the world gave, and the world's own judge of
    whether a predicted reply means the same (`val/wm_semantic_acc`)."""

    inputs: list[str]
    replies: list[str]
    judge: Callable[[str, str], bool]  # (predicted text, actual reply) -> same meaning
    stop: str  # the target's closing marker: generation is cut after it

    def __len__(self) -> int:
        return len(self.inputs)


class Trainable(abc.ABC):
    """What `lfo train` and evaluation need of a world: its tools, tasks, episodes and world-model examples. The
    minimum a world implements (the abstract methods and the class attributes without a default)."""

    kind: ClassVar[str]  # the recipe's `env.kind`
    tools: ClassVar[type]  # the TRL environment class: its public methods (besides reset, get_reward) are the tools
    # `wm.predict` value -> the tools whose replies it predicts; the first is the default (a recipe's `wm.predict: null`)
    predict_tools: ClassVar[Mapping[str, tuple[str, ...]]]
    reply_stop: ClassVar[str]  # the marker after a world-model target: a generated reply is cut after it
    splits: ClassVar[tuple[str, ...]]  # the world's task splits
    heldout_split: ClassVar[str]  # the split of the transfer test (`lfo transfer-eval --split transfer`)
    # The agent's system prompt (None: lfo's default, lfo_cli.models.prompts.SYSTEM_PROMPT); it is part of every
    # rollout, so keep it short.
    system_prompt: ClassVar[str | None] = None
    # Episode fields with a fixed set of values, counted per value in `eval/...` summaries (e.g. where the
    # first call went); each is reported for every value, so two evaluations have the same keys. The first value
    # is the one a good policy reaches: the warm start's summary table shows its share.
    episode_categories: ClassVar[Mapping[str, tuple[str | None, ...]]] = {}
    # Episode fields an evaluation keeps per episode (`evaluate_agent`), besides the task, difficulty and outcome.
    episode_fields: ClassVar[tuple[str, ...]] = ()
    # Those a run's validation files keep (None: all of episode_fields): enough to recompute the world's
    # `val/...` measures offline.
    validation_fields: ClassVar[tuple[str, ...] | None] = None
    # Sub-skills a run's last validation is compared on against its step 0, episode by episode like success
    # (`val/vs_start/NAME/...`, :meth:`episode_skills`): name -> what it says, e.g. "first call to the right
    # department". A skill GRPO moves within a few steps, where success needs many. Empty: success only.
    paired_skills: ClassVar[Mapping[str, str]] = {}
    # The world's own recipe settings (lfo_cli.worlds.settings): dataclasses of the keys it adds to a training
    # recipe's `data` section (which tasks RL trains on) and `env` section (the training reward's options: what
    # `env_factory` gets as `options`), each field with metadata help; None: none.
    train_data: ClassVar[type | None] = None
    rewards: ClassVar[type | None] = None
    # Keys the world's recorded recipes held before the world owned its settings, each (dotted) with the one value
    # it could take then, by recipe kind: a recorded run that holds them reads as if it did not (lfo train --resume).
    retired_keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    # ---- the world's files ----
    @classmethod
    @abc.abstractmethod
    def load(cls, data_dir: str | Path) -> World:
        """The world ``lfo gen-env`` wrote to ``data_dir`` (an ``LfoError`` naming what is wrong otherwise)."""

    @property
    @abc.abstractmethod
    def seed(self) -> int:
        """The seed the world was generated with (validation and held-out draws depend on it alone)."""

    @classmethod
    @abc.abstractmethod
    def fingerprint(cls, data_dir: str | Path) -> str | None:
        """A hash of the world's files in ``data_dir`` (None: no world there): a run records it, and
        evaluations of the run refuse another world."""

    @classmethod
    @abc.abstractmethod
    def world_model_example(cls, transition: Any) -> Example:
        """One logged transition (an object or its JSON form) as world-model input + target text."""

    # ---- tasks ----
    @abc.abstractmethod
    def tasks(self, split: str) -> list:
        """The tasks of one of :attr:`splits`, in the world's order."""

    @abc.abstractmethod
    def task_pools(self, data: Any, evaluation: Any, seed: int) -> TaskPools:
        """The run's training, validation and held-out tasks from the recipe's ``data`` and ``eval``
        sections (:class:`lfo_cli.train.recipe_config.DataSection`, ``EvalSection``), ``seed`` the run's."""

    # ---- playing ----
    @abc.abstractmethod
    def env_factory(self, *, seed: int, max_turns: int, options: Mapping[str, Any]) -> Callable[[], Any]:
        """TRL's ``environment_factory``: a callable that builds one environment per rollout slot, each
        with a ``transitions`` list; ``options`` the reward options the recipe sets (its :attr:`rewards` fields
        off their defaults)."""

    @abc.abstractmethod
    def episode(self, max_turns: int) -> EpisodeRunner:
        """An episode runner for evaluation (success only: no reward shaping)."""

    # ---- measuring ----
    def semantic_probe(self, tasks: Sequence[Any], seed: int) -> SemanticProbe | None:
        """The world model's probe on the validation ``tasks`` (`val/wm_semantic_acc`); None (the default): the
        world has none."""
        return None

    def episode_metrics(self, episodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """The world's own measures over evaluated episodes (each an ``evaluate_agent`` episode record),
        as metric names without a prefix; empty by default."""
        return {}

    @classmethod
    def episode_skills(cls, episode: Mapping[str, Any]) -> dict[str, bool]:
        """Which of :attr:`paired_skills` one evaluated episode (as its validation file keeps it) showed; a skill
        the record cannot tell is left out (then no paired comparison of it is made)."""
        return {}


class Teacher:
    """What a warm start (`kind: warmstart`) and the `micro` tokenizer need: a teacher whose rollouts a model
    imitates, and the world's text. A world without one trains from a model given as is (`model.warmstart: null`)."""

    teacher_policies: ClassVar[tuple[str, ...]] = ()  # the warm start's `data.policy` values (none: no teacher)
    # The keys the world adds to a warm start's `data` section (its `noise` field a TeacherNoise subclass when the
    # teacher errs in more ways than epsilon): lfo_cli.worlds.settings.
    teacher_data: ClassVar[type | None] = None
    # Warm-start cache keys (lfo_cli.models.warmstart_cache): teacher options the world added after warm starts
    # were cached, at the value that reproduces the old data (left out of the key at that value), and options its
    # warm starts' keys held at a fixed value before the world owned its settings (kept in the key).
    warmstart_key_neutral: ClassVar[Mapping[str, Any]] = {}
    warmstart_key_fixed: ClassVar[Mapping[str, Any]] = {}
    # Strings the `micro` tokenizer holds as one token each, besides the tools' boilerplate (e.g. JSON keys with
    # their value opener, so a value is copied by looking up its key).
    tokenizer_tokens: ClassVar[tuple[str, ...]] = ()
    # What the world's text depends on (its generator's version): part of the `micro` model's cache key.
    corpus_version: ClassVar[Any] = None

    @classmethod
    def data_identity(cls, data_dir: str | Path) -> Any:
        """What identifies the world's files in ``data_dir`` (JSON; None: none there): a warm start's cache key
        holds it, so a warm start is rebuilt for another world and reused for the same one anywhere. Default:
        the world's :meth:`~Trainable.fingerprint`."""
        return cls.fingerprint(data_dir)  # type: ignore[attr-defined]  (World's)

    def sft_tasks(self, data: Any, seed: int) -> tuple[World, list]:
        """The world and tasks a warm start's teacher plays, from the warm-start recipe's ``data`` section
        (:class:`lfo_cli.models.warmstart_config.DataSection`) and its seed."""
        raise _missing(self, "teacher (World.sft_tasks, teacher_rollouts)", "train from a model of your own (model.warmstart: null)")

    def teacher_rollouts(self, tasks: Sequence[Any], *, policy: str, noise: Any = None, seed: int = 0,
                         rollouts_per_task: int = 1, settings: Any = None) -> list[dict]:
        """The teacher's rollouts of ``tasks``, reproducible from ``seed`` (``settings``: the warm start's data
        section, where the world reads its own :attr:`teacher_data` options; None: their defaults): per rollout a
        dict with ``task_id``, ``difficulty``, ``policy``, ``reward``, ``info`` (``slipped_steps``/``random_steps``:
        turns not to imitate), ``prompt`` (the task as the user turn) and ``transitions`` (dicts with ``action``
        {``tool``, ``args``} and ``observation``). ``lfo_cli.models`` renders them as conversations."""
        raise _missing(self, "teacher (World.sft_tasks, teacher_rollouts)", "train from a model of your own (model.warmstart: null)")

    @classmethod
    def corpus(cls, spec: Any) -> Iterator[dict | str]:
        """The text the `micro` tokenizer is trained on: rollout dicts (as :meth:`teacher_rollouts`'s, rendered
        through the chat template with the tools) and plain strings (world-model examples, ...); ``spec`` is
        the tokenizer's :class:`lfo_cli.models.micro.TokenizerSpec` (its corpus size)."""
        raise _missing(cls, "corpus for the micro tokenizer (World.corpus)", "name a model of your own (model.name)")


class Inspectable:
    """What `lfo inspect-wm` needs to compare a world model's predictions with the world's replies. Each has a
    default: a reply is the text before :attr:`~Trainable.reply_stop`, judged the same when equal up to spacing."""

    def inspection_calls(self, split: str, episodes: int, seed: int) -> list:
        """Logged calls to the predicted tools from ``episodes`` noisy teacher episodes on ``split``: what
        ``lfo inspect-wm`` compares the world model's predictions with (replies of every kind)."""
        raise _missing(self, "calls to inspect (World.inspection_calls)", "lfo inspect-wm needs them")

    def inspection_probes(self, count: int, seed: int) -> list[tuple[Any, str, str]] | None:
        """``lfo inspect-wm --probe``: the world's synthetic probes (on ``count`` task sources per split), each (a
        logged call, the reply category a right prediction has, its split); None (the default): the world has none."""
        return None

    @classmethod
    def reply_text(cls, generated: str) -> str:
        """The reply inside a generated world-model target (its markers removed)."""
        return generated.split(cls.reply_stop)[0]  # type: ignore[attr-defined]  (World's)

    @classmethod
    def same_reply(cls, predicted: str, actual: str) -> bool:
        """Does a generated target mean the actual reply (the world's judge: `val/wm_semantic_acc`)?"""
        return " ".join(cls.reply_text(predicted).split()) == " ".join(actual.split())

    @classmethod
    def reply_category(cls, reply: str) -> str | None:
        """The kind of a reply, for per-category measures (None: the world has no categories)."""
        return None

    @classmethod
    def transition_category(cls, transition: Any) -> str:
        """The kind of a logged call's reply (default: :meth:`reply_category` of its observation)."""
        observation = transition["observation"] if isinstance(transition, Mapping) else transition.observation
        return cls.reply_category(observation) or "all"


@dataclass(frozen=True)
class StudyWords:
    """How `lfo report`'s observation-study section (runs validated at difficulty 2, a baseline among them) words
    a world: what its difficulty 2 asks of a policy, and which of the world's own validation measures it tabulates,
    start -> end, beside held-out d1 and d2."""

    d2: str = ""  # what difficulty 2 asks, in its headings' parentheses ("" for none)
    d2_subject: str = "d2"  # a verdict's words: "learns <d2_subject> faster than the baseline"
    d2_gloss: str = ""  # the summary's: "d2 (<d2_gloss>) was learned faster ..." ("" for none)
    training: str = "training tasks"  # a declared study's heading: "<Training>' difficulty 2"
    validation: str = "validation tasks of the training distribution"  # what the curves' success is measured on
    specificity: str = ""  # the table's heading: "Thresholds, <specificity> and the held-out control"
    columns: tuple[tuple[str, str], ...] = ()  # the world's measures in that table: (validation key, column label)
    note: str = ""  # after "Start -> end means over seeds.": how to read those columns and held-out d2
    semantic_probe: str = ("Semantic accuracy of the world model's generated replies (its semantic probe) at each "
                           "evaluation")
    replies: str = "the tools' replies"  # what the world model's token accuracy is measured on


class Described:
    """How `lfo report` words a world's results (each with a default)."""

    # How `lfo report` names the held-out split's tasks: "Transfer to <heldout_label>", "<Heldout_label>
    # (<heldout_what>) as evaluated ...", then the note (a sentence on what solving them takes, or "").
    heldout_label: ClassVar[str] = "held-out tasks"
    heldout_what: ClassVar[str] = "tasks of the world's held-out split, never trained on"
    heldout_note: ClassVar[str] = ""
    # False where every task has one level (TextWorld's games): `lfo report` then shows no per-difficulty
    # breakdown, which would only repeat the overall success.
    difficulty_levels: ClassVar[bool] = True
    # What `lfo report` suggests running next: the grid (recipes/grids/) that trains this world's conditions over
    # several seeds, paired (None: no such grid), and what makes the world easier when the policy got no reward
    # variance to learn from.
    study_grid: ClassVar[str | None] = None
    easier_regime: ClassVar[str] = "easier tasks or a longer warm start"
    # The world's own validation measures (names :meth:`Trainable.episode_metrics` returns) that the report's
    # behaviour table shows, in this order, before every world's: invalid calls, the valid-call rate and turns.
    behaviour_metrics: ClassVar[tuple[str, ...]] = ()
    study_words: ClassVar[StudyWords] = StudyWords()


class Generated:
    """What `lfo gen-env` needs: the world's options and its generator (and, optionally, a check of a world). A
    world whose files come from elsewhere omits it."""

    # A dataclass of the world's `lfo gen-env` options: a field `num_tasks` is `--num-tasks` (its metadata help);
    # a built-in world's is also named in lfo_cli.worlds.registry.BUILTIN, so listing it imports nothing heavy.
    generation: ClassVar[type | None] = None
    default_dir: ClassVar[str] = "data"  # where `lfo gen-env` writes without --output-dir

    @classmethod
    def generate(cls, output_dir: Path, options: Any, *, seed: int, force: bool,
                 progress: Callable[..., Any] | None = None) -> dict:
        """Write a world to ``output_dir`` (refusing to overwrite one unless ``force``): what was written, as JSON,
        with ``summary`` lines for a person. ``progress(label, total, unit)`` returns a callable taking the units
        done so far."""
        raise _missing(cls, "generator (World.generate)", "write its files with its own tools")

    @classmethod
    def check(cls, data_dir: Path, options: Any, *, seed: int, progress: Callable[..., Any] | None = None) -> dict:
        """``lfo gen-env --check``: reference policies on a world; ``checks`` ({name: passed}), optionally ``rows``
        (per policy and difficulty: ``episodes``, ``success_rate`` and the world's measures) and ``summary``."""
        raise _missing(cls, "check (World.check)", "")


class World(Trainable, Teacher, Inspectable, Described, Generated):
    """One world of one kind, by role: :class:`Trainable` (what `lfo train` needs: the abstract methods),
    :class:`Teacher` (warm starts, the `micro` tokenizer), :class:`Inspectable` (`lfo inspect-wm`),
    :class:`Described` (`lfo report`'s wording) and :class:`Generated` (`lfo gen-env`). A world implements the
    first and whatever of the others it offers; what it omits is one error naming the missing part when a command
    needs it."""


def _missing(world: Any, what: str, instead: str) -> Exception:
    kind = getattr(world, "kind", type(world).__name__)
    return LfoError(f"the {kind} world has no {what}" + (f"; {instead}" if instead else ""))
