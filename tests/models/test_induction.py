"""Synthetic induction rows (A + A, loss on the repeat) for the warm start."""

from __future__ import annotations

import pytest

from lfo_cli.models.induction import induction_rows, ordinary_token_ids


def test_rows_repeat_their_first_half_and_mask_only_predictable_positions(tiny_tokenizer):
    rows = induction_rows(tiny_tokenizer, 50, min_len=4, max_len=20, seed=3)
    ordinary = set(ordinary_token_ids(tiny_tokenizer))
    added = set(tiny_tokenizer.get_added_vocab().values())
    assert len(rows) == 50
    for row in rows:
        ids, mask = row["input_ids"], row["assistant_masks"]
        k = len(ids) // 2
        assert 4 <= k <= 20 and len(ids) == 2 * k and len(mask) == len(ids)
        assert ids[:k] == ids[k:] and len(set(ids[:k])) == k  # distinct tokens: one answer per lookup
        # loss on the repeat after its first token: each target follows an earlier copy of its context
        assert mask == [0] * (k + 1) + [1] * (k - 1)
        assert set(ids) <= ordinary and not set(ids) & added
    assert len({len(r["input_ids"]) for r in rows}) > 1  # lengths vary


def test_rows_are_deterministic_per_seed(tiny_tokenizer):
    assert induction_rows(tiny_tokenizer, 5, seed=1) == induction_rows(tiny_tokenizer, 5, seed=1)
    assert induction_rows(tiny_tokenizer, 5, seed=1) != induction_rows(tiny_tokenizer, 5, seed=2)


@pytest.mark.parametrize(("kw", "match"), [({"n": -1}, "n must"), ({"n": 1, "min_len": 0}, "min_len"),
                                            ({"n": 1, "min_len": 9, "max_len": 8}, "min_len")])
def test_bad_arguments_are_rejected(tiny_tokenizer, kw, match):
    n = kw.pop("n")
    with pytest.raises(ValueError, match=match):
        induction_rows(tiny_tokenizer, n, **kw)


def _copy_accuracy(model, rows) -> float:
    import torch

    correct = total = 0
    model.eval()
    for row in rows:
        ids = torch.tensor([row["input_ids"]])
        mask = torch.tensor(row["assistant_masks"][1:]).bool()
        with torch.no_grad():
            pred = model(input_ids=ids).logits[0, :-1].argmax(-1)
        correct += int((pred[mask] == ids[0, 1:][mask]).sum())
        total += int(mask.sum())
    return correct / total


@pytest.mark.parametrize("seed", [0, 7])
def test_installed_circuit_copies_at_initialisation_and_a_plain_init_does_not(tiny_tokenizer, seed):
    """The hand-built previous-token + induction heads predict the repeat of unseen random sequences
    before any training; the same architecture without them is at chance."""
    from lfo_cli.models.micro import MicroArch, init_model

    arch = MicroArch(hidden_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                     intermediate_size=64, init_seed=seed)
    rows = induction_rows(tiny_tokenizer, 24, min_len=8, max_len=40, seed=100 + seed)
    assert _copy_accuracy(init_model(tiny_tokenizer, arch), rows) > 0.85
    plain = MicroArch(**{**arch.__dict__, "induction_init": False})
    assert _copy_accuracy(init_model(tiny_tokenizer, plain), rows) < 0.05


def test_circuit_refuses_architectures_that_cannot_hold_it(tiny_tokenizer):
    from lfo_cli.models.micro import MicroArch, init_model

    with pytest.raises(ValueError, match="2 layers"):
        init_model(tiny_tokenizer, MicroArch(hidden_size=96, num_hidden_layers=1, num_attention_heads=4,
                                             num_key_value_heads=2, head_dim=32, intermediate_size=64))
    with pytest.raises(ValueError, match="rope_theta"):
        init_model(tiny_tokenizer, MicroArch(hidden_size=96, num_hidden_layers=2, num_attention_heads=4,
                                             num_key_value_heads=2, head_dim=32, intermediate_size=64,
                                             rope_theta=10_000.0))
