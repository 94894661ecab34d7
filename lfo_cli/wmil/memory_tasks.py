"""The multi-step tasks (DelayedRecall, KeyDoor): built so that a reactive policy provably cannot solve them.

The reason is written in each class docstring and checked empirically by ``--context-window 1`` runs.
"""

from __future__ import annotations

import torch

from lfo_cli.wmil.task_base import Task


class DelayedRecall(Task):
    """A cue symbol is shown at t = 0 and hidden afterwards; at t = delay the query flag appears and
    the correct action is the cue (reward 1 only then). Episode length ``delay + 1``.

    Why a reactive policy cannot solve it: at the query step the observation is identical for every
    cue (cue slot blank, phase = query, previous-action echo of the agent's own action), so any
    policy that sees only the current observation answers every cue the same way and succeeds with
    probability at most ``1 / A``. Remembering the cue across the delay is required. The world-model
    target is informative too: the next observation after the query carries the reward bit, which
    can only be predicted by a model that remembers the cue.
    """

    name = "delayed_recall"
    description = ("A cue symbol is visible only at t=0; at the query step (t=delay) the correct action equals "
                   "the cue. Reward 1 only for the correct action at the query step.")
    reactive_solvable = False

    def _fields(self):
        return [("cue", self.num_actions), ("delay", 8)]

    def _obs_slots(self):
        # phase: 0 cue shown, 1 waiting, 2 query, 3 after the query (terminal observation)
        return [("cue_view", self.num_actions + 1), ("phase", 4)]

    def horizon(self, level):
        return self.levels[level]["delay"] + 1

    def sample(self, n, level, gen):
        cue = torch.randint(0, self.num_actions, (n,), generator=gen)
        return torch.stack([cue, torch.full((n,), self.levels[level]["delay"], dtype=torch.long)], dim=1)

    def instance_ok(self, rows, level):
        return rows[:, 1] == self.levels[level]["delay"]

    def observe(self, state, t):
        cue, delay = state[:, 0], state[:, 1]
        view = cue if t == 0 else torch.full_like(cue, self.num_actions)
        phase = torch.where(delay == t, 2, torch.where(delay < t, 3, 1 if t > 0 else 0))
        return torch.stack([view, phase.long()], dim=1)

    def transition(self, state, action, t):
        reward = ((state[:, 1] == t) & (action == state[:, 0])).float()
        return state.clone(), reward

    def oracle_action(self, state, t):
        return torch.where(state[:, 1] == t, state[:, 0], torch.full_like(state[:, 0], -1))


class KeyDoor(Task):
    """A 1-D corridor of length N (level 0/1/2: 5/7/9). The key lies at one end and the door at the
    other, side drawn at random; the agent starts in the middle and sees ONLY the content of its own
    cell (empty / key / closed door / open door) plus the feedback slots. Stepping onto the key picks
    it up; stepping onto the door while holding the key opens it: reward 1, success. The episode
    still runs to the time limit (3N steps). Action symbols have effects the agent must learn: each
    symbol is left, right or stay through a fixed scrambled table (``effects``).

    Why a reactive policy cannot solve it: almost every cell looks "empty", so a policy that sees
    only the current observation uses the same action distribution at the start, on the way to the
    key and on the way back to the door; it cannot know which end it came from or whether it holds
    the key, and a deterministic reactive policy walks into a wall and stays there. Success needs
    memory (which way did I go, did I pass the key) -- path integration that the world-model head
    must also learn to predict the next cell content.
    """

    name = "key_door"
    description = ("1-D corridor; the key is at one end and the door at the other. Actions move left, right or "
                   "stay. Stepping on the key picks it up; stepping on the door with the key opens it (reward 1).")
    reactive_solvable = False
    LEFT, RIGHT, STAY = 0, 1, 2
    EFFECT_TABLE_SEED = 20260101  # fixed: the symbol -> effect table is part of the task, not of the run

    def __init__(self, num_actions: int = 8):
        perm = torch.randperm(num_actions, generator=torch.Generator().manual_seed(self.EFFECT_TABLE_SEED))
        self.effects = perm % 3  # symbol -> 0 left / 1 right / 2 stay (both moves always exist)
        super().__init__(num_actions)

    def _fields(self):
        n = max(cfg["corridor_length"] for cfg in self.levels.values())
        return [("pos", n), ("key_side", 2), ("has_key", 2), ("door_open", 2), ("length", n + 1)]

    def _obs_slots(self):
        return [("content", 4)]  # 0 empty, 1 key, 2 closed door, 3 open door

    def horizon(self, level):
        return 3 * self.levels[level]["corridor_length"]

    def sample(self, n, level, gen):
        length = self.levels[level]["corridor_length"]
        side = torch.randint(0, 2, (n,), generator=gen)
        z = torch.zeros(n, dtype=torch.long)
        return torch.stack([z + length // 2, side, z, z, z + length], dim=1)

    def instance_ok(self, rows, level):
        length = self.levels[level]["corridor_length"]
        return (rows[:, 4] == length) & (rows[:, 0] == length // 2) & (rows[:, 2] == 0) & (rows[:, 3] == 0)

    @staticmethod
    def _cells(state):
        length = state[:, 4]
        key_cell = torch.where(state[:, 1] == 0, 0, length - 1)
        door_cell = length - 1 - key_cell
        return key_cell, door_cell

    def observe(self, state, t):
        pos, has_key, door_open = state[:, 0], state[:, 2], state[:, 3]
        key_cell, door_cell = self._cells(state)
        content = torch.zeros_like(pos)
        content = torch.where((pos == key_cell) & (has_key == 0), 1, content)
        content = torch.where(pos == door_cell, 2 + door_open, content)
        return content.view(-1, 1)

    def transition(self, state, action, t):
        eff = self.effects[action]
        move = torch.where(eff == self.LEFT, -1, torch.where(eff == self.RIGHT, 1, 0))
        pos = torch.minimum(torch.clamp(state[:, 0] + move, min=0), state[:, 4] - 1)
        key_cell, door_cell = self._cells(state)
        has_key = state[:, 2] | (pos == key_cell).long()
        opened = (pos == door_cell) & (has_key == 1) & (state[:, 3] == 0)
        nxt = state.clone()
        nxt[:, 0], nxt[:, 2], nxt[:, 3] = pos, has_key, state[:, 3] | opened.long()
        return nxt, opened.float()

    def oracle_action(self, state, t):
        key_cell, door_cell = self._cells(state)
        goal = torch.where(state[:, 2] == 1, door_cell, key_cell)
        want = torch.where(goal < state[:, 0], self.LEFT, self.RIGHT)
        want = torch.where(state[:, 3] == 1, self.STAY if (self.effects == self.STAY).any() else self.LEFT, want)
        symbol_for = torch.stack([(self.effects == e).long().argmax() for e in range(3)])
        return symbol_for[want]

    def attributes(self, state, t):
        return {"pos": state[:, 0], "key_side": state[:, 1], "has_key": state[:, 2]}
