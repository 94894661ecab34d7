"""The single-step tasks (PatternEcho, SequenceNext, Conditional): a reactive policy can solve them.

They are there to reproduce the design's results; each class docstring says why the observation holds the answer.
"""

from __future__ import annotations

import torch

from lfo_cli.wmil.task_base import Task


class PatternEcho(Task):
    """State shows a target symbol; the correct action is the same symbol (reward 1, else 0).

    Single step (T = 1). A reactive policy solves it: the observation contains the answer. This is
    the design's locked MVP task; random success is ``1 / (number of targets)``.
    """

    name = "pattern_echo"
    description = "The state shows a target symbol; the correct action equals the target."

    def _fields(self):
        return [("target", self.num_actions)]

    def _obs_slots(self):
        return [("target", self.num_actions)]

    def target_high(self, level: int) -> int:
        hi = self.levels[level]["target_range"][1]
        return self.num_actions - 1 if level == self.num_levels - 1 else min(hi, self.num_actions - 1)

    def sample(self, n, level, gen):
        return torch.randint(0, self.target_high(level) + 1, (n, 1), generator=gen)

    def observe(self, state, t):
        return state[:, :1]

    def instance_ok(self, rows, level):
        return rows[:, 0] <= self.target_high(level)

    def transition(self, state, action, t):
        return state.clone(), (action == state[:, 0]).float()

    def oracle_action(self, state, t):
        return state[:, 0].clone()


class SequenceNext(Task):
    """State shows 2-3 terms of a sequence modulo A; the correct action is the next term.

    Level 0: two terms, step +1; level 1: three terms, step +1; level 2: three terms, arithmetic with
    a random step in 1..A-1. Single step; a reactive policy can solve it (the terms determine the
    answer), so it is the design's second ablation, not a prediction task.
    """

    name = "sequence_next"
    description = "The state shows the last terms of an arithmetic sequence modulo A; the correct action is the next term."

    def _fields(self):
        a = self.num_actions
        return [("start", a), ("step", a), ("length", 4)]

    def _obs_slots(self):
        return [(f"term{i}", self.num_actions + 1) for i in range(3)]  # value A = blank

    def sample(self, n, level, gen):
        cfg, a = self.levels[level], self.num_actions
        start = torch.randint(0, a, (n,), generator=gen)
        if cfg["pattern"] == "increment":
            step = torch.ones(n, dtype=torch.long)
        else:
            step = torch.randint(1, a, (n,), generator=gen)
        length = torch.full((n,), cfg["sequence_length"], dtype=torch.long)
        return torch.stack([start, step, length], dim=1)

    def instance_ok(self, rows, level):
        cfg = self.levels[level]
        ok = rows[:, 2] == cfg["sequence_length"]
        return ok & ((rows[:, 1] == 1) if cfg["pattern"] == "increment" else (rows[:, 1] >= 1))

    def terms(self, state):
        a = self.num_actions
        start, step, length = state[:, 0], state[:, 1], state[:, 2]
        slots = []
        for i in range(3):  # right-aligned: the last slot is always the last shown term
            k = i - (3 - length)  # index of the term in slot i
            val = (start + k.clamp(min=0) * step) % a
            slots.append(torch.where(k >= 0, val, torch.full_like(val, a)))
        return torch.stack(slots, dim=1)

    def observe(self, state, t):
        return self.terms(state)

    def answer(self, state):
        return (state[:, 0] + state[:, 2] * state[:, 1]) % self.num_actions

    def transition(self, state, action, t):
        return state.clone(), (action == self.answer(state)).float()

    def oracle_action(self, state, t):
        return self.answer(state)

    def attributes(self, state, t):
        return {"last_term": self.terms(state)[:, 2], "step": state[:, 1], "answer": self.answer(state)}


class Conditional(Task):
    """State shows shape, colour and size bits plus the active rule; the action follows the rule.

    With ``h = max(1, A // 2)`` and ``q = max(1, A // 4)``: 1 condition -> ``shape * h``;
    2 conditions -> ``+ colour * q`` ("red adds"); 3 nested -> ``+ colour * size`` (size only matters
    when red); everything modulo A. Single step and fully observed: a reactive policy can solve it.
    """

    name = "conditional"
    description = "The state shows shape, color, size and the rule id; the correct action follows the conditional rule."

    def _fields(self):
        return [("shape", 2), ("color", 2), ("size", 2), ("num_conditions", 4)]

    def _obs_slots(self):
        return [("shape", 2), ("color", 2), ("size", 2), ("num_conditions", 4)]

    def sample(self, n, level, gen):
        bits = torch.randint(0, 2, (n, 3), generator=gen)
        k = torch.full((n, 1), self.levels[level]["num_conditions"], dtype=torch.long)
        return torch.cat([bits, k], dim=1)

    def observe(self, state, t):
        return state

    def instance_ok(self, rows, level):
        return rows[:, 3] == self.levels[level]["num_conditions"]

    def answer(self, state):
        a = self.num_actions
        h, q = max(1, a // 2), max(1, a // 4)
        shape, color, size, k = state.unbind(1)
        out = shape * h + (k >= 2).long() * color * q + (k >= 3).long() * color * size
        return out % a

    def transition(self, state, action, t):
        return state.clone(), (action == self.answer(state)).float()

    def oracle_action(self, state, t):
        return self.answer(state)

    def attributes(self, state, t):
        return {"shape": state[:, 0], "color": state[:, 1], "size": state[:, 2], "answer": self.answer(state)}
