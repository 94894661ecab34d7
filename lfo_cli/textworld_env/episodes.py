"""Reference policies and the episode runner: the gold policy (TextWorld's walkthrough, re-planned from the
current state), a noisy gold policy and a random policy over the admissible commands, played through
:class:`TextWorldEnv` as an agent would play it (the same ``reset``/``act`` calls, the same step limit).
:func:`record` keeps the conversation in the transformers/TRL message format (assistant turns calling the
``act`` tool, tool results), the form a warm start imitates."""

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

    @classmethod
    def of(cls, env: TextWorldEnv, game: int) -> Episode:
        """The episode ``env`` has played so far."""
        return cls(game, env.won, env.lost, env.score, env.max_score, env.steps, tuple(env.commands))


def gold_policy() -> Policy:
    """The first command of TextWorld's walkthrough from the current state (re-planned every step)."""
    return lambda env, observation: (env.walkthrough or ["look"])[0]


def random_policy(seed: int) -> Policy:
    """A uniform draw from the admissible commands, from its own RNG."""
    rng = random.Random(seed)
    return lambda env, observation: rng.choice(env.admissible_commands or ["look"])


def noisy_gold_policy(epsilon: float, seed: int) -> Policy:
    """The gold policy, except that with probability ``epsilon`` a step is a random admissible command: a
    teacher whose detours the walkthrough, re-planned from where they lead, then recovers from."""
    rng = random.Random(seed)
    gold = gold_policy()

    def act(env: TextWorldEnv, observation: str) -> str:
        if rng.random() < epsilon:
            return rng.choice(env.admissible_commands or ["look"])
        return gold(env, observation)

    return act


def play(env: TextWorldEnv, game: int, policy: Policy) -> Episode:
    observation = env.reset(game=game)
    while not env.done:
        observation = env.act(policy(env, observation))
    return Episode.of(env, game)


def record(env: TextWorldEnv, game: int, policy: Policy, system_prompt: str) -> dict:
    """One episode as a conversation: the system prompt, the game's opening as the user turn, then each
    command as an assistant turn calling ``act`` and what happened as its tool result."""
    observation = env.reset(game=game)
    messages: list[dict] = [{"role": "system", "content": system_prompt}, {"role": "user", "content": observation}]
    while not env.done:
        command = policy(env, observation)
        observation = env.act(command)
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": "act", "arguments": {"command": command}}}]})
        messages.append({"role": "tool", "name": "act", "content": observation})
    episode = Episode.of(env, game)
    return {"game": game, "won": episode.won, "reward": episode.reward, "steps": episode.steps, "messages": messages}


def play_all(games: list[GameFile], policy: Policy, *, max_steps: int = 50) -> list[Episode]:
    env = TextWorldEnv(games, max_steps=max_steps)
    return [play(env, g.seed, policy) for g in games]
