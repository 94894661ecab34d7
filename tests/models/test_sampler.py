"""The sampling loop of evaluation and GRPO rollouts against `model.generate` and against exact probabilities."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

from lfo_cli.models.sampler import left_pad, sample_turn  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    """The tiny random model with larger weights: its greedy rows vary instead of repeating one token."""
    tok = tiny_tokenizer()
    model = tiny_model(tok).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    return model, tok


def prompts(tok, n: int = 6) -> list[list[int]]:
    words = ["the rep said", "account number and the last 4 of your ssn", "please call billing",
             "fraud", "member id card email phone on file thank you", "zip code pin policy number"]
    return [tok(words[i % len(words)] * (1 + i % 3))["input_ids"] for i in range(n)]


@pytest.mark.parametrize("stop_at", [1, 2, 4])
def test_greedy_turns_are_generates_tokens_with_rows_ending_at_different_steps(tiny, stop_at):
    """An end-of-sequence id that greedy decoding emits part way through some rows: those rows leave the batch
    and the cache early, and every row's tokens are still `generate`'s (up to and including its EOS)."""
    model, tok = tiny
    batch = prompts(tok)
    ids, mask = left_pad(batch, tok.pad_token_id)
    free = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=12,
                          pad_token_id=tok.pad_token_id, eos_token_id=None)[:, ids.shape[1]:]
    row0 = free[0].tolist()
    end = next(j for j in range(stop_at, len(row0)) if row0[j] not in row0[:j])
    eos = row0[end]  # row 0 ends at step `end`; the others wherever they emit it, if at all
    ref = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=12,
                         pad_token_id=tok.pad_token_id, eos_token_id=eos)[:, ids.shape[1]:]
    got = sample_turn(model, batch, max_new_tokens=12, eos_ids=[eos], pad_id=tok.pad_token_id, temperature=0)
    lengths = set()
    for row, tokens in enumerate(got):
        expected = ref[row].tolist()
        if eos in expected:
            expected = expected[: expected.index(eos) + 1]
        assert tokens == expected, row
        lengths.add(len(tokens))
    assert len(got[0]) == end + 1 and len(lengths) > 1


def test_sampled_tokens_follow_the_softmax_at_the_temperature(tiny):
    """20,000 first tokens of one prompt against softmax(logits / T): a chi-square goodness of fit."""
    from scipy import stats

    model, tok = tiny
    prompt = prompts(tok, 1)[0]
    temperature = 0.7
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits[0, -1]
    p = torch.softmax(logits / temperature, dim=-1).double()
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros_like(p)
    for _ in range(10):
        drawn = sample_turn(model, [prompt] * 2000, max_new_tokens=1, eos_ids=[tok.eos_token_id],
                            pad_id=tok.pad_token_id, temperature=temperature, generator=g)
        counts += torch.bincount(torch.tensor([t[0] for t in drawn]), minlength=len(p)).double()
    expected = p * counts.sum()
    big = expected >= 5  # the tail pooled into one cell
    observed = torch.cat([counts[big], counts[~big].sum()[None]])
    expected = torch.cat([expected[big], expected[~big].sum()[None]])
    assert int(big.sum()) >= 10
    expected *= observed.sum() / expected.sum()  # float64 rounding of the pooled sum
    assert stats.chisquare(observed.numpy(), expected.numpy()).pvalue > 1e-3


def test_the_same_generator_state_gives_the_same_turns_and_temperature_zero_ignores_it(tiny):
    model, tok = tiny
    batch = prompts(tok)

    def run(seed, temperature):
        return sample_turn(model, batch, max_new_tokens=8, eos_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,
                           temperature=temperature, generator=torch.Generator().manual_seed(seed))

    assert run(3, 1.0) == run(3, 1.0) and run(3, 1.0) != run(4, 1.0)
    assert run(3, 0) == run(4, 0)
    assert sample_turn(model, [], max_new_tokens=4, eos_ids=[0], pad_id=0) == []


def test_a_turn_on_the_last_turns_keys_and_values_is_the_turn_read_from_scratch(tiny):
    """Three greedy turns: each prompt is the last one + its generated tokens + a 'tool result'. Read from the
    kept keys and values (only the new part is a forward), the turns are the tokens of a full prefill; a
    row whose kept prompt is not a prefix of its new one (here row 1 at the third turn) is read in full."""
    from lfo_cli.models.sampler import sample_turn_cached

    model, tok = tiny
    reply = tok("the rep said fraud")["input_ids"]
    turn = prompts(tok, 4)
    prior = [None] * len(turn)
    widths = []  # of each forward's input: a prefill reads only the new part
    hook = model.register_forward_pre_hook(lambda m, args, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    for t in range(3):
        if t == 2:
            turn[1] = tok("zip code")["input_ids"] + turn[1]  # another history: nothing reused
        fresh = sample_turn(model, turn, max_new_tokens=6, eos_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,
                            temperature=0)
        widths.clear()
        cached, kept = sample_turn_cached(model, turn, prior, max_new_tokens=6, eos_ids=[tok.eos_token_id],
                                          pad_id=tok.pad_token_id, temperature=0)
        assert cached == fresh, t
        new_part = max(len(x) - (len(p.ids) if p is not None and p.prefix_of(x) else 0) for p, x in zip(prior, turn, strict=True))
        assert widths[0] == new_part and (t != 1 or new_part < max(map(len, turn)))
        assert [k.ids for k in kept] == [tuple(x) for x in turn] and kept[0].kv[0][0].shape[1] == len(turn[0])
        prior = kept
        turn = [x + new + reply[: 1 + row] for row, (x, new) in enumerate(zip(turn, fresh, strict=True))]
    hook.remove()
