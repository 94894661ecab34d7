"""SparseDropout: nn.Dropout's distribution from fewer random numbers, swapped into PEFT's LoRA layers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

from lfo_cli.train import dropout as dropout_mod  # noqa: E402
from lfo_cli.train.adapters import LoraSettings, attach_dual_lora  # noqa: E402
from lfo_cli.train.dropout import SparseDropout, dropped_positions, sparse_dropout  # noqa: E402


@pytest.mark.parametrize("p", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("n", [1, 7, 1000, 50_001])
def test_positions_are_sorted_unique_and_in_range(n, p):
    g = torch.Generator().manual_seed(n)
    pos = dropped_positions(n, p, g)
    assert pos.dtype == torch.long
    assert bool((pos >= 0).all()) and bool((pos < n).all())
    assert bool((pos[1:] > pos[:-1]).all())


@pytest.mark.parametrize("p", [0.05, 0.5])
def test_every_position_is_dropped_independently_with_probability_p(p):
    """Per-position drop counts over many draws are Binomial(trials, p) at every index, and the drops
    of neighbouring positions are uncorrelated (a chunk boundary or the inversion would show here)."""
    n, trials = 400, 3000
    g = torch.Generator().manual_seed(1)
    hits = torch.zeros(trials, n)
    for t in range(trials):
        hits[t, dropped_positions(n, p, g)] = 1.0
    per_position = hits.sum(0)
    # counts per position against Binomial(trials, p): chi-square over all positions
    expected, var = trials * p, trials * p * (1 - p)
    chi2 = float(((per_position - expected) ** 2 / var).sum())
    assert stats.chi2.sf(chi2, df=n) > 1e-3
    # total drops per draw ~ Binomial(n, p)
    totals = hits.sum(1)
    assert abs(float(totals.mean()) - n * p) < 5 * (n * p * (1 - p) / trials) ** 0.5
    # adjacent positions: P(both dropped) = p^2
    both = float((hits[:, 1:] * hits[:, :-1]).mean())
    assert abs(both - p * p) < 6 * (p * p * (1 - p * p) / (trials * (n - 1))) ** 0.5


def test_gaps_follow_the_geometric_law_across_chunk_boundaries():
    """One long process drawn in many chunks: its gaps are Geometric(p) (chi-square on 1..30+)."""
    p = 0.05
    n = 2_000_000
    g = torch.Generator().manual_seed(3)
    pos = dropped_positions(n, p, g)
    gaps = torch.diff(pos).numpy()
    edges = list(range(1, 31))
    observed = [int((gaps == k).sum()) for k in edges] + [int((gaps > 30).sum())]
    probs = [(1 - p) ** (k - 1) * p for k in edges] + [(1 - p) ** 30]
    expected = [len(gaps) * q for q in probs]
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_sparse_dropout_scales_kept_values_and_its_gradient_is_the_mask():
    x = torch.randn(300, 192, requires_grad=True)
    torch.manual_seed(0)
    y = sparse_dropout(x, 0.05)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / 0.95)
    assert 0.03 < 1 - float(kept.float().mean()) < 0.07
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / 0.95)


def test_same_seed_same_mask_and_different_seeds_differ():
    x = torch.ones(200, 192)
    module = SparseDropout(0.05).train()
    torch.manual_seed(7)
    a = module(x)
    torch.manual_seed(7)
    b = module(x)
    torch.manual_seed(8)
    c = module(x)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_module_falls_back_to_nn_dropout_where_the_draw_does_not_pay(monkeypatch):
    calls = []
    monkeypatch.setattr(dropout_mod, "sparse_dropout", lambda x, p: calls.append(x.numel()) or x)
    module = SparseDropout(0.05)
    big, small = torch.ones(dropout_mod.MIN_ELEMENTS), torch.ones(dropout_mod.MIN_ELEMENTS - 1)
    module.train()(big)
    module(small)  # small: nn.Dropout
    module.eval()
    assert torch.equal(module(big), big)  # eval: identity
    assert calls == [dropout_mod.MIN_ELEMENTS]


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1])
def test_positions_reject_probabilities_outside_0_1(bad):
    with pytest.raises(ValueError, match="p must be in"):
        dropped_positions(10, bad)


def test_attach_dual_lora_swaps_every_lora_dropout_and_changes_no_checkpoint_key():
    tok = tiny_tokenizer()
    settings = LoraSettings(r=4, alpha=8, dropout=0.05)
    fast = attach_dual_lora(tiny_model(tok), settings)
    plain = attach_dual_lora(tiny_model(tok), LoraSettings(r=4, alpha=8, dropout=0.05, sparse_dropout=False))
    fast_drops = [m for mod in fast.modules() if isinstance(getattr(mod, "lora_dropout", None), torch.nn.ModuleDict)
                  for m in mod.lora_dropout.values()]
    plain_drops = [m for mod in plain.modules() if isinstance(getattr(mod, "lora_dropout", None), torch.nn.ModuleDict)
                   for m in mod.lora_dropout.values()]
    assert fast_drops and len(fast_drops) == len(plain_drops)
    assert all(type(m) is SparseDropout and m.p == 0.05 for m in fast_drops)
    assert all(type(m) is torch.nn.Dropout for m in plain_drops)
    assert list(fast.state_dict()) == list(plain.state_dict())


def test_a_stacked_world_model_step_runs_through_sparse_dropout_and_trains_both_adapters(monkeypatch):
    from lfo_cli.train.adapters import POLICY, WORLD_MODEL, active, adapter_params
    from lfo_cli.train.wm_batches import build_batch
    from lfo_cli.train.wm_loss import world_model_forward

    monkeypatch.setattr(dropout_mod, "MIN_ELEMENTS", 1)  # the tiny model's activations take the sparse path
    calls = []
    real = dropout_mod.sparse_dropout
    monkeypatch.setattr(dropout_mod, "sparse_dropout", lambda x, p: calls.append(p) or real(x, p))
    tok = tiny_tokenizer()
    model = attach_dual_lora(tiny_model(tok), LoraSettings(r=4, alpha=8, dropout=0.05))
    model.train()
    text = "<|state|>call billing<|/state|><|predict_csr|>" + "<|csr|>account number please<|/csr|>"
    start = text.index("<|csr|>")
    batch = build_batch(tok, [(text, (start, len(text)))] * 3, max_length=64)
    with active(model, [POLICY, WORLD_MODEL]):
        loss, _, _ = world_model_forward(model, batch)
    loss.backward()
    assert calls and set(calls) == {0.05}
    for name in (POLICY, WORLD_MODEL):
        grads = [p.grad for p in adapter_params(model, name) if p.grad is not None]
        assert grads and any(float(g.abs().sum()) > 0 for g in grads)


def test_sparse_dropout_of_a_transposed_input_drops_the_same_elements_in_forward_and_backward():
    x = torch.randn(192, 400).t().requires_grad_()  # non-contiguous, as a LoRA input can be
    torch.manual_seed(1)
    y = sparse_dropout(x, 0.05)
    kept = y != 0
    assert y.shape == x.shape and 0.03 < 1 - float(kept.float().mean()) < 0.07
    assert torch.allclose(y[kept], x[kept] / 0.95)
    g = torch.randn_like(y)
    y.backward(g)
    assert torch.allclose(x.grad, g * kept / 0.95)
