"""Synthetic induction rows: random token sequences shown twice, loss on the repeat.

Why: an agent must *copy* values it read (a number from a directory, a value from a reply) into its next
call's arguments. A transformer copies with an induction
circuit (a previous-token head feeding a head that attends to "the token after the last occurrence
of my current token"), and a from-scratch 3M-parameter model trained for minutes on tool-calling
chats had not formed one: copied tokens were predicted 21-25% of the time. Sequences whose second
half repeats the first are the classic way to make that circuit form fast, because nothing but
copying lowers their loss. Mixed into the warm start's SFT data (``data.induction_rows``), they
teach the mechanism; the chats teach *what* to copy and where.

Rows have the SFT dataset's shape: ``input_ids`` and ``assistant_masks`` (1 on the repeat, the
positions the loss is computed on). Tokens are drawn from the tokenizer's ordinary (BPE) vocabulary,
never special or added tokens, so the rows teach no chat syntax.
"""

from __future__ import annotations

import random
from typing import Any


def ordinary_token_ids(tokenizer: Any) -> list[int]:
    """Ids of the learned vocabulary: not special, not added (markup, boilerplate)."""
    added = set(tokenizer.get_added_vocab().values())
    special = set(tokenizer.all_special_ids)
    return sorted(i for i in tokenizer.get_vocab().values() if i not in added and i not in special)


def induction_rows(
    tokenizer: Any, n: int, *, min_len: int = 8, max_len: int = 48, seed: int = 0
) -> list[dict[str, list[int]]]:
    """``n`` rows ``A + A`` with ``A`` a uniform random token sequence of ``min_len..max_len`` tokens.

    The mask covers the second copy except its first token (which nothing in the row predicts), so
    every masked target is predictable by exactly one mechanism: look up what followed this token in
    the first half.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    vocab = ordinary_token_ids(tokenizer)
    if len(vocab) < 2 * max_len:
        raise ValueError(f"the tokenizer's ordinary vocabulary ({len(vocab)}) is too small for max_len={max_len}")
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        k = rng.randint(min_len, max_len)
        a = rng.sample(vocab, k)  # distinct tokens: each lookup has a single answer
        rows.append({"input_ids": a + a, "assistant_masks": [0] * (k + 1) + [1] * (k - 1)})
    return rows
