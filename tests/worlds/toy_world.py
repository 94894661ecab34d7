"""A world written outside lfo, as a plugin author would: the agent must say a task's word with one tool.

Its files are one ``words.json``; its tasks are ``say-<word>``; the reply to a wrong word names the right
one's first letter, so a world model has something to predict. Used by tests/worlds to show that training,
validation and the world model's probe reach a world only through :class:`lfo_cli.worlds.World`, and that a
world implements only its roles: :class:`SayWorld` training's alone (:class:`lfo_cli.worlds.base.Trainable`),
:class:`TeachingSayWorld` a teacher for warm starts too; neither a micro tokenizer corpus nor inspect-wm calls,
and the report's default wording.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.worlds import SemanticProbe, TaskPools, World

FILE = "words.json"


@dataclass(frozen=True)
class Task:
    task_id: str
    difficulty: int
    word: str


@dataclass
class Transition:
    action: dict
    observation: str


class Game:
    """One task at a time (the episode runner and, through :class:`SayEnv`, TRL's environment)."""

    def __init__(self, tasks: dict[str, Task], max_turns: int = 4) -> None:
        self.tasks, self.max_turns = tasks, max_turns
        self.task: Task | None = None
        self.transitions: list[Transition] = []
        self.success = False

    def reset(self, task: Task | str, rollout_seed: int = 0) -> str:
        self.task = self.tasks[task] if isinstance(task, str) else task
        self.transitions, self.success = [], False
        return f"Say the word that starts with {self.task.word[0]!r} and has {len(self.task.word)} letters."

    def step(self, tool_name: Any, args: Any = None) -> str:
        word = str((args or {}).get("word", "")) if tool_name == "say" else ""
        self.success = self.success or word == self.task.word
        reply = "Correct." if self.success else f"Wrong: it starts with {self.task.word[0]}."
        self.transitions.append(Transition({"tool": str(tool_name), "args": args or {}}, reply))
        return reply

    @property
    def done(self) -> bool:
        return self.success or len(self.transitions) >= self.max_turns

    def info(self) -> dict:
        return {"success": self.success, "turns": len(self.transitions), "calls": len(self.transitions)}


class SayEnv:
    """TRL's environment: one tool."""

    def __init__(self, tasks: dict[str, Task], max_turns: int) -> None:
        self._game = Game(tasks, max_turns)

    def reset(self, **row: Any) -> str:
        return self._game.reset(row["task_id"])

    def get_reward(self) -> float:
        return float(self._game.success)

    def say(self, word: str) -> str:
        """Say a word.

        Args:
            word: The word.

        Returns:
            Whether it was the right one.
        """
        return self._game.step("say", {"word": word})

    @property
    def transitions(self) -> list[Transition]:
        return self._game.transitions


class SayWorld(World):
    kind = "say"
    tools = SayEnv
    predict_tools = {"say": ("say",)}
    reply_stop = "</reply>"
    system_prompt = "Say the word."
    episode_fields = ("calls",)
    splits = ("train", "val")
    heldout_split = "val"

    def __init__(self, words: list[str], seed: int = 0) -> None:
        self.words, self._seed = words, seed
        self.by_id = {f"say-{w}": Task(f"say-{w}", 1 + i % 2, w) for i, w in enumerate(words)}

    @classmethod
    def load(cls, data_dir) -> SayWorld:
        path = Path(data_dir) / FILE
        if not path.is_file():
            raise LfoError(f"{data_dir}: no {FILE}")
        return cls(json.loads(path.read_text()))

    @property
    def seed(self) -> int:
        return self._seed

    @classmethod
    def fingerprint(cls, data_dir) -> str | None:
        path = Path(data_dir) / FILE
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else None

    @classmethod
    def world_model_example(cls, transition) -> tuple[str, tuple[int, int]]:
        prompt = f"<said>{transition.action['args'].get('word', '')}</said><reply>"
        text = prompt + transition.observation + cls.reply_stop
        return text, (len(prompt), len(text))

    def tasks(self, split: str) -> list:
        tasks = list(self.by_id.values())
        return tasks[:-2] if split == "train" else tasks[-2:]

    def task_pools(self, data, evaluation, seed: int) -> TaskPools:
        return TaskPools(train=self.tasks("train"), validation=self.tasks("val")[: evaluation.num_tasks],
                         heldout=self.tasks("train")[: evaluation.heldout_tasks])

    def env_factory(self, *, seed: int, max_turns: int, options):
        return lambda: SayEnv(self.by_id, max_turns)

    def episode(self, max_turns: int) -> Game:
        return Game(self.by_id, max_turns)

    def semantic_probe(self, tasks, seed: int) -> SemanticProbe | None:
        inputs = ["<said>x</said><reply>" for _ in tasks]
        replies = [f"Wrong: it starts with {t.word[0]}." for t in tasks]
        return SemanticProbe(inputs=inputs, replies=replies, judge=lambda guess, actual: guess.startswith(actual),
                             stop=self.reply_stop)

    def episode_metrics(self, episodes) -> dict[str, float]:
        return {"said_anything": sum(e.get("calls", 0) > 0 for e in episodes) / len(episodes)} if episodes else {}


class TeachingSayWorld(SayWorld):
    """The say world with a teacher (the Teacher role), for warm starts; its data_identity is the default, the
    world's fingerprint."""

    teacher_policies = ("gold",)

    def sft_tasks(self, data, seed: int):
        return self, self.tasks("train")

    def teacher_rollouts(self, tasks, *, policy, noise=None, seed=0, rollouts_per_task=1, settings=None) -> list[dict]:
        out = []
        for task in tasks:
            for _ in range(rollouts_per_task):
                game = self.episode(4)
                prompt = game.reset(task)
                game.step("say", {"word": task.word})
                out.append({"task_id": task.task_id, "difficulty": task.difficulty, "policy": policy, "reward": 1.0,
                            "info": {}, "prompt": prompt,
                            "transitions": [{"action": t.action, "observation": t.observation} for t in game.transitions]})
        return out
