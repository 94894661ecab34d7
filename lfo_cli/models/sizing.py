"""Measure candidate ``micro`` sizes on this machine: ``python -m lfo_cli.models.sizing``.

For each candidate Qwen3 config (vocabulary = the micro tokenizer's) it times, with the process's
torch threads:

* ``fb_s``: forward + backward of one GRPO policy micro-batch, 16 sequences (4 prompts x 4
  generations) of ``--seq-len`` tokens (prompt ~80 + a multi-turn completion);
* ``gen_s``: the rollout generation of one step: ``--turns`` assistant turns of ``--turn-tokens``
  sampled tokens for 16 sequences, re-prefilling the growing conversation each turn (as TRL's tool
  loop does).

``est_step_s = gen_s + 2 * fb_s`` is a rough dual-LoRA step (policy and world-model forward+backward)
without TRL overhead; ``benchmarks/step_time.py`` measures the real thing once the trainer exists.

Measured when choosing the default (2 threads, before other jobs loaded the machine; vocab 2,060,
seq 384, 5 turns x 25 tokens):

    hidden x layers   params   fb_s   gen_s
    128 x 2           0.66M    0.77   0.99
    192 x 3           1.61M    0.94   1.40
    256 x 4           3.67M    1.29   2.34
    384 x 6          10.2M     5.07  17.9
    512 x 8          26.2M    11.5   45.2

and the SFT warm start at 256 x 4 ran ~10x slower per step once other jobs saturated the 2
cores, so the default is 192 x 4: inside the 15 s GRPO step budget with room for contention, and
a 4-layer stack for copy-style attention. (Since then the vocabulary grew to ~5,630 tokens, 2.85M
parameters, so that every 1-3 digit group is a token: see lfo_cli/models/micro.py.)
"""

from __future__ import annotations

import argparse
import time

CANDIDATES = [
    dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=384),
    dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=48, intermediate_size=576),
    dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64, intermediate_size=768),
    dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=2, head_dim=64, intermediate_size=1024),
]


def measure(arch: dict, vocab: int, seq_len: int, turns: int, turn_tokens: int, batch: int = 16) -> dict:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=vocab, tie_word_embeddings=True, max_position_embeddings=4096, **arch))
    n = sum(p.numel() for p in model.parameters())
    x = torch.randint(3, vocab, (batch, seq_len))
    model.train()
    fb = []
    for _ in range(2):
        t0 = time.perf_counter()
        model(input_ids=x, labels=x).loss.backward()
        fb.append(time.perf_counter() - t0)
    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        for turn in range(turns):
            ids = torch.randint(3, vocab, (batch, 80 + turn * (turn_tokens + 45)))
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, max_new_tokens=turn_tokens,
                           min_new_tokens=turn_tokens, pad_token_id=0, eos_token_id=1)
    gen = time.perf_counter() - t0
    return {"hidden": arch["hidden_size"], "layers": arch["num_hidden_layers"], "params_m": round(n / 1e6, 2),
            "fb_s": round(min(fb), 2), "gen_s": round(gen, 2), "est_step_s": round(gen + 2 * min(fb), 2)}


def main(argv: list[str] | None = None) -> None:
    import torch
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=2060)
    ap.add_argument("--seq-len", type=int, default=384)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--turn-tokens", type=int, default=25)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    table = Table(title=f"micro candidates ({torch.get_num_threads()} threads, 16 sequences)")
    rows = [measure(c, a.vocab, a.seq_len, a.turns, a.turn_tokens) for c in CANDIDATES]
    for col in rows[0]:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(*[str(v) for v in r.values()])
    Console().print(table)


if __name__ == "__main__":
    main()
