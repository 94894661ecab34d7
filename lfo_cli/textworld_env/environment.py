"""The TRL-ready TextWorld environment: ``GRPOTrainer(environment_factory=TextWorldFactory(games))``.

TRL exposes every public method except ``reset`` and ``get_reward`` as a tool, so the class has one: ``act``,
which takes the command text (TextWorld's parser reads free text; the admissible commands are a view, not a
tool). ``reset(**row)`` reads the dataset row's ``task_id`` (a task of the world, :mod:`.world`) or ``game``
(a game seed of the factory's set). Reward and success are separate: ``get_reward`` is the score over the
game's maximum, ``won`` whether the game was won (a cooking game can score points and then be lost, e.g. by
eating an inedible ingredient). ``transitions`` logs every command with what the agent read before it and
the reply: what a world model learns to predict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.textworld_env.games import GameFile, check_story_file, require_textworld
from lfo_cli.textworld_env.rng import preserved_global_rng
from lfo_cli.textworld_env.text import clean

MAX_STEPS = 50
ACT = "act"


@dataclass(frozen=True)
class Transition:
    """One command: what the agent had read (``state``), what it typed, what the game answered."""

    state: str
    action: dict  # {"tool": "act", "args": {"command": ...}}
    observation: str

    def to_dict(self) -> dict:
        return {"state": self.state, "action": self.action, "observation": self.observation}


class TextWorldEnv:
    """A text game: read what happens, type what to do."""

    def __init__(self, games: list[GameFile], *, max_steps: int = MAX_STEPS,
                 tasks: dict[str, GameFile] | None = None) -> None:
        if not games and not tasks:
            raise LfoError("textworld: the environment needs at least one game")
        self._games = {g.seed: g for g in games}
        self._tasks = tasks or {}  # task id -> its game (a world's tasks; their seeds may repeat across splits)
        self._max_steps = max_steps
        self._env = None
        self._state = None
        self._path: Path | None = None
        self.steps = 0
        self.commands: list[str] = []
        self.transitions: list[Transition] = []
        self._last = ""

    # ---- TRL protocol ----
    def reset(self, **kwargs: Any) -> str:
        task_id, seed = kwargs.get("task_id"), kwargs.get("game")
        if task_id is not None:
            if task_id not in self._tasks:
                raise LfoError(f"textworld: unknown task {task_id!r}")
            path = self._tasks[task_id].path
        elif seed in self._games:
            path = self._games[seed].path
        else:
            raise LfoError(f"textworld: the row's 'game' must be one of this set's seeds, got {seed!r}")
        textworld = require_textworld()
        infos = textworld.EnvInfos(admissible_commands=True, policy_commands=True, objective=True, won=True,
                                   lost=True, score=True, max_score=True)
        with preserved_global_rng():
            if self._env is None or self._path != path:
                if self._env is not None:
                    self._env.close()
                check_story_file(path)
                try:
                    self._env = textworld.start(str(path), request_infos=infos)
                except Exception as exc:  # the interpreter's own errors: a missing or corrupt story file
                    raise LfoError(f"textworld: cannot load game {path}: {type(exc).__name__}: {exc}") from None
                self._path = path
            try:
                self._state = self._env.reset()
            except Exception as exc:
                raise LfoError(f"textworld: game {path} does not start: {type(exc).__name__}: {exc}") from None
        self.steps, self.commands, self.transitions = 0, [], []
        self._last = clean(self._state.feedback)
        return self._last

    def get_reward(self) -> float:
        return self.score / self.max_score if self.max_score else 0.0

    def _close(self) -> None:
        """Stop the game's interpreter (a later ``reset`` starts one again). Private: TRL makes every public
        method of an environment a tool."""
        if self._env is not None:
            self._env.close()
        self._env = self._path = self._state = None

    # ---- the tool ----
    def act(self, command: str) -> str:
        """Do something in the game, in a few words: "go north", "take the apple from the counter", "examine cookbook".

        Args:
            command: What to do, as you would type it in a text adventure.

        Returns:
            What happens.
        """
        if self._state is None:
            raise LfoError("textworld: act before reset")
        if self.done:
            return "The game is over."
        with preserved_global_rng():
            self._state, _, _ = self._env.step(str(command))
        self.steps += 1
        self.commands.append(str(command))
        reply = clean(self._state.feedback)
        self.transitions.append(Transition(self._last, {"tool": ACT, "args": {"command": str(command)}}, reply))
        self._last = reply
        return reply

    # ---- read-only views (properties are not tools) ----
    @property
    def score(self) -> float:
        return float(self._state.score) if self._state is not None else 0.0

    @property
    def max_score(self) -> float:
        return float(self._state.max_score) if self._state is not None else 0.0

    @property
    def won(self) -> bool:
        return bool(self._state is not None and self._state.won)

    @property
    def lost(self) -> bool:
        return bool(self._state is not None and self._state.lost)

    @property
    def done(self) -> bool:
        return self.won or self.lost or self.steps >= self._max_steps

    @property
    def admissible_commands(self) -> list[str]:
        return list(self._state.admissible_commands or []) if self._state is not None else []

    @property
    def walkthrough(self) -> list[str]:
        """The gold policy's commands from the current state (TextWorld's ``policy_commands``)."""
        return list(self._state.policy_commands or []) if self._state is not None else []

    @property
    def objective(self) -> str:
        return self._state.objective if self._state is not None else ""


class TextWorldFactory:
    """Callable that builds :class:`TextWorldEnv` instances over one game set (TRL's ``environment_factory``)."""

    def __init__(self, games: list[GameFile], **opts: Any) -> None:
        unknown = set(opts) - {"max_steps", "tasks"}
        if unknown:
            raise LfoError(f"TextWorldFactory: unknown option(s) {sorted(unknown)}; use max_steps, tasks")
        self.games, self.opts = games, opts
        self.instances: list[TextWorldEnv] = []

    def __call__(self) -> TextWorldEnv:
        env = TextWorldEnv(self.games, **self.opts)
        self.instances.append(env)
        return env
