"""Reference policies and the episode runner: the gold policy (TextWorld's walkthrough from the state at
reset) and a random policy over the admissible commands, played through :class:`TextWorldEnv` as an
agent would play it (the same ``reset``/``act`` calls, the same step limit)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from lfo_cli.textworld_env.environment import TextWorldEnv
from lfo_cli.textworld_env.games import GameFile

Policy = Callable[[TextWorldEnv, str], str]  # (env, last observation) -> command


@dataclass(frozen=True)
class Episode:
    game: int
    won: bool
    lost: bool
    score: float
    max_score: float
    steps: int
    commands: tuple[str, ...]

    @property
    def reward(self) -> float:
        return self.score / self.max_score if self.max_score else 0.0


def gold_policy() -> Policy:
    """Replays the walkthrough read at reset (a fresh plan per episode)."""
    plan: list[str] = []

    def act(env: TextWorldEnv, observation: str) -> str:
        if env.steps == 0:
            plan[:] = env.walkthrough
        return plan[env.steps] if env.steps < len(plan) else "look"

    return act


def random_policy(seed: int) -> Policy:
    """A uniform draw from the admissible commands, from its own RNG."""
    rng = random.Random(seed)
    return lambda env, observation: rng.choice(env.admissible_commands or ["look"])


def play(env: TextWorldEnv, game: int, policy: Policy) -> Episode:
    observation = env.reset(game=game)
    while not env.done:
        observation = env.act(policy(env, observation))
    return Episode(game, env.won, env.lost, env.score, env.max_score, env.steps, tuple(env.commands))


def play_all(games: list[GameFile], policy: Policy, *, max_steps: int = 50) -> list[Episode]:
    env = TextWorldEnv(games, max_steps=max_steps)
    return [play(env, g.seed, policy) for g in games]
