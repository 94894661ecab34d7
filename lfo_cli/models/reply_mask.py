"""Which tokens of a multi-turn token sequence are the tool replies: the ``shared`` coupling's targets in a TRL
completion, and the reply-token loss of a world-model warm start."""

from __future__ import annotations

from collections.abc import Sequence


def reply_token_mask(tokenizer, completion_ids: Sequence[int], tool_mask: Sequence[int],
                     replies: Sequence[tuple[str, bool]]) -> list[int]:
    """Mark the tokens of tool replies inside a TRL multi-turn completion (for the `shared` coupling).

    TRL's ``tool_mask`` is 0 on every token the environment (not the model) produced: the tool
    messages plus the chat-template tokens around them. ``replies`` lists every tool reply of the
    rollout in order as ``(text, keep)``; each is searched for, in order, inside the decoded
    tool-message runs, and the tokens overlapping a kept reply are marked 1. A reply that cannot be
    found (e.g. TRL dropped an over-long tool result) is skipped, never guessed.
    """
    mask = [0] * len(completion_ids)
    runs, start = [], None
    for i, m in enumerate(list(tool_mask) + [1]):
        if m == 0 and start is None:
            start = i
        elif m != 0 and start is not None:
            runs.append((start, i))
            start = None
    r = 0
    for a, b in runs:
        ids = list(completion_ids[a:b])
        pieces = [tokenizer.decode([t]) for t in ids]
        text = "".join(pieces)
        if text != tokenizer.decode(ids):  # token pieces don't concatenate (multi-byte chars): skip run
            continue
        ends, pos = [], 0
        for p in pieces:
            pos += len(p)
            ends.append(pos)
        cursor = 0
        while r < len(replies):
            reply, keep = replies[r]
            found = text.find(reply, cursor) if reply else -1
            if found < 0:
                break
            lo, hi = found, found + len(reply)
            if keep:
                for k, end in enumerate(ends):
                    begin = end - len(pieces[k])
                    if begin < hi and end > lo:  # any overlap with the reply's characters
                        mask[a + k] = 1
            cursor, r = hi, r + 1
    return mask
