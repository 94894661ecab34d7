"""The policy loss's forward + backward in length groups (`trainer.loss_length_groups`) against one padded batch.

A batch shaped like a GRPO micro-batch of `observation_micro` (32 rollouts: prompts of ~80 tokens with up to
10 of left padding, completions drawn with the observation study's mean length, 69 tokens, capped at its
usual longest, 159) goes through the recipe's warm start with both adapters attached, in interleaved
rounds per group count; prints the median seconds and the ratio to one forward.

    python benchmarks/loss_length_groups.py --groups 1,4,8 --rounds 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="observation_micro")
    ap.add_argument("--groups", default="1,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    import torch

    from lfo_cli.models.registry import load_model
    from lfo_cli.models.warmstart import ensure_warmstart
    from lfo_cli.recipes import load_recipe
    from lfo_cli.train.adapters import attach_dual_lora
    from lfo_cli.train.length_groups import forward_in_length_groups

    torch.set_num_threads(a.threads)
    cfg = load_recipe(a.recipe).config
    model, _ = load_model(str(ensure_warmstart(cfg.model.warmstart, data_dir=cfg.data.dir, build=False)))
    model = attach_dual_lora(model, cfg.lora).train()
    rng = random.Random(0)
    prompt = 80
    lengths = [max(10, min(159, int(rng.expovariate(1 / 69)))) for _ in range(a.rows)]
    width = max(lengths)
    ids = torch.randint(10, 5000, (a.rows, prompt + width))
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, rng.randint(0, 10):prompt + n] = 1

    def forward(i, m, keep):
        logits = model(input_ids=i, attention_mask=m).logits[:, -keep - 1:-1]
        return torch.log_softmax(logits, -1).gather(-1, i[:, -keep:, None])[..., 0], None

    groups = [int(g) for g in a.groups.split(",")]
    seconds: dict[int, list[float]] = {g: [] for g in groups}
    for r in range(a.rounds):
        for g in (groups if r % 2 == 0 else groups[::-1]):
            model.zero_grad()
            start = time.perf_counter()
            logps, _ = forward_in_length_groups(forward, ids, mask, width, g)
            (logps * mask[:, -width:]).sum().backward()
            seconds[g].append(time.perf_counter() - start)
    ref = statistics.median(seconds[groups[0]])
    print(f"{a.rows} rollouts, completions mean {sum(lengths) / len(lengths):.0f} / longest {width} tokens, "
          f"{a.threads} thread(s)")
    for g in groups:
        med = statistics.median(seconds[g])
        print(f"  {g} group(s): {med:.3f} s  x{med / ref:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
