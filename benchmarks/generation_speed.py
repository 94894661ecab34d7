"""How fast `model.generate` samples a GRPO turn on CPU, and what makes it faster.

The first turn of ``--batch`` training rollouts (the GRPO prompt with the tool schemas, a task of the
training companies) is sampled with TRL's generation settings (do_sample, temperature 1, top_k 0, the
recipe's max_completion_length) from the recipe's warm start wrapped as in training (a PeftModel with the
`policy` and `world_model` adapters, `policy` active), in interleaved rounds of each variant on the same
prompts and seed:

- ``peft``: as TRL generates today (the LoRA layers run on every token);
- ``merged``: the policy adapter merged into the base weights for the generation (PEFT's
  ``merge_adapter``/``unmerge_adapter``), the LoRA layers skipped;
- ``base``: the base model alone (no LoRA at all): the floor for the model as it is;
- ``static``: ``peft`` with ``cache_implementation="static"``.

    python benchmarks/generation_speed.py --recipe observation_micro --rounds 3

Prints seconds per round and the ratio to ``peft`` (median over rounds) and tokens per second; writes
``reports/benchmarks/generation_speed_<recipe>_<date>_<commit>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from lfo_cli.io import short_commit, write_measurement

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("peft", "merged", "base", "static")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="observation_micro")
    ap.add_argument("--batch", type=int, default=32, help="rollouts per generate call (the recipe's batch)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out-dir", type=Path, default=REPO / "reports" / "benchmarks")
    a = ap.parse_args(argv)

    import torch
    from transformers import GenerationConfig

    from lfo_cli.env import load_world
    from lfo_cli.env.episode import Episode
    from lfo_cli.env.tasks import fresh_training_tasks
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models import prompts as P
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.warmstart import ensure_warmstart
    from lfo_cli.recipes import load_recipe
    from lfo_cli.train.adapters import attach_dual_lora

    torch.set_num_threads(a.threads)
    cfg = load_recipe(a.recipe).config
    base = str(ensure_warmstart(cfg.model.warmstart, data_dir=cfg.data.dir, build=False))
    model, tok = load_model(base, dtype="float32")
    model = attach_dual_lora(model, cfg.lora, with_world_model=True)
    for name, p in model.named_parameters():  # LoRA B starts at zero: give the policy adapter a trained one's
        if "lora_B" in name and ".policy" in name:
            torch.nn.init.normal_(p, std=0.02)
    model.eval()
    world = load_world(cfg.data.dir)
    tasks = fresh_training_tasks(world, a.batch, seed=0)[: a.batch]
    tools = P.tool_schemas(CustomerServiceEnv)
    env = Episode(world)
    ids = [tok.apply_chat_template(P.build_messages(env.reset(t, i)), tools=tools, add_generation_prompt=True,
                                   tokenize=True, return_dict=False) for i, t in enumerate(tasks)]
    batch = tok.pad({"input_ids": ids}, return_tensors="pt", padding_side="left")
    max_new = int(cfg.trainer.get("max_completion_length", 256))
    gen = dict(max_new_tokens=max_new, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
               pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)

    def run(variant: str) -> tuple[float, int]:
        torch.manual_seed(0)
        config = GenerationConfig(**gen, cache_implementation="static" if variant == "static" else None)
        start = time.perf_counter()
        with torch.no_grad():
            if variant == "merged":
                model.merge_adapter()
                try:
                    out = model.generate(**batch, generation_config=config)
                finally:
                    model.unmerge_adapter()
            elif variant == "base":
                with model.disable_adapter():
                    out = model.generate(**batch, generation_config=config)
            else:
                out = model.generate(**batch, generation_config=config)
        seconds = time.perf_counter() - start
        new = out[:, batch["input_ids"].shape[1]:]
        return seconds, int((new != tok.pad_token_id).sum())

    variants = a.variants.split(",")
    run(variants[0])  # warm-up: first-call costs (allocator, kernels) uncounted
    times: dict[str, list[float]] = {v: [] for v in variants}
    tokens: dict[str, list[int]] = {v: [] for v in variants}
    for r in range(a.rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):  # interleaved, order alternating
            s, n = run(v)
            times[v].append(s)
            tokens[v].append(n)
            print(f"round {r + 1}/{a.rounds} {v:<7} {s:7.2f} s  {n} tokens", flush=True)
    ref = statistics.median(times[variants[0]])
    rows = {v: {"median_s": round(statistics.median(times[v]), 3), "ratio": round(statistics.median(times[v]) / ref, 3),
                "tokens_per_s": round(sum(tokens[v]) / sum(times[v]), 1), "times": [round(t, 3) for t in times[v]],
                "tokens": tokens[v]} for v in variants}
    prompt_len = batch["input_ids"].shape[1]
    print(f"{a.recipe}: {a.batch} rollouts, first turn (prompt {prompt_len} tokens), max {max_new} new, "
          f"{a.threads} thread(s); ratio = median time / {variants[0]}'s")
    for v, row in rows.items():
        print(f"  {v:<7} {row['median_s']:7.2f} s  x{row['ratio']:.3f}  {row['tokens_per_s']:8.1f} tokens/s")
    result = {"recipe": a.recipe, "batch": a.batch, "rounds": a.rounds, "threads": a.threads, "prompt_tokens": prompt_len,
              "max_new_tokens": max_new, "variants": rows, "commit": short_commit(REPO), "date": time.strftime("%Y-%m-%d")}
    print(f"wrote {write_measurement(a.out_dir, f'generation_speed_{a.recipe}', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
