"""World-model examples -> padded batches of token rows, planned to run the fewest tokens.

An example is ``(text, (start, end))``: the design's template (state, action, ``<|predict_csr|>``) followed
by the target ``<|csr|>…<|/csr|>``, and the character span of the target. The prefix and the target are
tokenised separately and concatenated, so the labels cover exactly the target's tokens (no token
straddles the boundary). Over budget, the prefix keeps at least a quarter of it and is truncated from the
left (the oldest history goes first); the reply keeps the rest. Rows are grouped by length
(:func:`build_length_batches`) or, where examples start alike, into a :class:`SharedPrefixBatch` whose
common starts run once (:func:`build_wm_batches`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

IGNORE_INDEX = -100
# One more forward + backward costs about as much as this many padded tokens: `micro` on 2 CPU threads,
# ~86 (separate) to ~126 (stacked; python benchmarks/wm_forward_cost.py); on real plans 128 ran the term
# 2-5% faster than 64 and 512 slower (docs/results.md).
FORWARD_COST_TOKENS = 128


@dataclass
class WMBatch:
    input_ids: torch.Tensor  # (N, L), right-padded
    attention_mask: torch.Tensor  # (N, L)
    labels: torch.Tensor  # (N, L): target token ids on reply tokens, IGNORE_INDEX elsewhere

    @property
    def num_target_tokens(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())

    def to(self, device) -> WMBatch:
        return WMBatch(self.input_ids.to(device), self.attention_mask.to(device), self.labels.to(device))


def tokenize_example(tokenizer, text: str, span: tuple[int, int], max_length: int) -> tuple[list[int], list[int]]:
    start, end = span
    if not (0 <= start <= end <= len(text)):
        raise ValueError(f"target span {span} outside text of length {len(text)}")
    prefix = tokenizer(text[:start], add_special_tokens=False)["input_ids"]
    target = tokenizer(text[start:end], add_special_tokens=False)["input_ids"]
    if len(prefix) + len(target) > max_length:
        # The prefix keeps at least a quarter of the budget (context to predict from); the reply gets the
        # rest; the prefix loses its oldest tokens first.
        target = target[: max_length - min(len(prefix), max_length // 4)]
        keep = max_length - len(target)
        prefix = prefix[len(prefix) - keep :] if keep else []
    ids = prefix + target
    labels = [IGNORE_INDEX] * len(prefix) + list(target)
    return ids, labels


def build_batch(tokenizer, examples: Sequence[tuple[str, tuple[int, int]]], max_length: int) -> WMBatch:
    return _pad([tokenize_example(tokenizer, text, span, max_length) for text, span in examples], tokenizer)


def build_length_batches(tokenizer, examples: Sequence[tuple[str, tuple[int, int]]], max_length: int,
                         batch_tokens: int, forward_cost: int = FORWARD_COST_TOKENS) -> tuple[list[WMBatch], list[int]]:
    """The examples as padded batches of similar length, each of at most ``batch_tokens`` padded tokens.

    One padded batch pads every example to the longest; world-model examples vary from a first call's
    short state to a long history (on the default world ~37% of such a batch was padding). Sorted by
    length, consecutive examples are grouped so that padded tokens plus ``forward_cost`` per forward
    are fewest, within ``rows x longest <= batch_tokens`` (a longer example gets a batch of its own).
    ``batch_tokens <= 0`` gives one batch. Returns the batches and ``order``: the example index of each
    row, batch after batch.
    """
    rows = [tokenize_example(tokenizer, text, span, max_length) for text, span in examples]
    return _plain_plan(rows, tokenizer, batch_tokens, forward_cost)


@dataclass
class SharedPrefixBatch:
    """Examples whose token rows start alike, computed once per shared start (a *prefix*).

    The rollouts of one prompt's group share the task and usually the directory the search returned,
    so their world-model examples share a long start. Each prefix runs through the decoder once
    (``prefixes``: right-padded batches); each example then runs only its remaining tokens (its
    *suffix*), attending to its prefix's keys and values through the KV cache, at the positions that
    follow it. The reply tokens are always in the suffix. Same loss and gradients as the full rows
    (with LoRA dropout off; with it on, a prefix's tokens share one dropout mask).
    """

    prefixes: list[tuple[torch.Tensor, torch.Tensor]]  # (ids, attention mask) per prefix forward, (U_b, P_b)
    prefix_lengths: torch.Tensor  # (U,) real tokens of each prefix, in the order of `prefixes`' rows
    suffixes: list[WMBatch]  # the examples' remaining tokens, labels aligned with them
    units: list[torch.Tensor]  # per suffix batch: (N_b,) the prefix of each row

    @property
    def num_target_tokens(self) -> int:
        return sum(b.num_target_tokens for b in self.suffixes)

    @property
    def num_rows(self) -> int:
        return sum(b.input_ids.size(0) for b in self.suffixes)

    @property
    def num_tokens(self) -> int:
        """Padded tokens the decoder runs (prefixes once, then suffixes)."""
        return sum(ids.numel() for ids, _ in self.prefixes) + sum(b.input_ids.numel() for b in self.suffixes)

    def to(self, device) -> SharedPrefixBatch:
        return SharedPrefixBatch([(i.to(device), m.to(device)) for i, m in self.prefixes],
                                 self.prefix_lengths.to(device), [b.to(device) for b in self.suffixes],
                                 [u.to(device) for u in self.units])


def build_wm_batches(tokenizer, examples: Sequence[tuple[str, tuple[int, int]]], max_length: int,
                     batch_tokens: int, share_prefix: bool = False, min_shared: int = 16,
                     forward_cost: int = FORWARD_COST_TOKENS) -> tuple[list[WMBatch | SharedPrefixBatch], list[int]]:
    """:func:`build_length_batches`, or (``share_prefix``) one :class:`SharedPrefixBatch` for the
    examples that share a start of at least ``min_shared`` tokens with others plus length batches for
    the rest, whichever plan runs fewer padded tokens plus ``forward_cost`` per forward.

    Which examples share what: the rows sorted lexicographically, then split into runs that maximise
    the tokens saved, sum over runs of (size - 1) x (the run's common prefix), by dynamic programming
    over the sorted order; a run's prefix stops before the token that predicts its first reply token.
    Runs of one example go to the length batches. Returns the batches and ``order``, the example index
    of each output row (shared rows first, batch after batch).
    """
    rows = [tokenize_example(tokenizer, text, span, max_length) for text, span in examples]
    plain = _plain_plan(rows, tokenizer, batch_tokens, forward_cost)
    runs = _shared_runs(rows, min_shared) if share_prefix and batch_tokens > 0 else []
    if not runs:
        return plain
    shared_ids = {i for run, _ in runs for i in run}
    rest = [i for i in range(len(rows)) if i not in shared_ids]
    batch, order = _shared_prefix_batch(rows, runs, tokenizer, batch_tokens, forward_cost)
    batches: list[WMBatch | SharedPrefixBatch] = [batch]
    if rest:
        more, rest_order = _length_batches([rows[i] for i in rest], tokenizer, batch_tokens, forward_cost)
        batches += more
        order += [rest[i] for i in rest_order]
    return min((batches, order), plain, key=lambda plan: plan_cost(plan[0], forward_cost))


def shared_token_floor(tokenizer, examples: Sequence[tuple[str, tuple[int, int]]], max_length: int) -> int:
    """Tokens the decoder must run if every shared start ran once and nothing were padded: the distinct
    prefixes of the examples' contexts (a trie's nodes) plus each example's own tokens from the one that
    predicts its first reply token on. A lower bound for any prefix-sharing plan (what
    :func:`build_wm_batches` runs is this plus padding plus the starts it does not share)."""
    rows = [tokenize_example(tokenizer, text, span, max_length) for text, span in examples]
    cuts = [max(_target_start(labels) - 1, 0) for _, labels in rows]  # where each example's context ends
    contexts = sorted(ids[:cut] for (ids, _), cut in zip(rows, cuts, strict=True))
    nodes = sum(len(c) - len(os.path.commonprefix([c, prev])) for prev, c in zip([[], *contexts], contexts, strict=False))
    return nodes + sum(len(ids) - cut for (ids, _), cut in zip(rows, cuts, strict=True))


def plan_cost(batches: Sequence[WMBatch | SharedPrefixBatch], forward_cost: int = FORWARD_COST_TOKENS) -> int:
    """Padded tokens the decoder runs plus ``forward_cost`` per forward (what the batch builders minimise)."""
    tokens = sum(b.num_tokens if isinstance(b, SharedPrefixBatch) else b.input_ids.numel() for b in batches)
    forwards = sum(len(b.prefixes) + len(b.suffixes) if isinstance(b, SharedPrefixBatch) else 1 for b in batches)
    return tokens + forward_cost * forwards


def _target_start(labels: list[int]) -> int:
    return next((k for k, lab in enumerate(labels) if lab != IGNORE_INDEX), len(labels))


def _shared_runs(rows: list[tuple[list[int], list[int]]], min_shared: int) -> list[tuple[list[int], int]]:
    """Runs of >= 2 example indices with the length of the prefix they share (see build_wm_batches)."""
    n = len(rows)
    if n < 2:
        return []
    srt = sorted(range(n), key=lambda i: rows[i][0])
    # a prefix ends before the position that predicts the first reply token, so that prediction is in the suffix
    cap = [_target_start(rows[i][1]) - 1 for i in srt]

    adjacent = [len(os.path.commonprefix([rows[srt[k]][0], rows[srt[k + 1]][0]])) for k in range(n - 1)]
    best = [0] * (n + 1)  # tokens saved by the best split of the first j sorted rows
    choice = [(0, 0)] * (n + 1)  # (start of the last run, its shared length; 0 = a single row)
    for j in range(1, n + 1):
        best[j], choice[j] = best[j - 1], (j - 1, 0)
        shared = cap[j - 1]
        for i in range(j - 2, -1, -1):  # run = sorted rows i .. j-1
            shared = min(shared, adjacent[i], cap[i])
            if shared < min_shared:
                break
            gain = best[i] + (j - i - 1) * shared
            if gain > best[j]:
                best[j], choice[j] = gain, (i, shared)
    runs, j = [], n
    while j > 0:
        i, shared = choice[j]
        if shared:
            runs.append(([srt[k] for k in range(i, j)], shared))
        j = i
    return runs[::-1]


def _length_groups(lengths: list[int], batch_tokens: int, forward_cost: int = FORWARD_COST_TOKENS) -> list[list[int]]:
    """Indices sorted by length, split into consecutive groups that minimise padded tokens plus
    ``forward_cost`` per group, each within ``rows x longest <= batch_tokens`` (a row longer than
    that is a group of its own); ``batch_tokens <= 0``: one group. Dynamic programming over the sorted
    lengths, so a few long rows get their own batch instead of padding all the short ones."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    if batch_tokens <= 0 or not order:
        return [order]
    n = len(order)
    cost = [0.0] + [float("inf")] * n
    start = [0] * (n + 1)
    for j in range(1, n + 1):  # the last group is sorted rows i .. j-1; its longest is row j-1
        longest = lengths[order[j - 1]]
        for i in range(j - 1, -1, -1):
            rows = j - i
            if rows > 1 and rows * longest > batch_tokens:
                break
            c = cost[i] + rows * longest + forward_cost
            if c < cost[j]:
                cost[j], start[j] = c, i
    groups, j = [], n
    while j > 0:
        groups.append(order[start[j] : j])
        j = start[j]
    return groups[::-1]


def _plain_plan(rows: list[tuple[list[int], list[int]]], tokenizer, batch_tokens: int,
                forward_cost: int) -> tuple[list[WMBatch], list[int]]:
    """Length batches of tokenised rows; ``batch_tokens <= 0``: one batch; no rows (a batch without predicted
    calls): no batches."""
    if not rows:
        return [], []
    if batch_tokens <= 0:
        return [_pad(rows, tokenizer)], list(range(len(rows)))
    return _length_batches(rows, tokenizer, batch_tokens, forward_cost)


def _length_batches(rows: list[tuple[list[int], list[int]]], tokenizer, batch_tokens: int,
                    forward_cost: int = FORWARD_COST_TOKENS) -> tuple[list[WMBatch], list[int]]:
    groups = _length_groups([len(ids) for ids, _ in rows], batch_tokens, forward_cost)
    return [_pad([rows[i] for i in g], tokenizer) for g in groups], [i for g in groups for i in g]


def _shared_prefix_batch(rows, runs, tokenizer, batch_tokens: int, forward_cost: int) -> tuple[SharedPrefixBatch, list[int]]:
    prefix_rows = [(rows[run[0]][0][:shared], [IGNORE_INDEX] * shared) for run, shared in runs]
    prefix_groups = _length_groups([len(ids) for ids, _ in prefix_rows], batch_tokens, forward_cost)
    prefixes, unit_of_run = [], {}
    for group in prefix_groups:
        padded = _pad([prefix_rows[u] for u in group], tokenizer)
        prefixes.append((padded.input_ids, padded.attention_mask))
        for u in group:
            unit_of_run[u] = len(unit_of_run)
    lengths = torch.tensor([len(prefix_rows[u][0]) for g in prefix_groups for u in g], dtype=torch.long)
    members = [(i, u, shared) for u, (run, shared) in enumerate(runs) for i in run]
    suffix_rows = [(rows[i][0][shared:], rows[i][1][shared:]) for i, _, shared in members]
    groups = _length_groups([len(ids) for ids, _ in suffix_rows], batch_tokens, forward_cost)
    suffixes = [_pad([suffix_rows[k] for k in g], tokenizer) for g in groups]
    units = [torch.tensor([unit_of_run[members[k][1]] for k in g], dtype=torch.long) for g in groups]
    order = [members[k][0] for g in groups for k in g]
    return SharedPrefixBatch(prefixes, lengths, suffixes, units), order


def _pad(rows: list[tuple[list[int], list[int]]], tokenizer) -> WMBatch:
    width = max(len(ids) for ids, _ in rows)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    for i, (ids, lab) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[i, : len(ids)] = 1
        labels[i, : len(lab)] = torch.tensor(lab, dtype=torch.long)
    return WMBatch(input_ids, attention, labels)
